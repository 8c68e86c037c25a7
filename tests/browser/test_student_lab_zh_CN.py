"""The Chinese edition in the student's JupyterLab (`make lab LANG=zh_CN`, issue 24), in a real Chromium: a Chinese
chapter opens with its Chinese text and its (English) code, and a Chinese homework starter is validated with
nbgrader's Validate button, first failing, then, with the reference answers typed in, passing.

As `make lab LANG=zh_CN` does, JupyterLab serves the Chinese notebooks (`make i18n-build`, written here into a
scratch build/zh_CN/ with course_tools.i18n) in the student's view, with TORCHDOCTOR_LANG=zh_CN."""

from __future__ import annotations

from collections.abc import Iterator

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from course_tools import i18n  # noqa: E402
from tests.browser import jlab  # noqa: E402
from tests.browser.lab import Lab, running_lab  # noqa: E402
from tests.browser.test_student_lab import solution_sources, starter_solution_ids  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402

READY = {n for n, ready in i18n.notebooks().items() if ready}


def chinese_chapter() -> str:
    chapters = [c.notebook for c in load_manifest().chapters if c.notebook in READY]
    if not chapters:
        pytest.skip("no chapter is zh_CN = \"ready\" in course.toml")
    return chapters[0]


def chinese_homework() -> str:
    names = [c.homework for c in load_manifest().chapters if f"exercises/{c.homework}/{c.homework}.ipynb" in READY]
    if not names:
        pytest.skip("no assignment is zh_CN = \"ready\" in course.toml")
    return names[0]


def first_heading(nb: nbformat.NotebookNode) -> str:
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.lstrip().startswith("#"))
    return cell.source.lstrip().splitlines()[0].lstrip("#").strip()


@pytest.fixture(scope="module")
def chinese_lab(tmp_path_factory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("student-zh_CN")
    root = tmp / "build" / "zh_CN"
    for notebook in sorted(READY):
        i18n.build(notebook, out=root / notebook)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TORCHDOCTOR_LANG", "zh_CN")
        with running_lab("student", root, tmp / "home") as lab:
            yield lab


def test_a_chinese_chapter_opens_with_its_chinese_text(chinese_lab, page, shot):
    notebook = chinese_chapter()
    built = nbformat.read(chinese_lab.root / notebook, as_version=4)
    english = nbformat.read(i18n.REPO / notebook, as_version=4)
    heading = first_heading(built)
    assert heading != first_heading(english)
    jlab.open_notebook(page, chinese_lab, notebook)
    shown = heading.replace("`", "").replace("*", "")
    text = ""
    for _ in range(120):  # a loaded machine renders the cells a while after the tab opens
        text = page.locator(jlab.NOTEBOOK).inner_text()
        if shown in text:
            break
        page.wait_for_timeout(500)
    shot("zh_CN-01-chapter")
    assert shown in text, f"the Chinese heading {heading!r} is not on the page"
    assert "FAST = False" in jlab.cell_text(jlab.code_cells(page).first)  # the English code, unchanged


def test_a_student_validates_a_chinese_homework(chinese_lab, page, shot):
    hw = chinese_homework()
    jlab.open_notebook(page, chinese_lab, f"exercises/{hw}/{hw}.ipynb")
    heading = first_heading(nbformat.read(chinese_lab.root / "exercises" / hw / f"{hw}.ipynb", as_version=4)).split(
        "—")[0].strip()
    # Under make test's load the panel can show its first, empty cell before the notebook's content: wait for it.
    page.locator(jlab.NOTEBOOK, has_text=heading).wait_for(timeout=60_000)
    jlab.run_all(page)
    message = jlab.validate(page)
    shot("zh_CN-02-validate-starter")
    jlab.close_dialog(page)
    assert ("cell failed" in message or "cells failed" in message) and "Success" not in message, message
    assert "HAVE CHANGED" not in message, message  # no locked or test cell differs from the English checksums

    answers = solution_sources(hw)
    for grade_id in starter_solution_ids(hw):
        cells = jlab.code_cells(page)
        cell = cells.nth(next(i for i in range(cells.count())
                              if "raise NotImplementedError()" in jlab.cell_text(cells.nth(i))))
        jlab.set_source(page, cell, answers[grade_id])
    jlab.save(page)
    jlab.run_all(page)
    message = jlab.validate(page)
    shot("zh_CN-03-validate-success")
    jlab.close_dialog(page)
    assert "Success! Your notebook passes all the tests." in message, message
