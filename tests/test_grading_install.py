"""The grading plugins are installed with the course (`make setup`), so a copy of the nbgrader course root grades
anywhere with the same protections; without them, autograde stops with one line that says what to install."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools.grading_corpus import build_notebook, load_corpus, problems
from course_tools.release import COURSE, REPO, solution_notebook
from torchdoctor.manifest import load_manifest

ASSIGNMENT = load_manifest().assignment_names()[0]
NBGRADER = str(Path(sys.executable).parent / "nbgrader")


def clean_env(**extra: str) -> dict[str, str]:
    """The grader's environment on another machine: this venv's bin/ on PATH, nothing that points at the
    repository or at a `make autograde` batch."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("TORCHDOCTOR_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def nbgrader(course: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([NBGRADER, *args], cwd=course, env=clean_env(**env), capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def copied_course(tmp_path_factory):
    """autograder/ (configuration and sources) copied outside the repository, its assignment generated."""
    course = tmp_path_factory.mktemp("elsewhere") / "course"
    assert not course.is_relative_to(REPO)
    course.mkdir()
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(COURSE / "source", course / "source")
    proc = nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return course


def test_the_grading_plugins_are_installed_in_the_environment():
    proc = subprocess.run([sys.executable, "-c", "import course_tools.grading.verdict, torchdoctor.observe"],
                          cwd="/", env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_copied_course_root_grades_with_the_same_protections(copied_course):
    corpus = load_corpus(ASSIGNMENT)
    chosen = [next(s for s in corpus if s.base == "solution" and not s.cells and not s.loses),
              next(s for s in corpus if s.base == "release" and not s.cells),
              next(s for s in corpus if s.loses and s.loses != "all")]
    notebook = f"{ASSIGNMENT}.ipynb"
    bases = {"release": nbformat.read(copied_course / "release" / ASSIGNMENT / notebook, as_version=4),
             "solution": solution_notebook(ASSIGNMENT)}
    for submission in chosen:
        folder = copied_course / "submitted" / submission.name / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(build_notebook(submission, bases), folder / notebook)

    proc = nbgrader(copied_course, "autograde", ASSIGNMENT, "--force")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "sandbox protections on:" in log and "ModuleNotFoundError" not in log
    assert "nbgrader's in-kernel verdict stands" not in log  # every hidden test was judged outside the kernel
    found = []
    with Gradebook(f"sqlite:///{copied_course / 'gradebook.db'}") as gb:
        for submission in chosen:
            grades = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, submission.name).grades
            found += problems(submission, {g.name: (g.score, g.max_score) for g in grades})
    assert not found, "\n".join(found)


def test_without_the_plugins_autograde_stops_with_one_line_saying_what_to_install(copied_course, tmp_path):
    # A course_tools that cannot be imported shadows the installed one: as if the course were not installed.
    (tmp_path / "course_tools").mkdir()
    (tmp_path / "course_tools" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'course_tools'\", name='course_tools')\n")
    folder = copied_course / "submitted" / "no_plugins" / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(copied_course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", folder)
    proc = nbgrader(copied_course, "autograde", ASSIGNMENT, "--force", PYTHONPATH=str(tmp_path))
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log
    assert "Traceback" not in log and "ModuleNotFoundError" not in log, log
    lines = [line for line in log.splitlines() if "grading plugins" in line]
    assert len(lines) == 1, log
    assert "are not installed" in lines[0] and "pip install" in lines[0] and "make setup" in lines[0]
