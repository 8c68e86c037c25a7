"""Check an executed notebook against the errors its cells declare.

The course shows errors by letting them happen. A cell that must fail is tagged ``raises-exception`` (so the
kernel goes on past it) and says which error it must raise in its metadata::

    "torchdoctor": {"raises": {"type": "RuntimeError", "match": "mat1 and mat2 shapes", "id": "mat1-mat2-shapes"}}

``match`` is a regular expression searched in ``str(exception)``; ``id`` names the torchdoctor catalog entry that
explains the error, and ``torchdoctor.explain`` must give exactly that entry for the error the cell raised (so
every error the course shows is one a student can paste into ``explain``). A cell that only makes sense on one device
carries ``"torchdoctor": {"device": "cuda"}``; the runner blanks it on other devices (see ``skip_for_device``). A cell
marked ``"cpu"`` needs a machine where CUDA is not usable (it shows what a hard-coded "cuda" does there).

"Check yourself" questions leave the student's answer as ``None`` in the committed notebook and keep the reference
answer in the answer cell's metadata, ``"torchdoctor": {"answer": "q1_version = 3"}``. The runner puts the
reference in before it executes the notebook (``fill_reference_answers``) and runs the kernel with
``TORCHDOCTOR_QUIZ_STRICT`` set, so a check (``torchdoctor.quiz``) that does not accept it raises ``QuizRejected``
in whatever language it speaks, and CI fails.

Neither papermill nor nbval checks this: papermill reports any error, declared or not, and nbval passes a
``raises-exception`` cell that raises nothing. So the check is ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbformat import NotebookNode

from torchdoctor import explain, get_entry

RAISES_TAG = "raises-exception"
SKIPPED_MARK = "# Skipped by the notebook runner:"
ANSWER_MARK = "# Reference answer, filled in by the notebook runner:"
QUIZ_REJECTED = "QuizRejected"


@dataclass(frozen=True)
class DeclaredError:
    """The error a cell promises to raise."""

    type: str
    match: str
    id: str

    def describe(self) -> str:
        return f"{self.type} matching {self.match!r}"


def _tags(cell: NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _doctor_metadata(cell: NotebookNode) -> dict:
    return dict(cell.get("metadata", {}).get("torchdoctor", {}))


def cell_label(index: int, cell: NotebookNode) -> str:
    """A short name for a cell in messages: its position, id and first line of code."""
    first_line = next((line for line in cell.source.splitlines() if line.strip()), "")
    cell_id = cell.get("id", "?")
    return f"cell {index} (id {cell_id}: {first_line[:60]!r})"


def declared_error(cell: NotebookNode) -> DeclaredError | None:
    """The error the cell declares, or None. Raises ValueError on a malformed declaration."""
    raises = _doctor_metadata(cell).get("raises")
    tagged = RAISES_TAG in _tags(cell)
    if raises is None:
        if tagged:
            raise ValueError(
                f"it is tagged {RAISES_TAG!r} but does not declare which error: add metadata "
                '"torchdoctor": {"raises": {"type": ..., "match": ..., "id": ...}}'
            )
        return None
    if not tagged:
        raise ValueError(f"it declares an error but is not tagged {RAISES_TAG!r}, so execution would stop")
    if not isinstance(raises, dict) or set(raises) != {"type", "match", "id"}:
        missing = sorted({"type", "match", "id"} - set(raises)) if isinstance(raises, dict) else []
        hint = f" (missing: {', '.join(missing)})" if missing else ""
        raise ValueError(
            f'"raises" must be {{"type": ..., "match": ..., "id": <torchdoctor catalog entry id>}}, '
            f"got {raises!r}{hint}"
        )
    try:
        re.compile(raises["match"])
    except re.error as exc:
        raise ValueError(f"its match pattern {raises['match']!r} is not a valid regular expression: {exc}") from exc
    try:
        get_entry(raises["id"])
    except KeyError:
        raise ValueError(
            f"it declares id {raises['id']!r}, which is not in the torchdoctor catalog: use an existing entry "
            "(see course/cheatsheet.ipynb) or add one to torchdoctor/catalog/<chapter>.py"
        ) from None
    return DeclaredError(type=raises["type"], match=raises["match"], id=raises["id"])


def explained_id(error: NotebookNode) -> str | None:
    """The catalog entry torchdoctor.explain gives for an error output (its type and message, else its
    traceback, as a student would paste it), or None when it recognises none."""
    diagnosis = explain(f"{error.ename}: {error.evalue}") or explain("\n".join(error.get("traceback", [])))
    return diagnosis.id if diagnosis is not None else None


def cell_device(cell: NotebookNode) -> str | None:
    """The only device the cell runs on, or None when it runs everywhere."""
    return _doctor_metadata(cell).get("device")


def skip_for_device(nb: NotebookNode, device: str, cuda_usable: bool | None = None) -> list[int]:
    """Blank, in place, the cells meant for another device; return their indices. A "cpu" cell also needs CUDA to
    be unusable here (``cuda_usable``, default: asked of torch), whatever DEVICE says.

    A blanked cell keeps a comment saying why, so the executed copy in build/ shows what was left out.
    """
    if cuda_usable is None:
        import torch

        cuda_usable = torch.cuda.is_available()
    skipped = []
    for index, cell in enumerate(nb.cells):
        wanted = cell_device(cell) if cell.cell_type == "code" else None
        if wanted is None or (wanted == device and not (wanted == "cpu" and cuda_usable)):
            continue
        why = "a machine without a usable CUDA GPU" if wanted == device else f'DEVICE="{wanted}"'
        cell.source = f'{SKIPPED_MARK} it needs {why} and this run uses DEVICE="{device}".'
        cell.metadata["tags"] = [tag for tag in _tags(cell) if tag != RAISES_TAG]
        cell.metadata.get("torchdoctor", {}).pop("raises", None)
        skipped.append(index)
    return skipped


def fill_reference_answers(nb: NotebookNode) -> list[int]:
    """Replace, in place, each answer cell's ``None`` placeholder with its reference answer; return their indices."""
    filled = []
    for index, cell in enumerate(nb.cells):
        answer = _doctor_metadata(cell).get("answer") if cell.cell_type == "code" else None
        if answer is not None:
            cell.source = f"{ANSWER_MARK}\n{answer}"
            filled.append(index)
    return filled


