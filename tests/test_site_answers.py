"""The site shows the questions of the chapters, never their answers (course_tools/site_answers.py)."""

import copy
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_tools.notebook_check import ANSWER_MARK, fill_reference_answers
from course_tools.site_answers import hide_answers

REPO = Path(__file__).resolve().parent.parent
QUIZZED = [p for p in sorted((REPO / "course").glob("*.ipynb")) if "check_answer(" in p.read_text() or
           "checking(" in p.read_text()]


def test_answer_cells_get_their_placeholder_back_and_checks_lose_their_verdict():
    answer = new_code_cell("q1 = None  # your answer", id="a1", metadata={"torchdoctor": {"answer": "q1 = 3"}})
    check = new_code_cell('check_answer("Q1", q1, expected=3)', id="c1")
    other = new_code_cell("print('a demonstration')", id="d1")
    source = new_notebook(cells=[answer, check, other])
    executed = copy.deepcopy(source)
    fill_reference_answers(executed)
    for cell in executed.cells:
        cell.outputs = [new_output("stream", name="stdout", text="Q1: correct.\n")]
        cell.execution_count = 1
    assert hide_answers(executed, source) == 2
    shown_answer, shown_check, shown_other = executed.cells
    assert shown_answer.source == "q1 = None  # your answer" and shown_answer.outputs == []
    assert shown_check.outputs == [] and shown_check.execution_count is None
    assert shown_other.outputs != []   # demonstrations keep what they printed


def test_an_executed_copy_of_another_version_is_refused():
    executed = new_notebook(cells=[new_code_cell(f"{ANSWER_MARK}\nq1 = 3", id="gone")])
    with pytest.raises(ValueError, match="execute it again"):
        hide_answers(executed, new_notebook(cells=[]))


@pytest.mark.parametrize("path", QUIZZED, ids=lambda p: p.stem)
def test_no_reference_answer_survives_in_a_chapter(path):
    source = nbformat.read(path, as_version=4)
    executed = copy.deepcopy(source)
    filled = fill_reference_answers(executed)
    assert filled, f"{path.name} asks questions but has no answer cell"
    hide_answers(executed, source)
    assert [c.source for c in executed.cells] == [c.source for c in source.cells]
