"""exercises/ and solutions/ are generated from autograder/source/ and never edited by hand."""

import pytest

from course_tools.release import REPO, assignments, main, solution_notebook, stale_files, student_notebook
from torchdoctor.manifest import load_manifest

ASSIGNMENTS = assignments()


def test_assignments_are_the_ready_ones_of_the_manifest():
    manifest = load_manifest()
    assert ASSIGNMENTS, "course.toml marks no assignment ready"
    assert ASSIGNMENTS == [a.name for a in manifest.assignments if a.status == "ready"]


@pytest.mark.parametrize("name", ["typo", *load_manifest().assignment_names("planned")[:1]])
def test_an_unknown_or_planned_name_is_one_clear_line(name, capsys):
    assert main([name]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1
    assert repr(name) in err and all(a in err for a in ASSIGNMENTS)


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
