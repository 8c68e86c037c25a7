"""What each hidden test observes on the reference solution, computed once per batch in a clean kernel.

The source notebook (solutions and hidden tests) runs in a confined kernel like any submission; each graded test
cell must raise nothing, and each one with hidden tests must display exactly one observation record
(``OBSERVED_MIME``). Records are keyed by the test cell's grade_id and by the source notebook's hash, so a changed
source is never judged against stale references. ``reference_run`` also lists the authoring mistakes it finds;
those that make the run unusable (a test failing on the solution, two records in one cell) stop grading, while a
test with hidden tests but no record is failed cell by cell (``verdict``) and caught in CI
(tests/test_grading_helpers.py).

A batch computes them once: ``course_tools.grading.autograde`` names a file in ``REFERENCES_ENV``, and the
first of its workers to need a notebook's references computes them into it while the others wait on its lock
(they are busy starting up meanwhile). A plain ``nbgrader autograde`` computes them on first use, in memory.
The file also records the protections the computing worker's zygote found, for the batch's report.

The grading package imports one way: ``verdict`` -> ``references`` -> ``execute`` -> ``kernel`` -> ``zygote``
-> ``sandbox``; nothing imports back up the chain.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import typing as t
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config

from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.zygote import shared_zygote

REFERENCES_ENV = "TORCHDOCTOR_REFERENCES"
OBSERVED_MIME = "application/vnd.torchdoctor.observed+json"  # torchdoctor.observe.MIME (a test keeps them equal)
NO_RECORD = "displays no observation record"
_memo: dict[str, dict[str, dict]] = {}


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


def reference_run(path: Path, config: Config) -> tuple[dict[str, dict], list[str]]:
    """Run the source notebook in a confined kernel: each graded test cell's observation record, and the
    authoring mistakes found (one line each, starting with the test's grade_id)."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="tdref-") as scratch:
        shutil.copytree(path.parent, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.ipynb"))
        # The notebook lies in source/<assignment>/: the reference run gets that assignment's limits.
        resources = {"metadata": {"path": scratch}, "nbgrader": {"assignment": path.parent.name}}
        SandboxedExecute(config=config).preprocess(nb, resources)
    records, problems = {}, []
    for cell in nb.cells:
        if not is_test_cell(cell):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        found = observed_records(cell)
        if errors:
            problems.append(f"{grade_id} fails on the reference solution: {errors[0]}")
        elif len(found) > 1:
            problems.append(f"{grade_id} displays {len(found)} observation records; it must display one")
        elif found:
            records[grade_id] = found[0]
        elif has_hidden_tests(cell, config):
            problems.append(f"{grade_id} has hidden tests but {NO_RECORD} (call Record.show() once)")
    return records, problems


def compute(path: Path, config: Config) -> dict[str, dict]:
    """The references of a source notebook; ValueError when the reference run cannot be used at all."""
    records, problems = reference_run(path, config)
    fatal = [p for p in problems if NO_RECORD not in p]  # the others fail their own cell only (verdict)
    if fatal:
        raise ValueError(f"{path}: the reference run is unusable:\n" + "\n".join(problems))
    return records


def references_for(config: Config, assignment: str, notebook: str) -> dict[str, dict]:
    """The references of one notebook: from the batch's shared file when it has them, else computed (once)."""
    path = source_notebook(config, assignment, notebook)
    key = digest(path)
    if key not in _memo:
        shared = os.environ.get(REFERENCES_ENV)
        _memo[key] = _shared(Path(shared), key, path, config) if shared else compute(path, config)
    return _memo[key]


def _shared(store: Path, key: str, path: Path, config: Config) -> dict[str, dict]:
    with open(store.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stored = json.loads(store.read_text()) if store.is_file() else {"references": {}}
        if key not in stored["references"]:
            stored["references"][key] = compute(path, config)
            stored["protections"] = shared_zygote().protections.to_dict()
            store.write_text(json.dumps(stored))
        return stored["references"][key]
