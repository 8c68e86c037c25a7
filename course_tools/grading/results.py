"""Per-test results as JSON, read back from what nbgrader's own tools read: the gradebook and autograded/.

``results/<assignment>.json`` in the course root holds one row per student and graded cell (student, notebook, test
id, points, max, passed, message, whether the student's kernel judged it: stock hidden asserts) plus, per student,
the tampering that grading repaired. Scores come from the gradebook, so they are the numbers ``nbgrader export`` and
the formgrader show; messages and tampering come from the metadata the grading pipeline left in the autograded
notebooks.
"""

from __future__ import annotations

import json
import typing as t
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry


def _autograded(course: Path, student: str, assignment: str, notebook: str) -> t.Any:
    path = course / "autograded" / student / assignment / f"{notebook}.ipynb"
    return nbformat.read(path, as_version=4) if path.is_file() else None


def collect(course: Path, assignment: str, students: t.Iterable[str], db_url: str | None = None) -> dict[str, t.Any]:
    rows: list[dict[str, t.Any]] = []
    tampering: dict[str, list[dict[str, str]]] = {}
    with Gradebook(db_url or f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebooks = [n.name for n in gb.find_assignment(assignment).notebooks]
        for student in sorted(students):
            for notebook in notebooks:
                try:
                    grades = gb.find_submission_notebook(notebook, assignment, student).grades
                except MissingEntry:
                    continue
                nb = _autograded(course, student, assignment, notebook)
                cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells} if nb else {}
                if nb is not None and nb.metadata.get("torchdoctor", {}).get("tampering"):
                    tampering.setdefault(student, []).extend(
                        {"notebook": notebook, **item} for item in nb.metadata.torchdoctor.tampering)
                for grade in sorted(grades, key=lambda g: g.name):
                    verdict = cells.get(grade.name, {}).get("metadata", {}).get("torchdoctor", {}).get("verdict", {})
                    rows.append({"student": student, "notebook": notebook, "test": grade.name,
                                 "points": grade.score, "max": grade.max_score,
                                 "passed": grade.score == grade.max_score, "message": verdict.get("message", ""),
                                 "judged_in_kernel": bool(verdict.get("judged_in_kernel"))})
    return {"assignment": assignment, "results": rows, "tampering": tampering}


def write(course: Path, assignment: str, students: t.Iterable[str], extra: dict[str, t.Any],
          db_url: str | None = None) -> Path:
    target = course / "results" / f"{assignment}.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps({**collect(course, assignment, students, db_url), **extra}, indent=1) + "\n")
    return target
