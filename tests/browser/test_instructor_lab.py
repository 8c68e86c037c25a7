"""The instructor's JupyterLab (`make lab-instructor`), in a real Chromium: the Formgrader lists every assignment
of the manifest and grades a submission with its own Autograde button, through the course's hardened grading
(autograder/nbgrader_config.py). All of it in a scratch copy of the course: grading writes a gradebook and
folders there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from tests.browser.lab import REPO, running_lab, scratch_course  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402

HW = "hw1_dimensions"
STUDENT = "browser_student"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A scratch course where the instructor has generated hw1 (which registers it in the gradebook) and a
    student's correct submission waits in autograder/submitted/."""
    root = scratch_course(tmp_path_factory.mktemp("instructor") / "course")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "generate_assignment", HW, "--force"],
                   cwd=root / "autograder", env=env, check=True, capture_output=True, timeout=300)
    submitted = root / "autograder" / "submitted" / STUDENT / HW
    submitted.mkdir(parents=True)
    nbformat.write(answered_starter(HW), submitted / f"{HW}.ipynb")
    return root


def answered_starter(assignment: str) -> nbformat.NotebookNode:
    """The notebook a student hands in: the released starter with each answer cell holding the reference answer."""
    starter = nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    solution = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in starter.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return starter


@pytest.fixture(scope="module")
def lab(course, tmp_path_factory):
    with running_lab("instructor", course, tmp_path_factory.mktemp("instructor-home")) as lab:
        yield lab


def test_the_instructor_autogrades_a_submission_from_the_formgrader(lab, course, page, shot):
    page.goto(lab.page_url("lab/workspaces/instructor"))
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    items = [t.strip() for t in page.locator(".lm-Menu:visible .lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    assert "Formgrader" in items and "Create assignment" in items, f"the instructor's Nbgrader menu shows {items}"
    page.locator(".lm-Menu:visible .lm-Menu-item", has_text=re.compile(r"^Formgrader$")).click()
    formgrader = page.frame_locator("iframe[src*='formgrader']")

    # Manage Assignments: every assignment the manifest marks ready
    rows = formgrader.locator("tbody#main-table tr td.name")
    rows.first.wait_for()
    listed = {name.strip() for name in rows.all_inner_texts()}
    shot("08-formgrader-assignments")
    ready = set(load_manifest().assignment_names("ready"))
    assert ready <= listed, f"the Formgrader lists {sorted(listed)}, the manifest's ready assignments are {ready}"

    # Manage Submissions of hw1, then the row's Autograde button (the flash icon)
    formgrader.locator("tbody#main-table tr", has_text=HW).locator("td.num-submissions a").click()
    row = formgrader.locator("tbody#main-table tr", has_text=STUDENT)
    row.locator("td.status", has_text="needs autograding").wait_for()
    shot("09-formgrader-submission")
    row.locator("td.autograde a").click()

    modal = formgrader.locator(".modal-dialog", has_text="autograd")
    modal.wait_for(timeout=600_000)  # grading starts the sandbox's zygote (it imports torch) on a loaded machine
    text = modal.inner_text()
    shot("10-formgrader-autograded")
    assert f"Successfully autograded '{HW}' for student '{STUDENT}'" in text, text
    assert "Tampering" not in text, text
    # The hardened pipeline says what protects this run before it grades anything.
    assert "sandbox protections on" in lab.log_text() + text, "the Formgrader did not grade in the course's sandbox"
    modal.locator(".modal-footer button", has_text="OK").click()
    formgrader.locator(".modal-backdrop").wait_for(state="detached")

    score = row.locator("td.score")
    score.filter(has_text="/").wait_for()
    got, maximum = (float(x) for x in score.inner_text().split("/"))
    shot("11-formgrader-score")
    assert maximum > 0 and got == maximum, f"the reference solution scored {got} / {maximum}"
    assert (course / "autograder" / "autograded" / STUDENT / HW / f"{HW}.ipynb").exists()
