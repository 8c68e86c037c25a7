"""The README and the guides in docs/ (issue 26): the README fits one screen, every relative link in them and in the
notebooks resolves, every command they name exists (make targets and variables from the Makefile, each module's
options from its --help, nbgrader's and Dask's from themselves), the library reference is generated from the
docstrings and the library guide's examples run. The guides on the site: tests/test_course_site.py and
tests/browser/test_site.py."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import runpy
import shlex
import sys
import warnings
from functools import cache
from pathlib import Path

import nbformat
import pytest

from course_tools import site
from course_tools.release import REPO

README = REPO / "README.md"
GUIDES = sorted((REPO / "docs").glob("*.md"))
DOCUMENTS = [README, *GUIDES]
NOTEBOOKS = sorted([*(REPO / "course").glob("*.ipynb"), *(REPO / "exercises").glob("*/*.ipynb"),
                    *(REPO / "solutions").glob("*/*.ipynb"), *(REPO / "autograder" / "source").glob("*/*.ipynb")])
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.S | re.M)


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


# ---------------------------------------------------------------------------------------------------------------
# The README and the guides


def test_the_readme_fits_one_screen_and_links_every_guide():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 120, f"README.md has {len(text.splitlines())} lines; move detail to docs/"
    for guide in GUIDES:
        assert f"(docs/{guide.name}" in text, f"the README does not link {rel(guide)}"
    for command in ("make lab", "make test"):
        assert f"{command} " in text, f"the README lost `{command}`"


def test_every_guide_is_on_the_site():
    assert [g.stem for g in GUIDES] == sorted(site.GUIDES), "docs/*.md and course_tools.site.GUIDES differ"


# ---------------------------------------------------------------------------------------------------------------
# Links


def github_anchors(markdown: str) -> set[str]:
    """The ids GitHub gives the headings of a Markdown file (code blocks left out; duplicates numbered)."""
    anchors: set[str] = set()
    for line in FENCE.sub("", markdown).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            slug = site.github_slug(match.group(1).strip())
            count = sum(1 for a in anchors if a == slug or re.fullmatch(re.escape(slug) + r"-\d+", a))
            anchors.add(f"{slug}-{count}" if count else slug)
    return anchors


def markdown_links(text: str) -> list[str]:
    text = FENCE.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)  # code spans hold examples, not links
    links = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    links += re.findall(r"(?:href|src)=\"([^\"]+)\"", text)
    return links


def broken_links(text: str, source: Path) -> list[str]:
    broken = []
    for link in markdown_links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # https:, mailto:, data: ...
            continue
        path, _, fragment = link.partition("#")
        target = (source.parent / path).resolve() if path else source
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in github_anchors(target.read_text("utf-8")):
            broken.append(f"{link} (no heading #{fragment} in {target.name})")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=rel)
def test_relative_links_in_the_readme_and_guides_resolve(document):
    broken = broken_links(document.read_text(encoding="utf-8"), document)
    assert not broken, f"{rel(document)}: broken links {broken}"


def test_relative_links_in_the_notebooks_resolve():
    broken = []
    for notebook in NOTEBOOKS:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "markdown":
                broken += [f"{rel(notebook)}: {b}" for b in broken_links(cell.source, notebook)]
    assert not broken, broken


def test_the_link_check_finds_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Grading a big class\n", encoding="utf-8")
    text = "[a](page.md#grading-a-big-class) [b](missing.md) [c](page.md#nowhere) [d](https://example.org/x)"
    assert broken_links(text, tmp_path / "here.md") == ["missing.md (no such file)",
                                                        "page.md#nowhere (no heading #nowhere in page.md)"]


# ---------------------------------------------------------------------------------------------------------------
# Commands: every one the README and the guides name must exist


@cache
def makefile() -> tuple[set[str], set[str]]:
    """The Makefile's targets and the variables it reads or sets."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, flags=re.M))
    targets |= {t for line in re.findall(r"^\.PHONY:(.*)$", text, flags=re.M) for t in line.split()}
    variables = set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", text))
    variables |= set(re.findall(r"^(?:ifndef |ifdef |export )?([A-Z][A-Z0-9_]*)\s*(?:\?=|:=|=|$)", text, flags=re.M))
    return targets, variables


@cache
def cli_help(*argv: str) -> str:
    """What `python -m MODULE ... --help` (or `python SCRIPT --help`) prints, run in this process."""
    target, *rest = argv
    saved = sys.argv
    sys.argv = [target, *rest, "--help"]
    out = io.StringIO()
    try:
        with (contextlib.redirect_stdout(out), pytest.raises(SystemExit), warnings.catch_warnings()):
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before
            if target.endswith(".py"):
                runpy.run_path(str(REPO / target), run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=False)
    finally:
        sys.argv = saved
    return out.getvalue()


def help_options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def subcommands(text: str) -> set[str]:
    """argparse lists subcommands as a positional argument `{a,b}` on a line of its own."""
    found = re.findall(r"^\s+\{([\w,-]+)\}", text, flags=re.M)
    return set(found[0].split(",")) if found else set()


