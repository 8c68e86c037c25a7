"""Check-yourself questions in the chapters: the student's answer against what PyTorch computes, with staged hints.

A chapter names its hint file once (``load_hints("03_memory")``, torchdoctor/hints/), asks a question, leaves
``q1_answer = None`` for the student to fill in, and a check cell calls ``check_answer("Q1", q1_answer,
expected=...)`` with ``expected`` computed in that cell by running the code in question, never typed. A check
with several conditions (a repaired function, say) runs them in ``with checking("Q2") as check:``, each as
``check.require(condition, "misconception")``. An unanswered question (``None`` or ``...``) prints "not answered
yet" instead of failing, so "Run all" goes through the whole chapter.

A wrong answer never shows the answer: the first gets the question's nudge (what to look at), later ones a
narrower hint; an answer the check recognises as a likely mistake (``wrong={"name": value}``, or the failed
``require``) also gets what that mistake is. ``reveal("Q1")`` prints the answer, for a learner who asks.

Every text goes through the translation catalog (context ``quiz`` for these lines, the hint file's for the
hints). The notebook runner puts each answer cell's reference answer in and sets ``TORCHDOCTOR_QUIZ_STRICT``, so
a check that rejects the reference raises QuizRejected and CI fails (course_tools/notebook_check.py).
"""

from __future__ import annotations

import math
import os
import string
from collections import Counter
from collections.abc import Mapping, Set
from pathlib import Path

import torch

from torchdoctor import explain_i18n, hints

UNANSWERED = (None, Ellipsis)
STRICT = "TORCHDOCTOR_QUIZ_STRICT"
CONTEXT = "quiz"
NOT_ANSWERED = "{question}: not answered yet. Write your answer in the cell above and run this cell again."
CORRECT = "{question}: correct."
NOT_YET = "{question}: not yet."
NOT_YET_GIVEN = "{question}: not yet: {given} is not what PyTorch gives."
HINT = "Hint: {hint}"
STUCK = 'Still stuck? reveal("{question}") shows the answer.'
ANSWER = "{question}, the answer: {answer}"
RUN_CHECK_FIRST = "{question}: run its check cell once first; the answer is computed there."
NO_HINTS = "No hint file is loaded: the chapter's setup cell calls load_hints(\"<notebook>\") first."

_chapter: tuple[str, Path] | None = None   # the notebook whose hints are loaded, and their folder
_attempts: Counter[str] = Counter()
_fields: dict[str, dict] = {}


class QuizRejected(AssertionError):
    """Raised in strict mode (the notebook runner) when a check does not accept an answer."""


def _say(template: str, **values) -> str:
    return explain_i18n.text(CONTEXT, template).format(**values)


def load_hints(notebook: str, folder: str | Path | None = None) -> None:
    """Use ``torchdoctor/hints/<notebook>.toml`` (or ``<folder>/<notebook>.toml``) for this kernel's questions (the
    chapter's setup cell calls it)."""
    global _chapter
    chosen = notebook, Path(folder) if folder is not None else hints.FOLDER
    hints.load(*chosen)
    _chapter = chosen
    _attempts.clear()
    _fields.clear()


def _question(name: str) -> hints.Question:
    if _chapter is None:
        raise RuntimeError(NO_HINTS)
    questions = hints.load(*_chapter)
    if name not in questions:
        raise KeyError(f"{name} has no hints in {_chapter[1] / _chapter[0]}.toml; it has {', '.join(questions)}")
    return questions[name]


def answered(question: str, *given) -> bool:
    """True when every one of ``given`` holds an answer; otherwise print that ``question`` waits for one."""
    if any(value is marker for value in given for marker in UNANSWERED):
        _verdict(_say(NOT_ANSWERED, question=question), strict=_is_quiz_question(question))
        return False
    return True


def _is_quiz_question(question: str) -> bool:
    """A question of the hint file, whose reference answer the runner fills in (the bug clinic's turns are not:
    their answers depend on the case drawn)."""
    return _chapter is not None and question in hints.load(*_chapter)