def _errors(cell: NotebookNode) -> list[NotebookNode]:
    return [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def _nbgrader(cell: NotebookNode) -> dict:
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def _starter_allows(cell: NotebookNode, error: NotebookNode) -> bool:
    """In a student starter, only unsolved work and the tests of that work may fail."""
    meta = _nbgrader(cell)
    if meta.get("grade"):
        return True
    return bool(meta.get("solution")) and error.ename == "NotImplementedError"


def check_declaration(index: int, cell: NotebookNode) -> list[str]:
    """Problems with a code cell's declaration itself (before or after running)."""
    try:
        declared_error(cell)
    except ValueError as exc:
        return [f"{cell_label(index, cell)}: {exc}"]
    return []


def _check_explained(label: str, expected: DeclaredError, error: NotebookNode) -> list[str]:
    got = explained_id(error)
    if got == expected.id:
        return []
    raised = f"{error.ename}: {error.evalue}"
    if got is None:
        return [
            f"{label} raised {raised!r}, which torchdoctor.explain does not recognise, but declares id "
            f"{expected.id!r}: widen that entry's pattern in torchdoctor/catalog/ (with a test on the real error)"
        ]
    return [
        f"{label} declares id {expected.id!r} but torchdoctor.explain gives {got!r} for the error it raised "
        f"({raised!r}): declare {got!r}, or fix the catalog so that {expected.id!r} matches"
    ]


def check_executed(nb: NotebookNode, *, starter: bool = False) -> list[str]:
    """Every way the executed notebook breaks its declarations, as readable messages (empty when all is well).

    With ``starter=True`` the notebook is a homework starter: solution cells may raise NotImplementedError and
    test cells must fail (a test that passes on the starter gives points for no work).
    """
    problems: list[str] = []
    unrun: list[str] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        label = cell_label(index, cell)
        declaration_problems = check_declaration(index, cell)
        if declaration_problems:
            problems += declaration_problems
            continue
        if not cell.source.strip():
            continue
        if cell.get("execution_count") is None:
            unrun.append(label)
            continue
        expected = declared_error(cell)
        errors = _errors(cell)
        if expected is not None:
            if not errors:
                problems.append(f"{label} declares {expected.describe()} but raised nothing")
            elif errors[0].ename != expected.type or not re.search(expected.match, errors[0].evalue):
                got = f"{errors[0].ename}: {errors[0].evalue}"
                problems.append(f"{label} declares {expected.describe()} but raised {got}")
            else:
                problems += _check_explained(label, expected, errors[0])
        elif errors and errors[0].ename == QUIZ_REJECTED:
            problems.append(f"{label}: the check did not accept the reference answer: {errors[0].evalue}")
        elif errors and not (starter and _starter_allows(cell, errors[0])):
            problems.append(
                f"{label} raised {errors[0].ename}: {errors[0].evalue} but declares no error "
                f'(tag it {RAISES_TAG!r} with a "raises" declaration if the error is the lesson)'
            )
        elif starter and _nbgrader(cell).get("grade") and not errors:
            problems.append(f"{label} is a test that passes on the unmodified starter")
    if unrun:
        problems.append(f"{len(unrun)} cell(s) never ran, the first: {unrun[0]}")
    return problems
