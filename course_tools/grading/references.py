"""What each hidden test observes on the reference solution, computed once per batch in a clean kernel.

The source notebook (solutions and hidden tests) runs in a confined kernel like any submission; each graded test
cell must display exactly one observation record and raise nothing. Records are keyed by the test cell's
grade_id and by the source notebook's hash, so a changed source is never judged against stale references.

A batch computes them once: ``course_tools.grading.autograde`` names a file in ``REFERENCES_ENV``, and the
first of its workers to need a notebook's references computes them into it while the others wait on its lock
(they are busy starting up meanwhile). A plain ``nbgrader autograde`` computes them on first use, in memory.
The file also records the protections the computing worker's zygote found, for the batch's report.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

REFERENCES_ENV = "TORCHDOCTOR_REFERENCES"
_memo: dict[str, dict[str, dict]] = {}


def source_notebook(config: Config, assignment: str, notebook: str) -> Path:
    coursedir = CourseDirectory(config=config)
    return Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compute(path: Path, config: Config) -> dict[str, dict]:
    """Run the source notebook in a confined kernel; each graded test cell's observation record."""
    from course_tools.grading.execute import SandboxedExecute
    from course_tools.grading.verdict import observed_records

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="tdref-") as scratch:
        shutil.copytree(path.parent, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.ipynb"))
        SandboxedExecute(config=config).preprocess(nb, {"metadata": {"path": scratch}})
    records, problems = {}, []
    for cell in nb.cells:
        if not (utils.is_grade(cell) and cell.cell_type == "code" and not utils.is_solution(cell)):
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
    if problems:
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
    from course_tools.grading.zygote import shared_zygote

    with open(store.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stored = json.loads(store.read_text()) if store.is_file() else {"references": {}}
        if key not in stored["references"]:
            stored["references"][key] = compute(path, config)
            stored["protections"] = shared_zygote().protections.to_dict()
            store.write_text(json.dumps(stored))
        return stored["references"][key]
