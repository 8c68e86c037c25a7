"""exercises/ and solutions/ are generated from autograder/source/ and never edited by hand."""

import pytest

from course_tools.release import REPO, assignments, solution_notebook, stale_files, student_notebook

ASSIGNMENTS = assignments()


def test_there_are_assignments():
    assert "hw1_dimensions" in ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generated_notebooks_are_up_to_date(assignment):
    stale = [str(path.relative_to(REPO)) for path in stale_files(assignment)]
    assert not stale, f"out of date with autograder/source (run `make release`): {stale}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_students_get_no_solutions_and_no_hidden_tests(assignment):
    text = "\n".join(cell.source for cell in student_notebook(assignment).cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    assert "raise NotImplementedError()" in text


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_published_solutions_hold_no_hidden_tests(assignment):
    text = "\n".join(cell.source for cell in solution_notebook(assignment).cells)
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "HIDDEN TESTS"):
        assert marker not in text
