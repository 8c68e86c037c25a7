"""`python -m course_tools.grading.autograde NAME` with a name that is not an assignment: one line that lists the
known ones, a non-zero exit, and nothing run (no grading, no export)."""

import shutil
import subprocess
import sys

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
