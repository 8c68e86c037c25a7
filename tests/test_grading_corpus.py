"""The course's grading (nbgrader autograde, hardened: course_tools/grading) gives every submission of the corpus
exactly the score it deserves. One corpus per ready assignment of course.toml.

Every selected assignment's corpus is graded in ONE autograde run (the ``graded`` fixture: one scratch course, one
cluster, its workers' zygotes and one export, instead of one of each per assignment); each assignment's test then
checks its own scores, so a failure still names its assignment.
"""

import pytest

from course_tools.grading_corpus import corpus_path, grade_all, load_corpus, problems, translated_twins
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


def corpus_with_twins(assignment):
    """The whole corpus and (issue 24) its representative subset handed in with the Chinese edition's markdown."""
    submissions = load_corpus(assignment)
    return submissions + translated_twins(assignment, submissions)


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """The corpora of the assignments whose score test runs in this session (all, unless deselected with -k),
    graded in one autograde run: (corpus per assignment, ``grading_corpus.Graded``). A corpus that cannot be
    loaded is left out here; its own test reports why."""
    scored = test_each_submission_gets_the_score_it_deserves.__name__
    selected = [item.callspec.params["assignment"] for item in request.session.items
                if item.module is request.module and item.originalname == scored]
    corpora = {}
    for assignment in dict.fromkeys(selected):
        try:
            corpora[assignment] = corpus_with_twins(assignment)
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return corpora, grade_all(corpora, tmp_path_factory.mktemp("corpora"))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_submission_gets_the_score_it_deserves(assignment, graded):
    """The whole corpus, and (issue 24) its representative subset handed in with the Chinese edition's markdown,
    graded in one run with the English source's gradebook: each Chinese twin must score as its English one."""
    corpora, result = graded
    if assignment not in corpora:
        corpus_with_twins(assignment)  # raises why it was left out
    submissions = corpora[assignment]
    failure = result.failure(assignment)
    assert failure is None, failure
    scores = result.scores[assignment]
    found = [p for s in submissions for p in problems(s, scores[s.name])]
    assert not found, "\n".join(found)


def test_ungraded_submissions_are_reported_per_assignment(tmp_path):
    """Student names repeat across corpora: a submission autograde left ungraded (or whose file changed), read
    from that assignment's results file, fails that assignment only, and the message names it."""
    import json

    from course_tools.grading_corpus import Graded, _ungraded

    results = tmp_path / "results"
    results.mkdir()
    (results / "hw_a.json").write_text(json.dumps({"ungraded": ["solution"], "submitted_files_changed": [],
                                                   "ungraded_why": {"solution": "it killed its worker repeatedly"}}))
    (results / "hw_b.json").write_text(json.dumps({"ungraded": [], "ungraded_why": {},
                                                   "submitted_files_changed": ["submitted/starter/hw_b/hw_b.ipynb"]}))
    graded = Graded(ungraded={a: _ungraded(tmp_path, a, 1) for a in ("hw_a", "hw_b", "hw_c")})
    assert graded.ungraded["hw_a"] == {"solution": "it killed its worker repeatedly"}
    assert list(graded.ungraded["hw_b"]) == ["starter"]
    assert "hw_c" in graded.failure("hw_c") and "status 1" in graded.failure("hw_c")  # no results: not graded
    assert "the hw_a corpus" in graded.failure("hw_a") and "solution: it killed its worker" in graded.failure("hw_a")
    assert Graded(ungraded={"hw_a": {}}).failure("hw_a") is None
