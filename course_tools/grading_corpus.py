"""Grade a corpus of made-up submissions with nbgrader and check each gets the score it deserves.

Every ready assignment of course.toml has one: tests/grading_corpus/<assignment>.toml lists submissions. Each
starts from ``base`` ("solution": the published solution; "release": the student starter) and replaces the source
of the solution cells named in its ``cells`` table (keys are nbgrader grade_ids). ``loses`` lists the grade cells
that must score zero ("all" for every one); ``scores`` gives the points of grade cells that earn partial credit
(within 0.01); every other grade cell must earn full points. ``violates`` names the requirement ids a wrong
submission breaks (the requirement table, ``course_tools.requirements``).

Grading happens in a scratch copy of the course: ``generate_assignment``, one folder per made-up student in
submitted/, the course's hardened parallel autograde (``course_tools.grading.autograde``: nbgrader's autograde
with confined kernels and verdicts taken outside them), then the scores are read back from the gradebook.
Several corpora grade in one scratch course and ONE autograde run (``grade_all``, ``grade_many``; the CLI and
tests/test_grading_corpus.py do): one generate_assignment, one cluster with its workers' zygotes, one export,
instead of one of each per assignment. The made-up students' names repeat across corpora ("solution", "starter"):
one nbgrader student with several assignments; scores, results files and ungraded submissions are read per
assignment. ``grade`` is ``grade_many`` of one assignment.

In Chinese (issue 24): ``--language zh_CN`` hands in every submission as a student of the Chinese edition would,
its markdown cells replaced by those of the Chinese student notebook (course_tools.i18n, by cell id), its code
cells as submitted, and grades it with the English source's gradebook: the scores must be the ones the English
corpus gets. ``--representative`` grades only a subset chosen by `representative` (the solution, the starter, and
for each grade cell the first submission that loses it): 5 to 7 of a corpus's 50 to 64.

The floor (issue 35): breaking any one stated requirement must cost at least ``FLOOR`` (5%) of its part. For each
requirement id, `floors` takes the wrong submissions that violate it alone (``violates = [id]``) and reports the
smallest share of the points they lose on the grade cells whose hidden checks test that id (the requirement
table's cells); tests/test_grading_corpus.py checks it per requirement, and the CLI prints it after grading.

Usage: python -m course_tools.grading_corpus [ASSIGNMENT ...] [--language zh_CN] [--representative]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.api import Gradebook, MissingEntry

from course_tools.grading import autograde
from course_tools.manifest_cli import UnknownAssignment, select_assignments
from course_tools.release import COURSE, REPO, nbgrader, solution_notebook

CORPUS = REPO / "tests" / "grading_corpus"
FLOOR = 0.05  # the least share of its part that breaking one stated requirement may cost (issue 35)


@dataclass
class Submission:
    """One made-up student's notebook and the grade cells it must lose."""

    name: str
    base: str
    why: str
    loses: list[str] | str
    cells: dict[str, str] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)  # grade cell -> points, for partial credit
    violates: list[str] = field(default_factory=list)  # requirement ids it breaks (course_tools.requirements)
    language: str | None = None  # handed in with this edition's markdown (`in_language`), e.g. zh_CN


def corpus_path(assignment: str) -> Path:
    return CORPUS / f"{assignment}.toml"


