"""Feedback names the rule a student broke (issue 35 item 3): each failed check's line starts with the ids of the
requirements it tests, and each of those requirements is quoted once, with its sentence from the student text."""

import re

import nbformat
import pytest

from course_tools.grading.references import _with_rules
from course_tools.grading.requirement_text import requirement_sentences, requirement_texts
from course_tools.grading.verdict import judge
from course_tools.release import REPO, assignments

REFERENCE = {"checks": {"returns": 1, "sizes": [4, 2], "form": "ok"},
             "requirements": {"returns": ["R1.1"], "sizes": ["R1.1", "R2.2"]},
             "requirement_text": {"R1.1": "It returns the loss as a float.",
                                  "R2.2": "Every chunk but the last holds micro_batch samples."}}


def test_a_failed_check_names_its_requirements_and_each_rule_is_quoted_once():
    fraction, lines = judge(REFERENCE, [{"checks": {"returns": 0, "sizes": [3, 3], "form": "ok"}}], [])
    assert fraction == pytest.approx(1 / 3)
    assert lines == ["[R1.1] returns: expected 1, got 0",
                     "[R1.1, R2.2] sizes[0]: expected 4, got 3",
                     "[R1.1, R2.2] sizes[1]: expected 2, got 3",
                     "Requirements not met (the ids in your notebook's text):",
                     "  R1.1: “It returns the loss as a float.”",
                     "  R2.2: “Every chunk but the last holds micro_batch samples.”"]


def test_a_check_without_requirements_and_a_passing_test_say_no_rule():
    assert judge(REFERENCE, [{"checks": {"returns": 1, "sizes": [4, 2], "form": "ok"}}], []) == (1.0, [])
    fraction, lines = judge(REFERENCE, [{"checks": {"returns": 1, "sizes": [4, 2], "form": "no"}}], [])
    assert lines == ["form: expected 'ok', got 'no'"]


def test_the_student_cannot_supply_the_rules_the_feedback_quotes():
    """Only the reference's ids and sentences count, as for weights: a student's record carrying its own is ignored."""
    student = {"checks": {"returns": 0, "sizes": [4, 2], "form": "ok"},
               "requirements": {"returns": ["R9.9"]}, "requirement_text": {"R1.1": "forged"}}
    _, lines = judge(REFERENCE, [student], [])
    assert "  R1.1: “It returns the loss as a float.”" in lines and not any("R9.9" in x or "forged" in x for x in lines)


def test_the_reference_record_gets_the_sentences_of_the_ids_its_checks_name():
    rules = {"R1.1": "a", "R2.2": "b", "R3.1": "unused"}
    record = {"checks": {"x": 1}, "requirements": {"x": ["R2.2", "R1.1"]}}
    assert _with_rules(record, rules)["requirement_text"] == {"R1.1": "a", "R2.2": "b"}
    assert _with_rules({"checks": {"x": 1}}, rules) == {"checks": {"x": 1}}


def test_a_rule_stated_in_several_sentences_is_quoted_whole():
    text = "Intro paragraph.\n\n- It returns a dict. Its keys are the layer names. [R2.1] Then it stops. [R2.2]\n"
    assert requirement_sentences(text) == [("R2.1", "It returns a dict. Its keys are the layer names."),
                                           ("R2.2", "Then it stops.")]


@pytest.mark.parametrize("assignment", assignments())
def test_every_id_an_assignment_s_hidden_checks_name_has_a_sentence_to_quote(assignment):
    nb = nbformat.read(REPO / "autograder" / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    texts = requirement_texts([c.source for c in nb.cells if c.cell_type == "markdown"])
    named = {rid for c in nb.cells if c.cell_type == "code" for rid in
             re.findall(r"\"(R\d+\.\d+)\"", c.source) if "requirements=" in c.source}
    assert named and named <= set(texts), sorted(named - set(texts))
    assert all(len(texts[rid]) > 10 for rid in named), {rid: texts[rid] for rid in named if len(texts[rid]) <= 10}
