"""Refuse a bug-clinic exam notebook whose own cells reach past the exam's view of the case (issue 36 item 4).

The exam's kernel runs the student's cells with the course's library in reach (the grading jail binds the installed
torchdoctor: the exam's own cells need it), and what those cells hand in is graded outside the kernel. A cell that
asked the library for the reference fix (``Case.reference_fix``), tried every choice (``Case.check_diagnosis``), read
the grader's held-out data (``runner.held_out``) or ran other code through ``Case.check_fix`` would hand in an answer
it did not find. The exam notebook gives the student an ``ExamCase`` (torchdoctor/clinic/exam.py: the script, the
choices, a run of the buggy script), and its cells may reach nothing else: no import, no magic or shell line, no
private or special name or attribute (``_case``, ``__globals__``), no introspection or escape hatch (``getattr``,
``vars``, ``eval``, ``open``, ``get_ipython``, frames, ``str.format``'s field lookups, a ``match`` class pattern),
and none of ``Case``'s other members. A notebook that breaks a rule scores nothing.

Pure syntax analysis, in the grader's process, of every code cell but the exam's own locked ones (compared by text,
so a cell relabelled as locked is still read).
"""

from __future__ import annotations

import ast
import functools

__all__ = ["refusals"]

DENIED_NAMES = {"eval", "exec", "compile", "getattr", "setattr", "delattr", "globals", "locals", "vars", "open",
                "input", "breakpoint", "exit", "quit", "memoryview", "get_ipython", "In", "Out", "Case"}
# Attributes that lead from an object to the interpreter's frames, code or modules without a dunder.
REACHING = {"f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame", "cr_code",
            "ag_frame", "ag_code", "tb_frame", "tb_next", "co_consts", "format", "format_map"}
EXAM_VIEW = {"code", "script", "choices", "run"}  # torchdoctor.clinic.exam.ExamCase


@functools.cache
def _case_members() -> frozenset[str]:
    """The public members of a clinic case the exam does not show (reference_fix, check_diagnosis, check_fix...)."""
    from torchdoctor.clinic.pair_case import PairCase
    from torchdoctor.clinic.practice import Case

    case = Case("digits_mlp", "no-zero-grad", 0)
    members = {n for kind in (Case, PairCase) for n in dir(kind)} | set(vars(case))
    return frozenset(n for n in members if not n.startswith("_")) - EXAM_VIEW


def _cell_refusals(number: int, source: str) -> list[str]:
    where = f"cell {number}"
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [f"{where} is not plain Python (an exam cell may hold no magic `%` or shell `!` line)"]
    found = []
    for node in ast.walk(tree):
        line = f"{where}, line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(f"{line}: `{ast.unparse(node)}`: an exam cell imports nothing")
        elif isinstance(node, ast.Name) and (node.id in DENIED_NAMES or node.id.startswith("_")):
            found.append(f"{line}: `{node.id}` is not allowed in an exam cell")
        elif isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr in REACHING
                                                  or node.attr in _case_members()):
            found.append(f"{line}: `.{node.attr}` is not allowed in an exam cell (the exam's case offers "
                         f"{', '.join(sorted(EXAM_VIEW))})")
        elif isinstance(node, ast.Match):  # a class pattern reads attributes named by text: `ExamCase(_case=c)`
            found.append(f"{line}: `match` is not allowed in an exam cell")
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith("_"):
            found.append(f"{line}: defining `{node.name}` is not allowed in an exam cell")
    return found


def refusals(cells: list[str], locked: list[str]) -> list[str]:
    """Why the exam notebook whose code cells are ``cells`` (in order) scores nothing; ``locked``: the exam's own
    cells, which are not the student's. Empty when every cell keeps to the exam's view of the case."""
    ours = {source.strip() for source in locked}
    found: list[str] = []
    for number, source in enumerate(cells, 1):
        if source.strip() not in ours:
            found += _cell_refusals(number, source)
    return found