def load_corpus(assignment: str) -> list[Submission]:
    path = corpus_path(assignment)
    if not path.is_file():
        raise FileNotFoundError(f"{assignment} is ready in course.toml but has no grading corpus: write "
                                f"{path.relative_to(REPO)} (docs/authors.md, \"Adding an assignment\")")
    entries = tomllib.loads(path.read_text())["submission"]
    submissions = [Submission(**entry) for entry in entries]
    bad = [s.name for s in submissions if s.base not in ("solution", "release")]
    if bad:
        raise ValueError(f"{path}: base must be 'solution' or 'release' (submissions {bad})")
    return submissions


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def build_notebook(submission: Submission, bases: dict[str, NotebookNode]) -> NotebookNode:
    """The submission's notebook: its base with the named solution cells replaced."""
    nb = copy.deepcopy(bases[submission.base])
    solution_cells = {_grade_id(c): c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    unknown = sorted(set(submission.cells) - set(solution_cells))
    if unknown:
        raise ValueError(f"submission {submission.name!r} replaces unknown solution cells {unknown}; "
                         f"the solution cells are {sorted(solution_cells)}")
    for grade_id, source in submission.cells.items():
        solution_cells[grade_id].source = source.strip("\n")
    return nb


def translated_twins(assignment: str, submissions: list[Submission]) -> list[Submission]:
    """The representative subset handed in again in each language whose student notebook of this assignment is
    ready (course.toml), named ``<name>-<language>``: graded in the same run as the English corpus, each must get
    the scores its English twin deserves."""
    from course_tools import i18n

    if not i18n.notebooks().get(f"exercises/{assignment}/{assignment}.ipynb"):
        return []
    return [dataclasses.replace(s, name=f"{s.name}-{i18n.LANGUAGE}", language=i18n.LANGUAGE)
            for s in representative(submissions)]


def representative(submissions: list[Submission]) -> list[Submission]:
    """A cheap subset of a corpus that still tells every grade cell apart: the solution and the starter (base with
    no cell replaced, losing nothing / everything), then, for each grade cell in the order the corpus first names
    it, the first submission that loses it (in ``loses`` or with partial ``scores``), in the corpus's order."""
    chosen = [s for s in submissions if not s.cells and ((s.base == "solution" and not s.loses and not s.scores)
                                                          or (s.base == "release" and s.loses == "all"))]
    covered: set[str] = set()
    for submission in submissions:
        lost = [] if submission.loses == "all" else [*submission.loses, *submission.scores]
        new = [cell for cell in lost if cell not in covered]
        if new and submission not in chosen:
            chosen.append(submission)
        covered.update(lost)
    return chosen


def in_language(nb: NotebookNode, assignment: str, language: str) -> NotebookNode:
    """The notebook as a student of the `language` edition hands it in: every markdown cell replaced by the same
    cell (by id) of that edition's student notebook, built from the English one and its catalogue; code cells and
    metadata as submitted. nbgrader never locks or grades a markdown cell (`make i18n-check`), so the English
    gradebook's checksums still hold."""
    from course_tools import i18n

    if language != i18n.LANGUAGE:
        raise ValueError(f"no {language!r} edition: the course's other language is {i18n.LANGUAGE}")
    student = f"exercises/{assignment}/{assignment}.ipynb"
    edition = {c.id: c for c in i18n.build_notebook(student, i18n.load(i18n.catalogue_path(student))).cells}
    translated = copy.deepcopy(nb)
    for cell in translated.cells:
        if cell.cell_type != "markdown":
            continue
        if cell.get("id") not in edition or edition[cell.id].cell_type != "markdown":
            raise ValueError(f"{assignment}: markdown cell {cell.get('id')} is not in the {language} student notebook")
        cell.source = edition[cell.id].source
    return translated


@dataclass
class Graded:
    """What one autograde run of several corpora gave, per assignment: each graded student's scores (grade cell ->
    (score, max score)), and the students left ungraded or whose submitted files changed (student -> why)."""

    scores: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    ungraded: dict[str, dict[str, str]] = field(default_factory=dict)

    def failure(self, assignment: str) -> str | None:
        """Why the assignment's corpus was not graded whole (its students, and why each), or None."""
        lost = self.ungraded.get(assignment)
        if not lost:
            return None
        why = "; ".join(f"{student}: {reason}" for student, reason in sorted(lost.items()))
        return f"autograding the {assignment} corpus left submissions ungraded ({why}; see the log above)"


def grade_all(corpora: dict[str, list[Submission]], scratch: Path, args: tuple[str, ...] = (),
              db_url: str | None = None, config_extra: str = "", language: str | None = None) -> Graded:
    """Autograde several assignments' submissions in one scratch course with ONE autograde run: one
    generate_assignment, one cluster and its workers' zygotes, one export, whatever the number of assignments.
    Student names may repeat across corpora (one nbgrader student, several assignments): everything is read back
    per assignment. Raises nothing for submissions left ungraded: ``Graded.ungraded`` names them per assignment.
    ``args`` go to the autograde command (an engine, a scheduler); ``db_url`` is the gradebook (default: SQLite in
    the course); ``config_extra`` is added to the course's nbgrader_config.py; ``language`` (zh_CN) hands every
    submission in with that edition's markdown (`in_language`), graded with the same English source and gradebook."""
    names = list(corpora)
    if not names:
        return Graded()
    course = scratch / "course"
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text((COURSE / "nbgrader_config.py").read_text() + "\n" + config_extra + "\n")
    for assignment in names:
        shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
    # One nbgrader process for every assignment: its source/ holds only these, so the glob names exactly them.
    nbgrader("generate_assignment", names[0] if len(names) == 1 else "*", "--force", *db_args(db_url), course=course)

    for assignment, submissions in corpora.items():
        notebook_name = f"{assignment}.ipynb"
        bases = {
            "release": nbformat.read(course / "release" / assignment / notebook_name, as_version=4),
            "solution": solution_notebook(assignment),
        }
        for submission in submissions:
            folder = course / "submitted" / submission.name / assignment
            folder.mkdir(parents=True)
            nb = build_notebook(submission, bases)
            edition = submission.language or language
            nbformat.write(in_language(nb, assignment, edition) if edition else nb, folder / notebook_name)
    extra = [*args, *(["--db-url", db_url] if db_url else [])]
    status = autograde.main([*names, "--course", str(course), "--force", *extra])

    graded = Graded()
    with Gradebook(*autograde.gradebook_url(course, db_url)) as gradebook:
        for assignment, submissions in corpora.items():
            graded.ungraded[assignment] = lost = _ungraded(course, assignment, status)
            scores = graded.scores[assignment] = {}
            for submission in submissions:
                try:
                    nb = gradebook.find_submission_notebook(assignment, assignment, submission.name)
                except MissingEntry:
                    lost.setdefault(submission.name, "not in the gradebook")
                    continue
                scores[submission.name] = {g.name: (g.score, g.max_score) for g in nb.grades}
    if status != 0 and not any(graded.ungraded.values()):  # nothing lost, yet autograde failed (nbgrader export)
        raise RuntimeError(f"autograde of {', '.join(names)} exited with status {status} (see the log above)")
    return graded


def _ungraded(course: Path, assignment: str, status: int) -> dict[str, str]:
    """The assignment's students that autograde left ungraded, or whose submitted files it changed, with why
    (``results/<assignment>.json``, which autograde writes per assignment)."""
    path = course / "results" / f"{assignment}.json"
    if not path.is_file():
        return {"*": f"autograde exited with status {status} before grading the assignment"}
    results = json.loads(path.read_text())
    lost = {s: results.get("ungraded_why", {}).get(s, "no score for some graded cell") for s in results["ungraded"]}
    for changed in results["submitted_files_changed"]:  # submitted/<student>/<assignment>/...
        lost.setdefault(Path(changed).parts[1], f"grading changed its submitted file {changed}")
    return lost


def grade_many(corpora: dict[str, list[Submission]], scratch: Path, args: tuple[str, ...] = (),
               db_url: str | None = None, config_extra: str = "",
               language: str | None = None) -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
    """``grade_all``, raising RuntimeError, which names each assignment, when a submission stays ungraded; per
    assignment, per student, grade cell -> (score, max score)."""
    graded = grade_all(corpora, scratch, args, db_url, config_extra, language)
    failures = [why for why in map(graded.failure, corpora) if why]
    if failures:
        raise RuntimeError("\n".join(failures))
    return graded.scores


def grade(assignment: str, submissions: list[Submission], scratch: Path, args: tuple[str, ...] = (),
          db_url: str | None = None, config_extra: str = "",
          language: str | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    """One assignment's ``grade_many``: per student, grade cell -> (score, max score)."""
    return grade_many({assignment: submissions}, scratch, args, db_url, config_extra, language)[assignment]


def db_args(db_url: str | None) -> list[str]:
    """nbgrader's option for another gradebook than the course root's SQLite file."""
    return [f"--CourseDirectory.db_url={db_url}"] if db_url else []


def problems(submission: Submission, scores: dict[str, tuple[float, float]]) -> list[str]:
    """How the submission's scores differ from what it deserves."""
    loses = set(scores) if submission.loses == "all" else set(submission.loses)
    unknown = sorted((loses | set(submission.scores)) - set(scores))
    if unknown:
        return [f"{submission.name}: 'loses' or 'scores' names unknown grade cells {unknown}; they are "
                f"{sorted(scores)}"]
    found = []
    for cell, (score, max_score) in sorted(scores.items()):
        deserved = submission.scores.get(cell, 0 if cell in loses else max_score)
        if abs(score - deserved) > 0.01:
            found.append(f"{submission.name} ({submission.why}): {cell} scored {score} of {max_score}, "
                         f"deserves {deserved}")
    return found


@dataclass
class Floor:
    """What breaking one requirement costs in the corpus: the smallest share of the requirement's grade cells'
    points lost by a wrong submission violating it alone, and that submission (None when none was graded)."""

    requirement: str
    cells: list[str]
    share: float | None = None
    submission: str | None = None
    losses: dict[str, float] = field(default_factory=dict)  # every such submission -> its share lost

    def line(self) -> str:
        if self.share is None:
            return f"{self.requirement}: no graded wrong submission violates it alone"
        return (f"{self.requirement}: {self.share:6.1%} of {', '.join(self.cells)} lost at least "
                f"({self.submission}; {len(self.losses)} submission{'s' if len(self.losses) != 1 else ''})")


def floors(assignment: str, submissions: list[Submission], scores: dict[str, dict[str, tuple[float, float]]]
           ) -> list[Floor]:
    """Per requirement id of the assignment's table, in the text's order: the smallest share of the points of the
    grade cells testing it that the graded wrong submissions violating it alone (``violates == [id]``) lose."""
    from course_tools.requirements import table  # it reads the corpus with this module

    found = []
    for requirement in table(assignment):
        floor = Floor(requirement.id, list(requirement.cells))
        for submission in submissions:
            graded = scores.get(submission.name)
            if submission.violates != [requirement.id] or graded is None or submission.language:
                continue
            most = sum(graded[cell][1] for cell in requirement.cells if cell in graded)
            lost = sum(graded[cell][1] - graded[cell][0] for cell in requirement.cells if cell in graded)
            floor.losses[submission.name] = lost / most if most else 0.0
        if floor.losses:
            floor.submission = min(floor.losses, key=lambda name: floor.losses[name])
            floor.share = floor.losses[floor.submission]
        found.append(floor)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every ready assignment of course.toml")
    parser.add_argument("--language", help="hand the submissions in with this edition's markdown (zh_CN)")
    parser.add_argument("--representative", action="store_true",
                        help="only the solution, the starter and one submission losing each grade cell")
    options = parser.parse_args(argv)
    try:
        names = select_assignments(options.assignments)
    except UnknownAssignment as exc:
        print(exc, file=sys.stderr)
        return 2
    corpora = {}
    for assignment in names:
        corpora[assignment] = load_corpus(assignment)
        if options.representative:
            corpora[assignment] = representative(corpora[assignment])
    with tempfile.TemporaryDirectory(prefix="corpus-") as scratch:  # one autograde run for them all
        graded = grade_all(corpora, Path(scratch), language=options.language)
    failures = []
    for assignment, submissions in corpora.items():
        scores = graded.scores[assignment]
        for submission in submissions:
            if submission.name not in scores:
                print(f"{assignment}  {submission.name:<32} ungraded")
                continue
            found = problems(submission, scores[submission.name])
            total = sum(s for s, _ in scores[submission.name].values())
            most = sum(m for _, m in scores[submission.name].values())
            print(f"{assignment}  {submission.name:<32} {total:5.1f} / {most:<5.1f} {'ok' if not found else 'WRONG'}")
            failures += found
        failures += [why for why in [graded.failure(assignment)] if why]
        if not options.representative and not options.language:
            print(f"{assignment}: the least share of its part that breaking each requirement alone costs "
                  f"(floor {FLOOR:.0%})")
            for floor in floors(assignment, submissions, scores):
                below = floor.share is None or floor.share < FLOOR
                print(f"  {floor.line()}{'  BELOW THE FLOOR' if below else ''}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
