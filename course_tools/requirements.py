"""The requirement table of an assignment: every requirement the student text states, the hidden checks that test
it and the corpus submissions that break it alone (issue 23; docs/instructors.md, "Requirement tables").

Authoring rules, checked by tests/test_requirements.py:

- In the source notebook's markdown, a sentence that states a requirement (a "must", a return type, an error to
  raise, a behaviour to keep) ends with its id in brackets, ``[R<part>.<n>]``, e.g. "It returns a dict. [R2.1]".
  The requirement's text is everything since the previous marker or the start of its paragraph or list item: a
  rule stated in several sentences keeps them all (start a new paragraph to leave context out). Students see the
  ids; feedback and the table use them.
- Each hidden check names the ids it tests: ``record.check(name, observe, requirements=["R2.1"])`` (or
  ``Record.value`` / ``Record.choice``), written as a literal list so this module can read it without running
  anything.
- The grading corpus (tests/grading_corpus/<assignment>.toml) has, for each id, a wrong submission with
  ``violates = ["R2.1"]`` (that id alone) which must lose points on a grade cell whose hidden checks test it.

Usage: python -m course_tools.requirements [ASSIGNMENT ...] [--write]   (--write regenerates docs/requirements/)
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_tools.grading.requirement_text import requirement_sentences
from course_tools.grading_corpus import Submission, load_corpus
from course_tools.manifest_cli import UnknownAssignment, select_assignments
from course_tools.release import COURSE, REPO

TABLES = REPO / "docs" / "requirements"
CHECK_IDS = re.compile(r"requirements\s*=\s*[\[(]([^\])]*)[\])]")


@dataclass
class Requirement:
    """One requirement sentence, where it is tested and which corpus submissions break it."""

    id: str
    sentence: str
    cells: list[str] = field(default_factory=list)  # grade cells whose hidden checks name the id
    checks: int = 0  # how many checks name it
    violators: list[str] = field(default_factory=list)  # corpus submissions violating this id alone
    losing: list[str] = field(default_factory=list)  # those of them that must lose points on one of `cells`


def source_path(assignment: str) -> Path:
    return COURSE / "source" / assignment / f"{assignment}.ipynb"


def _hidden_part(source: str) -> str:
    begin, end = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
    return source[source.index(begin):source.index(end)] if begin in source and end in source else ""


def _deserves_less(submission: Submission, cell: str) -> bool:
    return submission.loses == "all" or cell in submission.loses or cell in submission.scores


def table(assignment: str) -> list[Requirement]:
    """The assignment's requirements, in the order the text states them; raises ValueError on a duplicate id or a
    check naming an id the text does not state."""
    nb = nbformat.read(source_path(assignment), as_version=4)
    requirements: dict[str, Requirement] = {}
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for rid, sentence in requirement_sentences(cell.source):
            if rid in requirements:
                raise ValueError(f"{assignment}: requirement {rid} is stated twice")
            requirements[rid] = Requirement(rid, sentence)
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or not grade_id:
            continue
        for listed in CHECK_IDS.findall(_hidden_part(cell.source)):
            for rid in re.findall(r"R\d+\.\d+", listed):
                if rid not in requirements:
                    raise ValueError(f"{assignment}: a hidden check of {grade_id} names {rid}, which no sentence "
                                     f"of the text states")
                requirement = requirements[rid]
                requirement.checks += 1
                if grade_id not in requirement.cells:
                    requirement.cells.append(grade_id)
    for submission in load_corpus(assignment):
        for rid in submission.violates:
            if rid not in requirements:
                raise ValueError(f"{assignment}: corpus submission {submission.name!r} violates {rid}, which no "
                                 f"sentence of the text states")
            if submission.violates != [rid]:
                continue
            requirement = requirements[rid]
            requirement.violators.append(submission.name)
            if any(_deserves_less(submission, cell) for cell in requirement.cells):
                requirement.losing.append(submission.name)
    return list(requirements.values())


def gaps(assignment: str) -> list[str]:
    """What the table lacks: a text without ids, an id without a check, an id without a submission that violates
    it alone and loses points where it is checked."""
    requirements = table(assignment)
    if not requirements:
        return [f"{assignment}: the student text marks no requirement ([R<part>.<n>] after each sentence)"]
    found = []
    for r in requirements:
        if not r.checks:
            found.append(f"{assignment} {r.id} ({r.sentence!r}): no hidden check names it")
        elif not r.losing:
            found.append(f"{assignment} {r.id} ({r.sentence!r}): no corpus submission with violates = [{r.id!r}] "
                         f"loses points on {', '.join(r.cells)}")
    return found


def _row(r: Requirement) -> str:
    sentence = r.sentence.replace("|", "\\|")
    losing = ", ".join(f"`{name}`" for name in r.losing) or "—"
    return f"| {r.id} | {sentence} | {', '.join(r.cells) or '—'} ({r.checks}) | {losing} |"


def markdown(assignment: str) -> str:
    rows = [_row(r) for r in table(assignment)]
    return "\n".join([
        f"# Requirement table: {assignment}",
        "",
        "<!-- generated by `python -m course_tools.requirements --write`; do not edit -->",
        "",
        "Each requirement the student text states, the grade cells whose hidden checks test it (with how many checks",
        "name it) and the corpus submissions that break it alone and must lose points there "
        "(tests/grading_corpus/).",
        "",
        "| id | requirement | tested by (checks) | wrong submissions that break it alone |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every ready assignment of course.toml")
    parser.add_argument("--write", action="store_true", help="write docs/requirements/<assignment>.md")
    args = parser.parse_args(argv)
    try:
        names = select_assignments(args.assignments)
    except UnknownAssignment as exc:
        print(exc, file=sys.stderr)
        return 2
    problems = []
    for assignment in names:
        text = markdown(assignment)
        if args.write:
            TABLES.mkdir(parents=True, exist_ok=True)
            (TABLES / f"{assignment}.md").write_text(text, encoding="utf-8")
        else:
            print(text)
        problems += gaps(assignment)
    for problem in problems:
        print(f"GAP {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
