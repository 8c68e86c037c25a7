"""Build the course site (``make site``): static HTML of every ready chapter and of the cheat sheet, from the
executed notebooks in build/notebooks/ (outputs, tracebacks, plots), with a table of contents from course.toml.

Each page links to its notebook (the committed copy, without outputs) and to its homework (the starter from
exercises/). Solutions are never published: nothing is read from solutions/ or autograder/ for a page, and the
build fails if a solution cell's code appears in a published notebook. Executed notebooks that are missing, or
older than their source, are executed first with ``course_tools.run_notebooks`` (FAST mode, CPU unless --device
says otherwise); with --no-run a missing one is an error and an older one a warning.

The tool is nbconvert (already pinned: it is part of the grading stack) with a small template,
course_tools/site_template/: see README "Course site" for why not Jupyter Book or Sphinx.

Usage: python -m course_tools.site [--out build/site] [--no-run] [--device auto|cpu|cuda|mps]
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jinja2
import markupsafe
import nbformat

from course_tools.release import REPO
from torchdoctor.manifest import load_manifest

BUILD = REPO / "build" / "notebooks"
OUT = REPO / "build" / "site"
TEMPLATE = Path(__file__).resolve().parent / "site_template"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@dataclass(frozen=True)
class Page:
    """One page of the site: a ready chapter or a reference notebook (the cheat sheet)."""

    notebook: str  # relative to the repository, e.g. course/01_dimensions.ipynb
    title: str
    label: str  # "01 Dimensions and shapes", "Cheat sheet"
    covers: str
    homework: str | None

    @property
    def html_name(self) -> str:
        return Path(self.notebook).with_suffix(".html").name

    @property
    def executed(self) -> Path:
        return BUILD / self.notebook

    def executed_in(self, folder: Path) -> Path:
        return folder / self.notebook


def pages() -> list[Page]:
    manifest = load_manifest()
    ready = set(manifest.assignment_names("ready"))
    chapters = [Page(c.notebook, c.title, c.label, c.covers, c.homework if c.homework in ready else None)
                for c in manifest.chapters if c.status == "ready"]
    references = [Page(r.notebook, r.title, r.title, r.covers, None) for r in manifest.references]
    return chapters + references


def ensure_executed(wanted: list[Page], run: bool, device: str) -> None:
    """Execute (FAST mode) the notebooks whose executed copy is missing or older than the source."""
    missing = [p.notebook for p in wanted if not p.executed.exists()]
    stale = [p.notebook for p in wanted
             if p.executed.exists() and p.executed.stat().st_mtime < (REPO / p.notebook).stat().st_mtime]
    if not run:
        if missing:
            raise SystemExit(f"not executed yet: {', '.join(missing)}. Run `make test-notebooks` (or leave out "
                             "--no-run).")
        if stale:
            print(f"warning: executed before their last change, published as they were: {', '.join(stale)}")
        return
    if missing or stale:
        print(f"executing first: {', '.join(missing + stale)}", flush=True)
        subprocess.run([sys.executable, "-m", "course_tools.run_notebooks", "--device", device, *missing, *stale],
                       cwd=REPO, check=True)


# ---------------------------------------------------------------------------------------------------------------
# Outputs a static page cannot run: widgets (tqdm's progress bars, the cheat sheet's search) drawn from the state
# the runner saved, and progress text written with carriage returns.


def _widget_html(model_id: str, state: dict, depth: int = 0) -> str:
    model = state.get(model_id)
    if model is None or depth > 20:
        return ""
    name = model.get("model_name", "")
    s = model.get("state", {})
    children = [c.removeprefix("IPY_MODEL_") for c in s.get("children", [])]
    if name in ("HBoxModel", "VBoxModel", "BoxModel", "GridBoxModel"):
        kind = "hbox" if name == "HBoxModel" else "vbox"
        inner = "".join(_widget_html(c, state, depth + 1) for c in children)
        return f'<div class="td-widget td-{kind}">{inner}</div>'
    if name in ("HTMLModel", "HTMLMathModel"):
        return f'<div class="td-widget td-html">{s.get("description", "")}{s.get("value", "")}</div>'
    if name in ("LabelModel",):
        return f'<span class="td-widget">{html.escape(str(s.get("value", "")))}</span>'
    if name in ("FloatProgressModel", "IntProgressModel"):
        value, top = s.get("value", 0), s.get("max", 100)
        style = s.get("bar_style", "") or "info"
        return f'<progress class="td-progress td-{style}" value="{value}" max="{top}"></progress>'
    if name in ("TextModel", "TextareaModel"):
        placeholder = html.escape(str(s.get("placeholder", "")))
        return (f'<input class="td-widget" type="text" disabled placeholder="{placeholder}" '
                f'value="{html.escape(str(s.get("value", "")))}">')
    if name in ("DropdownModel", "SelectModel"):
        labels = s.get("_options_labels", [])
        index = s.get("index") or 0
        label = labels[index] if 0 <= index < len(labels) else ""
        return f'<select class="td-widget" disabled><option>{html.escape(str(label))}</option></select>'
    return ""


def static_widgets(nb: nbformat.NotebookNode) -> int:
    """Replace each widget output by HTML drawn from the saved widget state; return how many were replaced."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            drawn = _widget_html(data[WIDGET_VIEW].get("model_id", ""), state)
            interactive = any(m.get("model_name") in ("TextModel", "DropdownModel")
                              for m in (state.get(data[WIDGET_VIEW].get("model_id", ""), {}),))
            note = ('<p class="td-note">Interactive in JupyterLab: run the notebook to use these controls.</p>'
                    if interactive or "<input" in drawn or "<select" in drawn else "")
            del data[WIDGET_VIEW]
            if drawn:
                data["text/html"] = drawn + note
            replaced += 1
    nb.metadata.pop("widgets", None)  # no widget manager (and no script from a CDN) on a static page
    return replaced


