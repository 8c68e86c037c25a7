"""`python -m course_tools.grading.autograde NAME` with a name that is not an assignment: one line that lists the
known ones, a non-zero exit, and nothing run (no grading, no export). A second run of the same assignment runs no
reference (kept in the course root's build/references), unless what it depends on changed; a reference run with
problems is never kept."""

import shutil
import subprocess
import sys

import pytest

from course_tools.release import COURSE, REPO, nbgrader_env
from torchdoctor.manifest import load_manifest


def autograde(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_tools.grading.autograde", *args], capture_output=True,
                          text=True, env=nbgrader_env(), cwd=REPO)


def state(path):
    return path.stat().st_mtime_ns if path.exists() else None


def test_an_unknown_assignment_lists_the_manifests_assignments_and_exports_nothing():
    grades = COURSE / "grades.csv"
    before = state(grades)
    proc = autograde("typo")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "'typo'" in lines[0]
    known = load_manifest().assignment_names()
    assert known and all(name in lines[0] for name in known)
    assert proc.stdout == ""
    assert state(grades) == before  # nbgrader export did not run


def test_in_a_copied_course_root_the_known_assignments_are_its_source_folders(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(COURSE / "source", course / "source")
    (course / "source" / "hw0_warmup").mkdir()
    shutil.copy(COURSE / "nbgrader_config.py", course)
    proc = autograde("hw1_dimensions", "typo", "--course", str(course))
    assert proc.returncode == 2
    expected = ", ".join(sorted(p.name for p in (course / "source").iterdir()))
    assert proc.stderr.splitlines() == [f"unknown assignment 'typo'; the course's assignments are: {expected}"]
    assert not (course / "grades.csv").exists() and not (course / "gradebook.db").exists()


def test_a_second_run_of_an_assignment_runs_no_reference_and_an_edited_source_misses_the_cache(tmp_path, capsys,
                                                                                                monkeypatch):
    import nbformat
    from nbgrader.api import Gradebook

    from course_tools.grading import autograde, references
    from course_tools.grading.zygote import machine_protections, unprotected_refusal
    from course_tools.release import nbgrader, solution_notebook

    if unprotected_refusal():
        pytest.skip(unprotected_refusal())
    monkeypatch.delenv(references.REFERENCE_CACHE_ENV, raising=False)
    assignment = "hw3_dtypes"
    course = tmp_path / "course"
    shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
    shutil.copy(COURSE / "nbgrader_config.py", course)
    nbgrader("generate_assignment", assignment, "--force", course=course)
    (course / "submitted" / "s1" / assignment).mkdir(parents=True)
    nbformat.write(solution_notebook(assignment), course / "submitted" / "s1" / assignment / f"{assignment}.ipynb")
    argv = [assignment, "--course", str(course), "--force", "--workers", "1"]

    first = autograde.run(argv)
    assert first.status == 0 and not first.timings[assignment].references_cached
    assert first.timings[assignment].references > 0
    kept = list((course / references.CACHE_FOLDER).glob("*.json"))
    assert len(kept) == 1
    capsys.readouterr()

    second = autograde.run(argv)
    assert second.status == 0 and second.timings[assignment].references_cached
    assert second.timings[assignment].references == 0  # no reference run: no notebook ran without a student
    assert f"{assignment}: start-up" in (out := capsys.readouterr().out) and "references: cached" in out
    with Gradebook(*autograde.gradebook_url(course)) as gb:
        nb = gb.find_submission_notebook(assignment, assignment, "s1")
        assert nb.score == nb.max_score > 0  # judged against the kept references: full marks

    here = machine_protections().to_dict()
    assert references.cached(course, assignment, here)
    source = course / "source" / assignment / f"{assignment}.ipynb"
    edited = nbformat.read(source, as_version=4)
    edited.cells[0].source += "\n"
    nbformat.write(edited, source)
    assert references.cached(course, assignment, here) == {}  # an edited source notebook misses the cache


def test_a_reference_run_with_problems_is_never_kept(tmp_path, monkeypatch):
    from course_tools.grading import references

    monkeypatch.delenv(references.REFERENCE_CACHE_ENV, raising=False)
    source = tmp_path / "source" / "ps1"
    source.mkdir(parents=True)
    (source / "p1.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    key = references.digest(source / "p1.ipynb")
    failed = references.References(failed={"t1": "fails on the reference solution"}, problems=["t1 fails"])
    assert references.keep(tmp_path, "ps1", {}, {key: failed.to_dict()}) == 0
    assert references.cached(tmp_path, "ps1", {}) == {}
    clean = references.References(records={"t1": {"checks": {"x": 1}}})
    assert references.keep(tmp_path, "ps1", {}, {key: clean.to_dict()}) == 1
    assert references.cached(tmp_path, "ps1", {}) == {key: clean.to_dict()}
    assert references.cached(tmp_path, "ps1", {"network": False}) == {}  # other protections: another key
