import math

import numpy as np
import torch

from torchdoctor.quiz import answers_match, check_answer


def test_unanswered_prints_and_returns_none(capsys):
    check_answer("Q1", None, expected=3)
    check_answer("Q1", ..., expected=3)
    out = capsys.readouterr().out
    assert out.count("not answered yet") == 2 and "3" not in out


def test_right_and_wrong_answers(capsys):
    assert check_answer("Q2", 3, expected=torch.tensor(3)) is None  # nothing for the cell to display
    check_answer("Q2", 4, expected=3, hint="count the in-place ops")
    out = capsys.readouterr().out.splitlines()
    assert out == ["Q2: correct.", "Q2: not yet: 4 is not what PyTorch gives. Hint: count the in-place ops"]


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