def settle_carriage_returns(nb: nbformat.NotebookNode) -> None:
    """Keep what a terminal shows of text rewritten in place with \\r (text-mode progress bars)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and "\r" in output.get("text", ""):
                lines = output["text"].replace("\r\n", "\n").split("\n")
                output["text"] = "\n".join(line.rsplit("\r", 1)[-1] for line in lines)


# ---------------------------------------------------------------------------------------------------------------


def solution_cells() -> list[str]:
    """The code of every solution cell of every assignment (three lines or more): none may reach the site."""
    sources = []
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            code = cell.source.strip()
            if cell.metadata.get("nbgrader", {}).get("solution") and code.count("\n") >= 2:
                sources.append(code)
    return sources


def leaked_solutions(notebooks: list[Path]) -> list[str]:
    """Which published notebooks hold a solution cell's code verbatim."""
    secrets = solution_cells()
    found = []
    for path in notebooks:
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        found += [f"{path.name}: {code.splitlines()[0]} ..." for code in secrets if code in text]
    return found


def inline_code(text: str) -> markupsafe.Markup:
    """course.toml's Markdown backticks as <code>, the rest escaped."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


def build(out: Path = OUT, run: bool = True, device: str = "cpu", executed: Path = BUILD) -> list[Path]:
    """Write the site to `out` from the executed notebooks under `executed` (build/notebooks/, or a snapshot of
    it: the tests use one)."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    wanted = pages()
    if executed == BUILD:
        ensure_executed(wanted, run, device)
    if out.exists():
        shutil.rmtree(out)
    (out / "notebooks").mkdir(parents=True)
    (out / "homework").mkdir()

    exporter = HTMLExporter(config=Config({"TemplateExporter": {"extra_template_basedirs": [str(TEMPLATE)]}}),
                            template_name="torchdoctor")
    manifest = load_manifest()
    toc = [{"label": c.label, "covers": c.covers, "href": Path(c.notebook).with_suffix(".html").name
            if c.status == "ready" else None} for c in manifest.chapters]
    toc += [{"label": r.title, "covers": r.covers, "href": Path(r.notebook).with_suffix(".html").name}
            for r in manifest.references]
    written = []
    for i, page in enumerate(wanted):
        nb = nbformat.read(page.executed_in(executed), as_version=4)
        static_widgets(nb)
        settle_carriage_returns(nb)
        shutil.copy2(REPO / page.notebook, out / "notebooks" / Path(page.notebook).name)
        homework = None
        if page.homework:
            shutil.copy2(REPO / "exercises" / page.homework / f"{page.homework}.ipynb", out / "homework")
            homework = {"name": page.homework, "href": f"homework/{page.homework}.ipynb"}
        parameters = nb.metadata.get("papermill", {}).get("parameters", {})
        site = {
            "title": page.label,
            "toc": toc,
            "current": page.html_name,
            "notebook": f"notebooks/{Path(page.notebook).name}",
            "homework": homework,
            "previous": wanted[i - 1].html_name if i > 0 else None,
            "previous_label": wanted[i - 1].label if i > 0 else None,
            "next": wanted[i + 1].html_name if i + 1 < len(wanted) else None,
            "next_label": wanted[i + 1].label if i + 1 < len(wanted) else None,
            "executed": ", ".join(f"{k}={v!r}" for k, v in parameters.items()),
        }
        body, _ = exporter.from_notebook_node(nb, resources={"torchdoctor": site})
        target = out / page.html_name
        target.write_text(body, encoding="utf-8")
        written.append(target)

    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE / "torchdoctor"), autoescape=True)
    templates.filters["code"] = inline_code
    index = templates.get_template("site_index.html.j2").render(
        toc=toc, pages=[{"label": p.label, "href": p.html_name, "homework": p.homework} for p in wanted],
        course=manifest)
    (out / "index.html").write_text(index, encoding="utf-8")
    written.append(out / "index.html")

    leaked = leaked_solutions(sorted((out / "homework").glob("*.ipynb")))
    if leaked:
        raise SystemExit(f"solution code reached the site's homework, refusing to publish it: {leaked[:3]}")
    # A chapter may teach what a homework then asks for; said, so that its author can decide.
    for line in leaked_solutions([p.executed_in(executed) for p in wanted]):
        print(f"warning: a chapter shows a homework solution cell verbatim: {line}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-run", action="store_true", help="fail instead of executing missing notebooks")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    written = build(args.out, run=not args.no_run, device=args.device)
    print(f"wrote {len(written)} pages to {args.out} in {time.perf_counter() - started:.1f} s; "
          f"open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
