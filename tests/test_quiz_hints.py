"""Every check-yourself question of the course has staged hints, and no hint before reveal() gives the answer.

The answer is what the question's ``keywords`` name and what its reference answer (the answer cell's metadata)
writes: its string literals and its numbers of two or more characters. ``torchdoctor.quiz`` also refuses, when the
notebook runner runs a chapter, a hint that contains the answer the check cell computed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from torchdoctor import hints

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "course").glob("*.ipynb"))
ASKED = re.compile(r"\b(?:check_answer|checking|answered)\(\s*[\"'](Q\d+[^\"']*)[\"']")
LOADED = re.compile(r"\bload_hints\(\s*[\"']([\w-]+)[\"']")


def code_cells(path: Path) -> list[nbformat.NotebookNode]:
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def asked(path: Path) -> list[str]:
    return sorted({q for cell in code_cells(path) for q in ASKED.findall(cell.source)})


def reference_answers(path: Path) -> dict[str, list[str]]:
    """Question -> the reference answers of the answer cells before its first check cell."""
    answers: dict[str, list[str]] = {}
    waiting: list[str] = []
    for cell in code_cells(path):
        answer = cell.get("metadata", {}).get("torchdoctor", {}).get("answer")
        if answer is not None:
            waiting.append(answer)
        found = ASKED.findall(cell.source)
        if found and waiting:
            answers.setdefault(found[0], []).extend(waiting)
            waiting = []
    return answers


def giveaways(answer: str) -> set[str]:
    """What a hint must not contain of a reference answer that assigns literals (``q1 = 3``, ``q5 = {"b"}``): its
    strings and its numbers of two or more characters. A reference answer that is code (a repair, a function)
    writes the question's own names and numbers too; its key words are the hint file's ``keywords``."""
    try:
        tree = ast.parse(answer)
    except SyntaxError:
        return set()
    found = set()
    for statement in tree.body:
        if not isinstance(statement, ast.Assign):
            continue
        try:
            ast.literal_eval(statement.value)
        except ValueError:
            continue
        for node in ast.walk(statement.value):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value.strip()) >= 3:
                found.add(node.value.strip())
            elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and len(repr(node.value)) >= 2:
                found.add(repr(node.value))
    return found


def contains(text: str, needle: str) -> bool:
    if re.fullmatch(r"[\d.]+", needle):
        return re.search(rf"(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)", text) is not None
    return needle.casefold() in text.casefold()


# Chapters whose hints are still one string in a code cell (issue 33 moves them, then this list goes).
NOT_MOVED_YET: set[str] = set()
QUIZZED = [path for path in NOTEBOOKS if asked(path) and path.stem not in NOT_MOVED_YET]


@pytest.mark.parametrize("path", QUIZZED, ids=lambda p: p.stem)
def test_every_question_has_staged_hints(path):
    loads = {name for cell in code_cells(path) for name in LOADED.findall(cell.source)}
    assert loads == {path.stem}, f"{path.name}: the setup cell must call load_hints({path.stem!r}), found {loads}"
    questions = hints.load(path.stem)
    missing = [q for q in asked(path) if q not in questions]
    unused = sorted(set(questions) - set(asked(path)))
    assert not missing, f"{path.name}: {missing} have no hints in torchdoctor/hints/{path.stem}.toml"
    assert not unused, f"torchdoctor/hints/{path.stem}.toml has hints for {unused}, which the notebook never asks"


@pytest.mark.parametrize("path", QUIZZED, ids=lambda p: p.stem)
def test_no_hint_before_reveal_gives_the_answer(path):
    answers = reference_answers(path)
    problems = []
    for question in hints.load(path.stem).values():
        needles = set(question.keywords) | {g for answer in answers.get(question.name, []) for g in giveaways(answer)}
        staged = {"nudge": question.nudge, "narrower": question.narrower,
                  **{f"misconception {k}": v for k, v in question.misconceptions.items()}}
        problems += [f"{question.name} {label} contains {needle!r}: {text!r}"
                     for label, text in staged.items() for needle in sorted(needles) if contains(text, needle)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_the_giveaway_scan_finds_what_it_should():
    assert giveaways('q2_fix = "dataclasses.asdict(config)"\nq3 = 48\nq4 = 3') == {"dataclasses.asdict(config)", "48"}
    assert giveaways('q5 = {"bee", "c"}\nq2 = max(n for n in (32, 64) if ok(n, "Adam"))') == {"bee"}
    assert contains("use 48 samples", "48") and not contains("use 480 samples", "48")
    assert contains("call torch.No_Grad()", "torch.no_grad()") and not contains("section 3.48", "48")
