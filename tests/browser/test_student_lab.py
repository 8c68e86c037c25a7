"""The student's JupyterLab (`make lab`), in a real Chromium: the homework with nbgrader's Validate button, a
chapter run from top to bottom, the cheat sheet's search. No instructor tool, no news prompt."""

from __future__ import annotations

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from tests.browser import jlab  # noqa: E402
from tests.browser.lab import REPO  # noqa: E402
from torchdoctor.catalog import CATALOG  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402

HW = "hw1_dimensions"


def solution_sources(assignment: str) -> dict[str, str]:
    """The reference answer of each solution cell, by nbgrader grade_id (what a correct student would write)."""
    nb = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}


def starter_solution_ids(assignment: str) -> list[str]:
    nb = nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]


def test_the_student_view_has_no_instructor_tools_and_no_news_prompt(student_lab, page, shot):
    jlab.open_notebook(page, student_lab, f"exercises/{HW}/{HW}.ipynb")
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    items = [t.strip() for t in page.locator(".lm-Menu:visible .lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    shot("01-student-nbgrader-menu")
    page.keyboard.press("Escape")
    assert items == ["Assignment List"], f"the student's Nbgrader menu shows {items}"
    # Create Assignment lives in the right sidebar; the Formgrader's pages are not served at all.
    assert page.locator(".lm-TabBar-tab[data-id='nbgrader-create_assignment']").count() == 0
    assert page.locator(".jp-Notebook-toolbarCell, .nbgrader-CellWidget").count() == 0
    reply = page.request.get(student_lab.page_url("formgrader"))
    assert reply.status == 404, f"/formgrader answered {reply.status} in the student's view"
    # The news prompt is a toast ("Would you like to get notified about official Jupyter news?"), shown while
    # fetchNews is undecided; the view decides it.
    assert page.get_by_text("official Jupyter news").count() == 0
    notification = page.request.get(student_lab.page_url(
        "lab/api/settings/@jupyterlab/apputils-extension:notification")).json()
    assert notification["schema"]["properties"]["fetchNews"]["default"] == "false"
    assert "Validate" in page.locator(f"{jlab.NOTEBOOK} .jp-NotebookPanel-toolbar").inner_text()


def test_a_student_validates_the_starter_then_a_correct_answer(student_lab, page, shot):
    jlab.open_notebook(page, student_lab, f"exercises/{HW}/{HW}.ipynb")
    jlab.run_all(page)
    shot("02-hw1-starter-run")
    assert "NotImplementedError" in page.locator(jlab.NOTEBOOK).inner_text()

    message = jlab.validate(page)
    shot("03-hw1-validate-starter")
    jlab.close_dialog(page)
    # nbgrader's dialog lists the failing test cells with their tracebacks
    assert "cell failed" in message or "cells failed" in message, message
    assert "Success" not in message and "Traceback" in message, message

    answers = solution_sources(HW)
    ids = starter_solution_ids(HW)
    for grade_id in ids:
        # the first cell still to answer, pinned by its position (a filter would move on once it is answered)
        cells = jlab.code_cells(page)
        cell = cells.nth(next(i for i in range(cells.count())
                              if "raise NotImplementedError()" in jlab.cell_text(cells.nth(i))))
        jlab.set_source(page, cell, answers[grade_id])
        assert jlab.cell_text(cell).strip() == answers[grade_id].strip(), f"typing into {grade_id} went wrong"
    assert jlab.cells_with_code(page, "raise NotImplementedError()").count() == 0
    jlab.save(page)
    jlab.run_all(page)
    prompts = jlab.prompts(page)
    assert all(p.strip("[]: ").isdigit() for p in prompts), f"not every cell ran: {prompts}"
    shot("04-hw1-answered-run")

    message = jlab.validate(page)
    shot("05-hw1-validate-success")
    jlab.close_dialog(page)
    assert "Success! Your notebook passes all the tests." in message, message


def declared_error_cells(path: str) -> list[int]:
    """Positions among the code cells of those tagged `raises-exception`."""
    nb = nbformat.read(REPO / path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [i for i, c in enumerate(code) if "raises-exception" in c.metadata.get("tags", [])]


def test_a_student_runs_chapter_01_and_sees_its_declared_errors(student_lab, page, shot):
    (chapter,) = [c for c in load_manifest().chapters if c.number == 1]
    jlab.open_notebook(page, student_lab, chapter.notebook)
    parameters = jlab.code_cells(page).first
    assert "FAST = False" in jlab.cell_text(parameters)
    # As the chapter's first cell invites: fewer training steps.
    jlab.set_source(page, parameters, jlab.cell_text(parameters).replace("FAST = False", "FAST = True"))
    jlab.run_all(page)

    prompts = jlab.prompts(page)
    assert all(p.strip("[]: ").isdigit() for p in prompts), f"Run All stopped early: {prompts}"
    stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    tracebacks = page.locator(f"{jlab.NOTEBOOK} {stderr}", has_text="Traceback")
    shown = [i for i, cell in enumerate(jlab.code_cells(page).all())
             if cell.locator(stderr, has_text="Traceback").count()]
    declared = declared_error_cells(chapter.notebook)
    assert declared and shown == declared, f"code cells with a traceback {shown}, declaring one {declared}"
    tracebacks.first.scroll_into_view_if_needed()
    shot("06-chapter01-traceback")
    assert page.locator(f"{jlab.NOTEBOOK} .jp-OutputArea-output img").count() >= 1, "no plot rendered"


@pytest.mark.parametrize("message, entry", [
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x3072 and 512x10)", "mat1-mat2-shapes"),
])
def test_the_cheat_sheet_search_finds_a_pasted_message(student_lab, page, shot, message, entry):
    def open_and_run() -> None:
        jlab.open_notebook(page, student_lab, "course/cheatsheet.ipynb")
        jlab.run_all(page)

    open_and_run()
    search = page.locator(f"{jlab.NOTEBOOK} input[placeholder^='search words']")
    jlab.wait_for_widget(page, search, jlab.cells_with_code(page, "interactive_cheatsheet()").last, open_and_run)
    search.fill(message)
    search.press("Enter")
    widget = page.locator(f"{jlab.NOTEBOOK} .widget-vbox").first
    # the header row and one entry: the one explain() gives for the message
    page.wait_for_function("el => el.querySelectorAll('table tr').length === 2", arg=widget.element_handle())
    shot("07-cheatsheet-search")
    (wanted,) = [e for e in CATALOG if e.id == entry]
    assert wanted.title in widget.locator("table tr").last.inner_text()