@cache
def nbgrader_app(sub: str):
    from nbgrader.apps import NbGraderApp
    from traitlets.utils.importstring import import_item

    app = NbGraderApp.subcommands[sub][0]
    return import_item(app) if isinstance(app, str) else app


def configurable_has(option: str, classes) -> bool:
    """--Class.trait=value: a configurable class of that name (among `classes` and their bases) has the trait."""
    name, _, trait = option.removeprefix("--").partition("=")[0].partition(".")
    seen = {c for cls in classes for c in cls.mro()}
    return any(c.__name__ == name and trait in c.class_trait_names() for c in seen if hasattr(c, "class_trait_names"))


@cache
def nbgrader_classes() -> tuple:
    """Every configurable class nbgrader's commands can be configured through (those loaded with its apps)."""
    import nbgrader.apps  # noqa: F401
    from nbgrader.apps import NbGraderApp
    from traitlets.config import Configurable

    for sub in NbGraderApp.subcommands:
        nbgrader_app(sub)
    classes, todo = set(), [Configurable]
    while todo:
        cls = todo.pop()
        for subclass in cls.__subclasses__():
            if subclass not in classes:
                classes.add(subclass)
                todo.append(subclass)
    return tuple(classes)


@cache
def dask_options(command: str) -> set[str]:
    if command == "worker":
        from distributed.cli.dask_worker import main
    else:
        from distributed.cli.dask_scheduler import main
    return {o for p in main.params for o in p.opts + p.secondary_opts}


@cache
def jupyter_options(sub: str) -> set[str]:
    if sub == "lab":
        from jupyterlab.labapp import LabApp as App
    else:
        from nbconvert.nbconvertapp import NbConvertApp as App
    return {f"--{k}" if len(k) > 1 else f"-{k}" for k in [*App.flags, *App.aliases]
            for k in ([k] if isinstance(k, str) else k)}


# Programs of the operating system, of conda or of Slurm: the docs quote them for the reader; not ours to check.
EXTERNAL = {"conda", "unshare", "sysctl", "chmod", "sh", "ip", "id", "sudo", "apt-get", "source", "pip"}
EXTERNAL_OPTIONS = {"--gres"}  # sbatch's, which `ENGINE=slurm GPUS=1` passes on


