"""What each hidden test observes on the reference solution, computed once per batch in a clean kernel.

The source notebook (solutions and hidden tests) runs in a confined kernel like any submission; each graded test
cell must raise nothing, and each one with hidden tests must display exactly one observation record
(``OBSERVED_MIME``). Records are keyed by the test cell's grade_id and by the source notebook's hash, so a changed
source is never judged against stale references. ``reference_run`` also lists the problems it finds, one per
test cell, and they cost that cell only, as stock nbgrader grades cell by cell:

- a test that raises on the reference solution (in the sandbox: a file outside the course, an environment the
  kernel lacks) or displays two records cannot be judged by the grader: it keeps nbgrader's own in-kernel verdict,
  and the instructor is told loudly, once per batch and in ``results/<assignment>.json`` (``References.failed``);
- a test with hidden tests but no record (a stock nbgrader hidden test: plain asserts) is judged as nbgrader judges
  it, in the student's kernel, and marked so in the cell, the log and the results (``References.in_kernel``): student
  code could make it pass. ``course_tools.grading.observe_asserts`` turns such a test into an observed one; in this
  course's own assignments it is an authoring mistake that CI catches (tests/test_grading_helpers.py).

A batch computes them once: ``course_tools.grading.autograde`` names a file in ``REFERENCES_ENV``, and the
first of its workers to need a notebook's references computes them into it while the others wait on its lock
(they are busy starting up meanwhile). A plain ``nbgrader autograde`` computes them on first use, in memory.
The file also records the protections the computing worker's zygote found, for the batch's report.

Across runs: ``make autograde`` keeps each clean reference run (no test cell failed on it) in the course root's
``build/references/`` (gitignored; ``REFERENCE_CACHE_ENV`` names another folder), keyed by everything it depends on
(``cache_key``: the source folder's bytes, the course's configuration, the pinned stack, the grading code and the
protections), so the next run of the same assignment pays no reference run. A run that found problems is never
kept: it runs again, and says so again, until they are fixed.

The grading package imports one way: ``verdict`` (and ``exam_verdict``, which it calls) -> ``references`` ->
``execute`` -> ``kernel`` -> ``zygote`` -> ``sandbox``; nothing imports back up the chain.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import typing as t
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config

from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.requirement_text import requirement_texts
from course_tools.grading.zygote import notebook_imports, shared_zygote

REFERENCES_ENV = "TORCHDOCTOR_REFERENCES"
REFERENCE_CACHE_ENV = "TORCHDOCTOR_REFERENCE_CACHE"  # where reference runs are kept across runs, if not the course's
CACHE_FOLDER = Path("build", "references")  # in the course root
STACK = ("torch", "nbgrader", "ipykernel", "jupyter_client", "nbclient", "numpy", "torchvision", "scikit-learn")
REPO = Path(__file__).resolve().parents[2]
OBSERVED_MIME = "application/vnd.torchdoctor.observed+json"  # torchdoctor.observe.MIME (a test keeps them equal)
NO_RECORD = "displays no observation record"
IN_KERNEL = ("judged in the student's kernel: not protected against tampering (its hidden tests display no observation "
             "record; `python -m course_tools.grading.observe_asserts` converts them)")


@dataclass
class References:
    """What the reference run gave: each judged test cell's record, the test cells whose reference run failed (they
    keep nbgrader's verdict; grade_id -> why), the test cells with hidden asserts but no record (judged in the
    kernel, as stock nbgrader does), and every problem found, one line each."""

    records: dict[str, dict] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    in_kernel: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, t.Any]:
        return {"records": self.records, "failed": self.failed, "problems": self.problems, "in_kernel": self.in_kernel}


_memo: dict[str, References] = {}


def observed_records(cell: NotebookNode) -> list[t.Any]:
    """The observation records a cell displayed, as plain JSON values (no NotebookNode)."""
    return [json.loads(json.dumps(o["data"][OBSERVED_MIME])) for o in cell.get("outputs", [])
            if o.get("output_type") == "display_data" and OBSERVED_MIME in o.get("data", {})]


def is_test_cell(cell: NotebookNode) -> bool:
    """A graded cell that tests (not one the student answers in)."""
    return utils.is_grade(cell) and cell.cell_type == "code" and not utils.is_solution(cell)


def has_hidden_tests(cell: NotebookNode, config: Config | None = None) -> bool:
    """Whether a cell's source holds a hidden-tests block (nbgrader's delimiter, as configured)."""
    return ClearHiddenTests(config=config or Config()).begin_test_delimeter in cell.source


def source_notebook(config: Config, assignment: str, notebook: str) -> Path:
    coursedir = CourseDirectory(config=config)
    return Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def reference_run(path: Path, config: Config) -> References:
    """Run the source notebook in a confined kernel: each graded test cell's observation record, the cells that
    cannot be judged by the grader, and the problems found (one line each, starting with the test's grade_id)."""
    nb = nbformat.read(path, as_version=4)
    shared_zygote().preload(notebook_imports([path]))  # the instructor's notebook: its imports, once per zygote
    with tempfile.TemporaryDirectory(prefix="tdref-") as scratch:
        shutil.copytree(path.parent, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.ipynb"))
        # The notebook lies in source/<assignment>/: the reference run gets that assignment's limits.
        resources = {"metadata": {"path": scratch}, "nbgrader": {"assignment": path.parent.name}}
        SandboxedExecute(config=config).preprocess(nb, resources)
    found = References()
    rules = requirement_texts([c.source for c in nb.cells if c.cell_type == "markdown"])
    for cell in nb.cells:
        if not is_test_cell(cell):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        records = observed_records(cell)
        if errors:
            why = f"fails on the reference solution: {_short(errors[0])}"
        elif len(records) > 1:
            why = f"displays {len(records)} observation records on the reference solution; it must display one"
        elif records:
            found.records[grade_id] = _with_rules(records[0], rules)
            continue
        elif has_hidden_tests(cell, config):
            found.in_kernel.append(grade_id)
            continue
        else:
            continue
        found.failed[grade_id] = why
        found.problems.append(f"{grade_id} {why}: nbgrader's in-kernel verdict stands for this cell")
    return found


def _with_rules(record: t.Any, rules: dict[str, str]) -> t.Any:
    """A reference record with the sentence of each requirement its checks name, for the feedback to quote."""
    if type(record) is not dict or type(record.get("requirements")) is not dict:
        return record
    named = {rid for ids in record["requirements"].values() if type(ids) is list for rid in ids}
    quoted = {rid: rules[rid] for rid in sorted(named) if rid in rules}
    return {**record, "requirement_text": quoted} if quoted else record


def _short(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def compute(path: Path, config: Config, log: t.Any = None) -> References:
    """The references of a source notebook; every problem logged as an error, loudly (the instructor's to fix)."""
    found = reference_run(path, config)
    if found.in_kernel and log is not None:
        log.warning("Test cells %s of %s: %s", ", ".join(found.in_kernel), path, IN_KERNEL)
    if found.problems and log is not None:
        log.error("REFERENCE RUN PROBLEMS in %s (each costs its own test cell only; fix the source notebook or what "
                  "it needs in the sandbox, then grade again):\n  %s", path, "\n  ".join(found.problems))
    return found


def references_for(config: Config, assignment: str, notebook: str, log: t.Any = None) -> References:
    """The references of one notebook: from the batch's shared file when it has them, else computed (once)."""
    path = source_notebook(config, assignment, notebook)
    key = digest(path)
    if key not in _memo:
        shared = os.environ.get(REFERENCES_ENV)
        _memo[key] = _shared(Path(shared), key, path, config, log) if shared else compute(path, config, log)
    return _memo[key]


def _shared(store: Path, key: str, path: Path, config: Config, log: t.Any) -> References:
    with open(store.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stored = json.loads(store.read_text()) if store.is_file() else {"references": {}}
        if key not in stored["references"]:
            stored["references"][key] = compute(path, config, log).to_dict()
            stored["protections"] = shared_zygote().protections.to_dict()
            store.write_text(json.dumps(stored))
        return References(**stored["references"][key])


# ---- across runs -------------------------------------------------------------------------------------------------

def stack() -> dict[str, str | None]:
    """The pinned stack a reference run depends on: Python's version and the packages' (None: not installed)."""
    from importlib import metadata

    found: dict[str, str | None] = {"python": sys.version}
    for name in STACK:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def grading_code() -> str:
    """A hash of the course's grading code (course_tools/grading/*.py, torchdoctor/*.py): names and bytes."""
    h = hashlib.sha256()
    for path in sorted([*(REPO / "course_tools" / "grading").glob("*.py"), *(REPO / "torchdoctor").glob("*.py")]):
        h.update(f"{path.relative_to(REPO)}\0{len(path.read_bytes())}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(notebook: Path, config_text: str, protections: dict[str, t.Any], code: str | None = None) -> str:
    """What a source notebook's reference run depends on, hashed: its bytes and the other files of its folder (the
    run's working copy), the course's nbgrader_config.py (limits, settings), the stack, the grading code and the
    protections kernels get."""
    h = hashlib.sha256()
    files = sorted(p for p in notebook.parent.rglob("*") if p.is_file() and (p == notebook or p.suffix != ".ipynb"))
    for path in files:
        data = path.read_bytes()
        h.update(f"{path.relative_to(notebook.parent)}\0{len(data)}\0".encode())
        h.update(data)
    rest = {"notebook": notebook.name, "config": config_text, "stack": stack(), "code": code or grading_code(),
            "protections": protections}
    h.update(json.dumps(rest, sort_keys=True).encode())
    return h.hexdigest()


def cache_folder(course: Path) -> Path:
    return Path(os.environ.get(REFERENCE_CACHE_ENV) or course / CACHE_FOLDER)


def _cache_keys(course: Path, assignment: str, protections: dict[str, t.Any]) -> dict[str, tuple[Path, str]]:
    """Per source notebook of the assignment: (its cache file, its digest)."""
    config = course / "nbgrader_config.py"
    config_text = config.read_text() if config.is_file() else ""
    code = grading_code()
    return {path.name: (cache_folder(course) / f"{cache_key(path, config_text, protections, code)}.json", digest(path))
            for path in sorted((course / "source" / assignment).glob("*.ipynb"))}


def cached(course: Path, assignment: str, protections: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    """The kept reference runs of the assignment's source notebooks, by notebook digest (as ``_memo`` keys them):
    only those whose key still matches."""
    found = {}
    for stored, key in _cache_keys(course, assignment, protections).values():
        try:
            found[key] = References(**json.loads(stored.read_text())["references"]).to_dict()
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def keep(course: Path, assignment: str, protections: dict[str, t.Any], runs: dict[str, dict[str, t.Any]]) -> int:
    """Keep the clean reference runs among ``runs`` (notebook digest -> ``References.to_dict()``) for the next runs;
    how many were written."""
    written = 0
    for name, (stored, key) in _cache_keys(course, assignment, protections).items():
        run = runs.get(key)
        if run is None or run.get("failed") or run.get("problems") or stored.is_file():
            continue
        stored.parent.mkdir(parents=True, exist_ok=True)
        partial = stored.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"assignment": assignment, "notebook": name, "references": run}))
        partial.replace(stored)
        written += 1
    return written
