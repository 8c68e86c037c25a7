"""Homework in Chinese graded by the same gradebook (issue 24, item 4).

A student of the Chinese edition gets exercises/<a>/<a>.ipynb with its markdown cells translated (build/zh_CN/,
`make i18n-build`); nbgrader never locks or grades a markdown cell, so the English source's gradebook and checksums
grade it unchanged. These tests show it for every ready assignment whose Chinese edition is ready:

- the pinned nbgrader's checksum of every grade, locked and solution cell is the same in the English and the
  Chinese student notebook, and equals the one generate_assignment recorded in the committed release
  (exercises/, kept equal to generate_assignment's output by tests/test_release.py);
- `nbgrader validate` says the same of the Chinese starter as of the English one (cheap: two starters);
- the grading corpus test (tests/test_grading_corpus.py) hands in a representative subset of each corpus
  (`grading_corpus.representative`: the solution, the starter and, for each grade cell, the first submission that
  loses it; 5 to 7 of 50 to 64) again with the Chinese markdown (`grading_corpus.translated_twins`), in the same
  autograde run as the English corpus and with the English source's gradebook: each twin must get the scores its
  English twin deserves. Graded there, the twins cost a few submissions each, not a run of their own.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
from nbgrader.utils import compute_checksum, is_grade, is_locked, is_solution

from course_tools import i18n
from course_tools.grading_corpus import in_language, load_corpus, representative, translated_twins
from course_tools.release import REPO, assignments, nbgrader_env

READY = {n for n, ready in i18n.notebooks().items() if ready}
ASSIGNMENTS = [a for a in assignments() if f"exercises/{a}/{a}.ipynb" in READY]


def english_and_chinese(assignment: str) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    student = f"exercises/{assignment}/{assignment}.ipynb"
    return (nbformat.read(REPO / student, as_version=4),
            i18n.build_notebook(student, i18n.load(i18n.catalogue_path(student))))


def test_every_ready_assignment_is_tested_in_chinese():
    assert ASSIGNMENTS, "no assignment is zh_CN = \"ready\" in course.toml"


def test_the_representative_subset_tells_every_grade_cell_apart():
    for assignment in ASSIGNMENTS:
        submissions = load_corpus(assignment)
        chosen = representative(submissions)
        names = [s.name for s in chosen]
        assert len(names) == len(set(names)) and len(chosen) < len(submissions) / 4, assignment
        assert any(s.base == "solution" and not s.cells and not s.loses for s in chosen), assignment
        assert any(s.base == "release" and s.loses == "all" for s in chosen), assignment
        lost = {c for s in submissions if s.loses != "all" for c in [*s.loses, *s.scores]}
        chosen_lost = {c for s in chosen if s.loses != "all" for c in [*s.loses, *s.scores]}
        assert lost == chosen_lost, f"{assignment}: grade cells no chosen submission loses: {lost - chosen_lost}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_nbgrader_checksums_are_the_same_in_chinese(assignment):
    english, chinese = english_and_chinese(assignment)
    released = {c.id: c for c in english.cells}  # what generate_assignment makes (tests/test_release.py)
    checked = 0
    for en, zh in zip(english.cells, chinese.cells, strict=True):
        assert en.id == zh.id
        if not (is_grade(en) or is_locked(en) or is_solution(en)):
            continue
        assert en.cell_type == "code", f"{assignment}: markdown cell {en.id} is an nbgrader cell"
        assert compute_checksum(zh) == compute_checksum(en), f"{assignment}: cell {en.id}"
        recorded = released[en.id].metadata.get("nbgrader", {}).get("checksum")
        if recorded:
            assert compute_checksum(zh) == recorded, f"{assignment}: cell {en.id} differs from the release"
        checked += 1
    assert checked, f"{assignment}: no nbgrader cell"
    markdown = [c for c in chinese.cells if c.cell_type == "markdown"]
    assert any(z.source != e.source for z, e in zip(markdown, [c for c in english.cells if c.cell_type == "markdown"],
                                                     strict=True)), f"{assignment}: nothing is translated"


def validate(path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=path.parent,
                          env=nbgrader_env(), capture_output=True, text=True, timeout=600)
    # what validate says: its stdout and its own log lines; not the warnings a kernel or torch writes to stderr
    # (their wording, from the kernel's transport to a C++ source line, differs from run to run)
    said = [line for line in proc.stderr.splitlines(keepends=True) if line.startswith("[ValidateApp")]
    text = (proc.stdout + "".join(said)).replace(str(path), "NOTEBOOK").replace(path.name, "NOTEBOOK")
    text = re.sub(r"\[ValidateApp \| [^\]]*\]", "[ValidateApp]", text)  # log lines' time stamps
    return proc.returncode, text


@pytest.mark.parametrize("assignment", ASSIGNMENTS[:1])
def test_nbgrader_validate_says_the_same_of_a_chinese_starter(assignment, tmp_path):
    """One assignment (validate executes the starter: each one costs a kernel run)."""
    english, chinese = english_and_chinese(assignment)
    (tmp_path / "en").mkdir()
    (tmp_path / "zh_CN").mkdir()
    nbformat.write(english, tmp_path / "en" / f"{assignment}.ipynb")
    nbformat.write(chinese, tmp_path / "zh_CN" / f"{assignment}.ipynb")
    said_en = validate(tmp_path / "en" / f"{assignment}.ipynb")
    said_zh = validate(tmp_path / "zh_CN" / f"{assignment}.ipynb")
    assert said_zh == said_en
    assert "HAVE CHANGED" not in said_zh[1], said_zh[1]  # nbgrader's words for a locked or test cell edited


def test_a_submission_in_chinese_keeps_its_code():
    assignment = ASSIGNMENTS[0]
    english, chinese = english_and_chinese(assignment)
    handed_in = in_language(english, assignment, i18n.LANGUAGE)
    for sent, zh, en in zip(handed_in.cells, chinese.cells, english.cells, strict=True):
        assert sent.source == (zh.source if en.cell_type == "markdown" else en.source)
        assert sent.metadata == en.metadata
    with pytest.raises(ValueError):
        in_language(english, assignment, "fr")


def test_the_corpus_test_grades_chinese_twins_of_every_ready_assignment():
    for assignment in ASSIGNMENTS:
        submissions = load_corpus(assignment)
        twins = translated_twins(assignment, submissions)
        assert [t.name for t in twins] == [f"{s.name}-{i18n.LANGUAGE}" for s in representative(submissions)]
        assert all(t.language == i18n.LANGUAGE for t in twins), assignment