def check_answer(question: str, given, expected, *, tol: float = 1e-6, wrong: Mapping | None = None,
                 hint: str = "", **fields) -> None:
    """Print whether ``given`` matches ``expected`` (nothing is returned, so a check cell shows only the verdict).

    Numbers compare within ``tol`` (relative and absolute), strings without regard to case and surrounding
    spaces, tensors and ``torch.Size`` by their values, sets as sets, lists and tuples element by element.
    ``wrong`` maps the names of the question's misconceptions to the wrong answer each one gives (or to a test of
    the given answer, ``lambda given: ...``, where a misconception gives several); ``fields`` fill
    in the hint file's ``correct`` and ``answer`` texts, with ``expected``. ``hint``: the one hint of a chapter not
    yet moved to a hint file (while the chapters move, issue 33).
    """
    _fields[question] = {"expected": _shown(expected), **fields}
    if os.environ.get(STRICT) and _chapter is not None:
        _audit(question, expected)
    if not answered(question, given):
        return
    if answers_match(given, expected, tol):
        _right(question)
        return
    verdict = _say(NOT_YET_GIVEN, question=question, given=repr(given))
    if _chapter is None:
        _verdict(verdict + (" " + _say(HINT, hint=hint) if hint else ""))
        return
    mistake = next((name for name, value in (wrong or {}).items() if _gives(value, given, tol)), None)
    _wrong(question, mistake, verdict)


def _gives(wrong, given, tol: float) -> bool:
    """Whether ``given`` is the wrong answer ``wrong`` (a value, or a test that may not expect the given type)."""
    if not callable(wrong):
        return answers_match(given, wrong, tol)
    try:
        return bool(wrong(given))
    except Exception:
        return False


class checking:  # noqa: N801 (used as a statement: ``with checking("Q2") as check:``)
    """A check of several conditions: ``check.require(condition, "misconception", **fields)`` for each, in order.

    The first unmet condition stops the block and is reported as that misconception (its text may use
    ``fields``); when all hold, the question is correct. ``check.fields(...)`` adds values for the texts.
    """

    def __init__(self, question: str):
        self.question = question
        _question(question)
        _fields[question] = {}

    def __enter__(self) -> checking:
        return self

    def fields(self, **values) -> None:
        _fields[self.question].update(values)

    def require(self, condition, misconception: str, **values) -> None:
        if not condition:
            raise _Unmet(misconception, values)

    def __exit__(self, kind, error, _traceback) -> bool:
        if kind is None:
            _right(self.question)
            return False
        if isinstance(error, _Unmet):
            _fields[self.question].update(error.values)
            _wrong(self.question, error.misconception, _say(NOT_YET, question=self.question))
            return True
        return False


class _Unmet(Exception):
    def __init__(self, misconception: str, values: dict):
        super().__init__(misconception)
        self.misconception, self.values = misconception, values


def reveal(question: str) -> None:
    """Print the answer of ``question``: for a learner who has tried and asks for it. A question asked in parts
    ("Q2 (from_numpy)", "Q2 (division)") reveals every part for ``reveal("Q2")``."""
    if _chapter is not None and question not in hints.load(*_chapter):
        parts = [name for name in hints.load(*_chapter) if name.startswith(question + " ")]
        if parts:
            for part in parts:
                reveal(part)
            return
    text = _question(question).text("answer")
    names = {name for _, name, _, _ in string.Formatter().parse(text) if name}
    known = _fields.get(question, {})
    if not names <= known.keys():
        print(_say(RUN_CHECK_FIRST, question=question))
        return
    print(_say(ANSWER, question=question, answer=text.format(**known)))


def _right(question: str) -> None:
    lines = [_say(CORRECT, question=question)]
    if _chapter is not None:
        correct = _question(question).text("correct")
        if correct:
            lines.append(correct.format(**_fields.get(question, {})))
    print(" ".join(lines))


def _wrong(question: str, mistake: str | None, verdict: str) -> None:
    hinted = _question(question)
    _attempts[question] += 1
    lines = [verdict]
    if mistake is not None:
        lines.append(hinted.misconception(mistake).format(**_fields.get(question, {})))
    if _attempts[question] == 1:
        lines.append(_say(HINT, hint=hinted.text("nudge")))
    else:
        lines += [_say(HINT, hint=hinted.text("narrower")), _say(STUCK, question=question)]
    _verdict("\n".join(lines))


def _audit(question: str, expected) -> None:
    """In strict mode (CI): refuse hints that show the answer computed by the check cell."""
    shown = str(_shown(expected)).strip()
    if len(shown) < 2 or isinstance(_plain(expected), bool):
        return
    hinted = _question(question)
    for text in (hinted.nudge, hinted.narrower, *hinted.misconceptions.values()):
        if shown.casefold() in text.casefold():
            raise QuizRejected(f"{question}: a hint before reveal() shows the answer {shown!r}: {text!r}")


def _verdict(text: str, strict: bool = True) -> None:
    print(text)
    if strict and os.environ.get(STRICT):
        raise QuizRejected(text)


def _shown(value):
    """An expected value as a learner reads it."""
    value = _plain(value)
    return round(value, 4) if isinstance(value, float) else value


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
