"""The course's grading (nbgrader autograde, hardened: course_tools/grading) gives every submission of the corpus
exactly the score it deserves. One corpus per ready assignment of course.toml."""

import pytest

from course_tools.grading_corpus import corpus_path, grade, load_corpus, problems, translated_twins
from course_tools.release import REPO, assignments

ASSIGNMENTS = assignments()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_ready_assignment_has_a_corpus(assignment):
    path = corpus_path(assignment)
    assert path.is_file(), f"{assignment} is ready in course.toml: add {path.relative_to(REPO)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_corpus_covers_what_the_grading_must_tell_apart(assignment):
    submissions = load_corpus(assignment)
    bases = [(s.base, s.cells, s.loses) for s in submissions]
    assert ("solution", {}, []) in bases, "the solution itself, with full marks"
    assert ("release", {}, "all") in bases, "the unmodified starter, with zero"
    wrong = [s for s in submissions if (s.loses and s.loses != "all") or s.scores]  # loses a cell, or some points
    assert len(wrong) >= 3, "at least three wrong fixes"
    assert sum(1 for s in submissions if s.cells and not s.loses and not s.scores) >= 2, (
        "at least two other correct fixes")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_submission_gets_the_score_it_deserves(assignment, tmp_path):
    """The whole corpus, and (issue 24) its representative subset handed in with the Chinese edition's markdown,
    graded in one run with the English source's gradebook: each Chinese twin must score as its English one."""
    submissions = load_corpus(assignment)
    submissions += translated_twins(assignment, submissions)
    scores = grade(assignment, submissions, tmp_path)
    found = [p for s in submissions for p in problems(s, scores[s.name])]
    assert not found, "\n".join(found)