def commands_in(text: str) -> list[str]:
    """Shell lines of bash blocks, and code spans that start with a program, with `&&` chains split."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang in ("bash", "sh", "shell", "console"):
            found += [line.split("  #")[0].strip() for line in body.splitlines()
                      if line.strip() and not line.lstrip().startswith("#")]
    for span in re.findall(r"`([^`]+)`", FENCE.sub("", text)):
        span = " ".join(span.split())
        if re.match(r"(make|nbgrader|jupyter|dask|conda|python[\d.]*|pytest|unshare|sysctl|source)( |$)|"
                    r"\.venv/bin/|~/venv/bin/|[A-Z_]+=\S* (\.venv/bin/|make |python)|benchmarks/\S+\.py|"
                    r"\.ci/\S+ |--", span):
            found.append(span)
    return [part.strip() for command in found for part in command.split("&&")]


def problems_with(command: str) -> list[str]:
    """What does not exist in one command line ([] when all of it does)."""
    words = shlex.split(command.replace("[", "").replace("]", "").replace("<", "").replace(">", ""))
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # environment assignments before the program
        words = words[1:]
    if not words:
        return []
    program, args = re.sub(r"^(\.venv|~/venv)/bin/", "", words[0]), words[1:]
    options = [a for a in args if a.startswith("-") and a != "-"]
    if program.startswith("--"):  # an option named alone: it must belong to one of the course's commands
        return [] if option_known(program.partition("=")[0], words) else [f"{program}: no command has it"]
    if program in EXTERNAL:
        return []
    if program == "make":
        targets, variables = makefile()
        bad = [a for a in args if "=" not in a and a not in targets and a != "..."]
        bad += [a.split("=")[0] for a in args if "=" in a and a.split("=")[0] not in variables]
        return [f"make: {b} is neither a target nor a variable of the Makefile" for b in bad]
    if re.fullmatch(r"python[\d.]*", program):
        if args[:1] == ["-m"]:
            module, rest = args[1], args[2:]
            if module in ("venv", "pip", "pytest"):
                return []
            return cli_problems((module,), rest)
        if args and args[0].endswith(".py"):
            if not (REPO / args[0]).is_file():
                return [f"{args[0]}: no such script"]
            return cli_problems((args[0],), args[1:])
        return []
    if program.endswith(".py"):
        return [f"{program}: no such script"] if not (REPO / program).is_file() else cli_problems((program,), args)
    if program.startswith(".ci/"):
        script = REPO / program
        if not script.is_file():
            return [f"{program}: no such script"]
        if args and not re.search(rf"^\s*{re.escape(args[0])}\)", script.read_text(encoding="utf-8"), flags=re.M):
            return [f"{program} has no command {args[0]}"]
        return []
    if program == "nbgrader":
        from nbgrader.apps import NbGraderApp

        if not args:
            return []
        if args[0] not in NbGraderApp.subcommands:
            return [f"nbgrader has no subcommand {args[0]}"]
        app = nbgrader_app(args[0])
        known = {f"--{k}" for k in [*app.flags, *app.aliases] if isinstance(k, str)}
        return [f"nbgrader {args[0]}: no option {o}" for o in options
                if o.split("=")[0] not in known and not configurable_has(o, nbgrader_classes())]
    if program == "jupyter":
        known = jupyter_options(args[0])
        return [f"jupyter {args[0]}: no option {o}" for o in options if o.split("=")[0] not in known]
    if program == "dask":
        known = dask_options(args[0])
        return [f"dask {args[0]}: no option {o}" for o in options if o.split("=")[0] not in known]
    if program == "pytest":
        return []
    return [f"{program}: a program the docs' check does not know (add it to tests/test_docs.py)"]


def cli_problems(target: tuple[str, ...], args: list[str]) -> list[str]:
    if not args:  # named without arguments: it must exist
        exists = (REPO / target[0]).is_file() if target[0].endswith(".py") else importlib.util.find_spec(target[0])
        return [] if exists else [f"{target[0]}: no such module"]
    text = cli_help(*target)
    subs = subcommands(text)
    if subs:
        if not args or args[0] not in subs:
            return [f"{target[0]}: no subcommand {args[:1]} (has {sorted(subs)})"]
        target, args = (*target, args[0]), args[1:]
        text = cli_help(*target)
    known = help_options(text)
    return [f"{' '.join(target)}: no option {a}" for a in args
            if a.startswith("--") and a.split("=")[0] not in known]


COURSE_CLIS = [("course_tools.run_notebooks",), ("course_tools.notebook_matrix",), ("course_tools.site",),
               ("course_tools.grading.autograde",), ("course_tools.release",), ("course_tools.readme_table",),
               ("benchmarks/autograde_speed.py",)]


def option_known(option: str, words: list[str]) -> bool:
    if option in EXTERNAL_OPTIONS:
        return True
    if "." in option:  # --Class.trait=value: nbgrader's configuration
        return configurable_has(option, nbgrader_classes())
    known = set().union(*(help_options(cli_help(*c)) for c in COURSE_CLIS))
    known |= dask_options("worker") | dask_options("scheduler") | jupyter_options("lab")
    return option in known


def test_every_command_in_the_readme_and_guides_exists():
    problems = []
    for document in DOCUMENTS:
        for command in commands_in(document.read_text(encoding="utf-8")):
            problems += [f"{rel(document)}: `{command}`: {p}" for p in problems_with(command)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command, problem", [
    ("make lab-teacher", "neither a target nor a variable"),
    ("make autograde SPEED=3", "SPEED is neither a target nor a variable"),
    (".venv/bin/python -m course_tools.run_notebooks --fastest", "no option --fastest"),
    (".venv/bin/python -m torchdoctor diagnose x", "no subcommand"),
    ("nbgrader grade_everything", "no subcommand"),
    ("nbgrader generate_assignment x --CourseDirectory.no_such_trait=1", "no option"),
    ("--no-such-option", "no command has it"),
])
def test_the_command_check_finds_what_does_not_exist(command, problem):
    assert any(problem in p for p in problems_with(command)), problems_with(command)


def test_the_command_check_accepts_what_exists():
    for command in ("make autograde ENGINE=slurm WORKERS=64 [GPUS=1]", "make test-notebooks-matrix CONFIG=\"a b\"",
                    ".venv/bin/python -m torchdoctor explain \"Target 10 is out of bounds.\"",
                    "nbgrader generate_assignment x --CourseDirectory.db_url=...",
                    "--torch-threads", "dask worker tcp://h:8786 --nthreads 1 --nworkers 4",
                    "jupyter nbconvert --clear-output --inplace x.ipynb", ".ci/grading_services.sh slurm-start"):
        assert problems_with(command) == [], (command, problems_with(command))


# ---------------------------------------------------------------------------------------------------------------
# The library reference and its examples


def test_the_library_reference_is_generated_from_the_docstrings():
    _, current, _ = site.split_library(site.LIBRARY.read_text(encoding="utf-8"))
    assert current == site.library_reference(), (
        "docs/library.md's reference is stale: run `.venv/bin/python -m course_tools.site --library-reference`")


def test_the_library_reference_covers_every_public_name():
    import torchdoctor

    _, current, _ = site.split_library(site.LIBRARY.read_text(encoding="utf-8"))
    assert re.findall(r"^### (\w+)$", current, flags=re.M) == list(torchdoctor.__all__)


def library_examples() -> list[str]:
    text = site.LIBRARY.read_text(encoding="utf-8").split(site.REFERENCE_BEGIN)[0]
    return [body for lang, body in FENCE.findall(text) if lang == "python"]


@pytest.mark.parametrize("index", range(len(library_examples())))
def test_the_library_guide_examples_run(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = library_examples()[index]
    exec(compile(code, f"docs/library.md example {index + 1}", "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out or "print(" not in code
