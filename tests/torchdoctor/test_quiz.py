import math

import numpy as np
import pytest
import torch

from torchdoctor import quiz
from torchdoctor.quiz import answers_match, check_answer, checking, load_hints, reveal

HINTS = """
[Q1]
nudge = "count the in-place operations"
narrower = "each in-place operation adds one to the version"
answer = "{expected}: one per in-place operation"
correct = "the version counts in-place operations"
keywords = ["in-place"]

[Q1.misconceptions]
off-by-one = "that counts the creation as a change too"

["Q3 (a)"]
nudge = "n"
narrower = "m"
answer = "part a"
keywords = []

["Q3 (b)"]
nudge = "n"
narrower = "m"
answer = "part b"
keywords = []

[Q2]
nudge = "look at the mean of each column"
narrower = "dim=0 runs down the columns"
answer = "standardise over dim=0"
keywords = ["dim=0"]

[Q2.misconceptions]
rows = "that gives one value per row ({rows}), not per column"
"""


@pytest.fixture
def hinted(tmp_path, monkeypatch):
    monkeypatch.delenv(quiz.STRICT, raising=False)
    (tmp_path / "chapter.toml").write_text(HINTS)
    load_hints("chapter", tmp_path)
    return tmp_path


def test_unanswered_prints_and_returns_none(hinted, capsys):
    check_answer("Q1", None, expected=3)
    check_answer("Q1", ..., expected=3)
    out = capsys.readouterr().out
    assert out.count("not answered yet") == 2 and "3" not in out


def test_hints_come_in_stages_and_the_answer_only_when_asked(hinted, capsys):
    assert check_answer("Q1", 3, expected=torch.tensor(3)) is None  # nothing for the cell to display
    assert capsys.readouterr().out.splitlines() == ["Q1: correct. the version counts in-place operations"]
    check_answer("Q1", 4, expected=3, wrong={"off-by-one": 4})
    first = capsys.readouterr().out.splitlines()
    assert first == ["Q1: not yet: 4 is not what PyTorch gives.", "that counts the creation as a change too",
                     "Hint: count the in-place operations"]
    check_answer("Q1", 5, expected=3, wrong={"off-by-one": 4})
    second = capsys.readouterr().out.splitlines()
    assert second == ["Q1: not yet: 5 is not what PyTorch gives.", "Hint: each in-place operation adds one to the "
                      "version", 'Still stuck? reveal("Q1") shows the answer.']
    reveal("Q1")
    assert capsys.readouterr().out == "Q1, the answer: 3: one per in-place operation\n"


def test_checking_reports_the_first_unmet_condition_as_its_misconception(hinted, capsys):
    with checking("Q2") as check:
        check.require(True, "rows")
        check.require(False, "rows", rows=32)
        raise AssertionError("never reached: the unmet condition ends the block")
    out = capsys.readouterr().out.splitlines()
    assert out == ["Q2: not yet.", "that gives one value per row (32), not per column",
                   "Hint: look at the mean of each column"]
    with checking("Q2") as check:
        check.require(True, "rows")
    assert capsys.readouterr().out == "Q2: correct.\n"


def test_strict_mode_raises_on_a_rejected_answer(hinted, monkeypatch, capsys):
    monkeypatch.setenv(quiz.STRICT, "1")
    with pytest.raises(quiz.QuizRejected, match="Q1: not yet"):
        check_answer("Q1", 4, expected=3)
    with pytest.raises(quiz.QuizRejected, match="not answered yet"):
        check_answer("Q1", None, expected=3)
    # a learner's turn without hints (the bug clinic's cases, drawn at random) has no reference answer to fill in
    assert quiz.answered("Turn 1, diagnosis", None) is False


def test_reveal_of_a_question_in_parts_shows_every_part(hinted, capsys):
    reveal("Q3")
    assert capsys.readouterr().out == "Q3 (a), the answer: part a\nQ3 (b), the answer: part b\n"


def test_reveal_before_the_check_ran_asks_for_it(hinted, capsys):
    reveal("Q1")
    assert "run its check cell once first" in capsys.readouterr().out


def test_a_question_without_hints_is_an_authors_error(hinted):
    with pytest.raises(KeyError, match="Q9 has no hints"):
        check_answer("Q9", 1, expected=2)


def test_a_hint_file_without_stages_is_refused(tmp_path):
    (tmp_path / "bad.toml").write_text('[Q1]\nnudge = "x"\nanswer = "y"\nhint = "z"\n')
    with pytest.raises(ValueError, match=r"\[Q1\]: missing narrower, keywords; unknown keys hint"):
        load_hints("bad", tmp_path)


def test_chinese_frame_lines(hinted, monkeypatch, capsys):
    monkeypatch.setenv("TORCHDOCTOR_LANG", "zh_CN")
    check_answer("Q1", None, expected=3)
    assert "not answered" not in capsys.readouterr().out


def test_loose_comparisons():
    assert answers_match(0.1 + 0.2, 0.3)
    assert answers_match((4, 3), torch.Size([4, 3]))
    assert answers_match([4, 3], np.array([4, 3]))
    assert answers_match(" Mat1 ", "mat1")
    assert answers_match({"b", "A"}, frozenset({"a", "b"}))
    assert answers_match(float("nan"), math.nan)
    assert answers_match({"x": [1, 2]}, {"x": (1, 2)})


def test_mismatches():
    assert not answers_match(True, 1)
    assert not answers_match(1, True)
    assert not answers_match([1, 2], [1, 2, 3])
    assert not answers_match("5", 5)
    assert not answers_match(0.31, 0.3)
    assert not answers_match({"a"}, {"a", "b"})
