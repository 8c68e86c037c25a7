"""Every requirement the student text of an assignment states has a hidden check and a corpus submission that breaks
it alone and loses points there (course_tools.requirements; issue 23). The tables in docs/requirements/ are current."""

import pytest

from course_tools.release import assignments
from course_tools.requirements import TABLES, gaps, markdown, requirement_sentences

# Assignments whose text is not marked with requirement ids yet (issue 23 is under way). Each leaves this set when
# its table is complete; the test below fails if one is complete but still listed.
PENDING = set()


def test_a_marker_ends_its_sentences():
    """A requirement keeps every sentence since the previous marker or the start of its paragraph or list item
    (issue 35: hw5 R2.1, "**Strip the prefix.** A key ... loses ... Keys without the prefix stay as they are", had
    kept only its last sentence); a heading never belongs to it."""
    text = ("## Part 2\nDefine `train(model, X, y)`. It trains `model` **in place**. [R2.1] It returns a dict:\n\n"
            "- `loss`: a list of floats [R2.2]\n- more. Another sentence here [R2.3] Ends.\n"
            "- A bullet after a full stop [R2.4]\n\n"
            "1. **Strip the prefix.** A key loses its prefix. Keys without it\n   stay as they are. [R2.5] If two keys "
            "collide, raise. [R2.6]\n\nContext first.\n\nThe rule. [R2.7]")
    assert requirement_sentences(text) == [
        ("R2.1", "Define `train(model, X, y)`. It trains `model` **in place**."),
        ("R2.2", "`loss`: a list of floats"), ("R2.3", "more. Another sentence here"),
        ("R2.4", "A bullet after a full stop"),
        ("R2.5", "**Strip the prefix.** A key loses its prefix. Keys without it stay as they are."),
        ("R2.6", "If two keys collide, raise."), ("R2.7", "The rule.")]


@pytest.mark.parametrize("assignment", assignments())
def test_every_requirement_has_a_check_and_a_wrong_submission_that_loses_on_it(assignment):
    found = gaps(assignment)
    if assignment in PENDING:
        assert found, f"{assignment}'s requirement table is complete: remove it from PENDING"
        return
    assert not found, "\n".join(found)
    table = TABLES / f"{assignment}.md"
    assert table.is_file() and table.read_text(encoding="utf-8") == markdown(assignment), (
        f"{table} is out of date: run `python -m course_tools.requirements --write`")
