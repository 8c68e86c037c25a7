"""Check-yourself questions in the chapters: the student's answer against what PyTorch computes.

A chapter asks a question, leaves ``q1_answer = None`` for the student to fill in, and a check cell calls
``check_answer("Q1", q1_answer, expected=...)`` with ``expected`` computed in that cell by running the code in
question, never typed. Checks with several conditions (a repaired function, say) run under
``if answered("Q2", q2_collate):``. An unanswered question (``None`` or ``...``) prints "not answered yet" instead of
failing, so "Run all" goes through the whole chapter; the answer itself is never printed. The notebook runner puts
each answer cell's reference answer in before it runs a chapter, and fails when a check rejects it
(course_tools/notebook_check.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set

import torch

UNANSWERED = (None, Ellipsis)


def answered(question: str, *given) -> bool:
    """True when every one of ``given`` holds an answer; otherwise print that ``question`` waits for one."""
    if any(value is marker for value in given for marker in UNANSWERED):
        print(f"{question}: not answered yet. Write your answer in the cell above and run this cell again.")
        return False
    return True


def check_answer(question: str, given, expected, *, tol: float = 1e-6, hint: str = "") -> None:
    """Print whether ``given`` matches ``expected`` (nothing is returned, so a check cell shows only the verdict).

    Numbers compare within ``tol`` (relative and absolute), strings without regard to case and surrounding
    spaces, tensors and ``torch.Size`` by their values, sets as sets, lists and tuples element by element.
    """
    if not answered(question, given):
        return
    if answers_match(given, expected, tol):
        print(f"{question}: correct.")
    else:
        print(f"{question}: not yet: {given!r} is not what PyTorch gives." + (f" Hint: {hint}" if hint else ""))


def answers_match(given, expected, tol: float = 1e-6) -> bool:
    """True when ``given`` equals ``expected`` in the loose sense ``check_answer`` documents."""
    given, expected = _plain(given), _plain(expected)
    if isinstance(expected, bool) or isinstance(given, bool):
        return type(given) is type(expected) and given == expected
    if isinstance(expected, int | float) and isinstance(given, int | float):
        if math.isnan(expected) or math.isnan(given):
            return math.isnan(expected) and math.isnan(given)
        return math.isclose(given, expected, rel_tol=tol, abs_tol=tol)
    if isinstance(expected, str) and isinstance(given, str):
        return given.strip().casefold() == expected.strip().casefold()
    if isinstance(expected, Set) and isinstance(given, Set):
        return {_hashable(x) for x in given} == {_hashable(x) for x in expected}
    if isinstance(expected, Mapping) and isinstance(given, Mapping):
        return given.keys() == expected.keys() and all(answers_match(given[k], expected[k], tol) for k in expected)
    if isinstance(expected, list | tuple) and isinstance(given, list | tuple):
        pairs = zip(given, expected, strict=False)
        return len(given) == len(expected) and all(answers_match(g, e, tol) for g, e in pairs)
    return given == expected


def _plain(value):
    """Tensors, sizes and numpy values as Python numbers and lists."""
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy arrays and scalars
        return value.tolist()
    return value


def _hashable(value):
    value = _plain(value)
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, list):
        return tuple(_hashable(x) for x in value)
    return value
