"""The course site in both languages (issues 24 and 37) in a real Chromium: from an English chapter the language
switch leads to its Chinese twin (Chinese text, plots and tracebacks, the Chinese notebook and homework to download)
and back; the Chinese contents page lists the Chinese chapters; the search finds a Chinese section; a Chinese
learner's path (search 显存, chapter 03, a clinic verdict) reads no English in what the library printed (the
clinic's own texts excepted until they are translated).

Built like tests/browser/test_site.py's site, from a snapshot of the executed notebooks in build/notebooks/. `make
site` executes every Chinese notebook for the real site; here only the learner's path (LEARNER_PATH) is executed in
Chinese, before the English snapshot is waited for: the other Chinese pages show the English run's outputs (and say
so), which keeps `make test` within its time (docs/authors.md "The course site")."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from course_tools import i18n  # noqa: E402
from course_tools import site as course_site  # noqa: E402
from course_tools.release import REPO  # noqa: E402
from tests.browser.test_site import image_outputs, search_index, snapshot_executed  # noqa: E402
from tests.torchdoctor.test_library_zh_CN import english_prose  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402

LEARNER_PATH = ["course/03_memory.ipynb", "course/bug_clinic.ipynb"]  # executed in Chinese for these tests


@pytest.fixture(scope="module")
def built_zh(tmp_path_factory) -> tuple[Path, Path]:
    snapshot = tmp_path_factory.mktemp("executed")
    for notebook in LEARNER_PATH:
        i18n.build(notebook)
    assert i18n.run(LEARNER_PATH, out=snapshot) == 0, "the Chinese notebooks failed the runner's checks"
    snapshot_executed(course_site.pages(), snapshot)
    out = tmp_path_factory.mktemp("site") / "site"
    course_site.build(out, run=False, executed=snapshot)
    return out, snapshot


def test_the_language_switch_leads_to_the_chinese_twin_and_back(built_zh, page, shot):
    built, snapshot = built_zh
    chinese = [p for p in course_site.pages() if p.notebook in course_site.chinese_notebooks()]
    assert chinese, "no page has a ready Chinese edition"
    for entry in chinese:
        page.goto((built / entry.html_name).as_uri())
        page.locator("#td-language-switch").click()
        page.wait_for_url(f"**/zh_CN/{entry.html_name}")
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        ran = entry.chinese_executed_in(snapshot)
        executed = nbformat.read(ran if ran.is_file() else entry.executed_in(snapshot), as_version=4)
        title = course_site.chinese_title(course_site.chinese_executed(executed, entry.notebook), entry.label)
        assert page.locator("nav.td-site-nav .td-home").inner_text() == title
        images = page.locator(".jp-OutputArea-output img")
        assert images.count() == image_outputs(executed), f"zh_CN/{entry.html_name}: plots missing"
        tracebacks = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                                  has_text="Traceback")
        if entry.notebook in [c.notebook for c in load_manifest().chapters]:  # as the English site's test
            assert tracebacks.count() >= 1, f"zh_CN/{entry.html_name}: no traceback"
        here = built / "zh_CN"
        assert (here / page.locator("a.td-notebook-link").get_attribute("href")).is_file()
        if page.locator("a.td-homework-link").count():
            assert (here / page.locator("a.td-homework-link").get_attribute("href")).is_file()
        if entry.notebook.endswith("01_dimensions.ipynb"):
            shot("19-site-zh_CN-chapter01")
        page.locator("#td-language-switch").click()
        page.wait_for_url(f"**/site/{entry.html_name}")
        assert page.evaluate("document.documentElement.lang") == "en"


def test_the_chinese_contents_and_search(built_zh, page, shot):
    built, _ = built_zh
    page.goto((built / "zh_CN" / "index.html").as_uri())
    links = page.locator("#toc a:not([download])")
    chinese = [p for p in course_site.pages() if p.notebook in course_site.chinese_notebooks()]
    assert links.count() == len(chinese)
    shot("20-site-zh_CN-contents")
    section = next(e for e in search_index(built) if e.get("lang") == "zh-CN" and "#" in e["href"])
    box = page.locator("#td-search")
    box.fill(section["title"])
    hit = page.locator(f"#td-search-results a.td-search-hit[href='../{section['href']}']")
    hit.first.click()
    page.wait_for_url(f"**/{section['href']}")
    page.locator("a.td-brand").click()  # the bar's links lead back to the site's root
    page.wait_for_url("**/site/index.html")


# ---------------------------------------------------------------------------------------------------------------
# A Chinese learner's path (issue 37): the Chinese contents, a search for 显存, chapter 03 with its summary table as
# the library printed it in the Chinese run (its questions without answers), a clinic case and its verdict. What it
# reads of the library's output must hold no English prose (tests/torchdoctor/test_library_zh_CN.py's scan).

SEARCHED = ("显存", "维度", "梯度爆炸", "叶子张量")


def outputs_of(page, cell_ids: list[str]) -> str:
    """The text of the outputs of these cells, as the page shows them, without their inline code (a summary table
    quotes PyTorch's messages, which stay English, as <code>)."""
    without_code = ("area => { const copy = area.cloneNode(true); copy.querySelectorAll('td, th, p, li').forEach("
                    "e => e.append(' ')); copy.querySelectorAll('code').forEach(c => c.replaceWith(' ')); "
                    "return copy.textContent; }")
    return "\n".join(page.locator(f"[id='cell-id={cell}'] .jp-OutputArea").evaluate(without_code)
                     for cell in cell_ids)


def cell_source(notebook: str, cell_id: str) -> str:
    return next(c.source for c in nbformat.read(REPO / notebook, as_version=4).cells if c.id == cell_id)


def library_cells(notebook: str, calls: tuple[str, ...]) -> list[str]:
    """The ids of the code cells of a notebook whose source calls one of these library functions."""
    nb = nbformat.read(REPO / notebook, as_version=4)
    return [c.id for c in nb.cells if c.cell_type == "code" and any(f"{call}(" in c.source for call in calls)]


def test_a_chinese_learner_walks_the_site(built_zh, page, shot):
    built, _ = built_zh
    page.goto((built / "zh_CN" / "index.html").as_uri())
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    box = page.locator("#td-search")
    assert box.get_attribute("placeholder") == "搜索章节、速查表、指南"
    for term in SEARCHED:  # each term finds sections of the Chinese pages
        box.fill(term)
        page.locator("#td-search-results a.td-search-hit").first.wait_for(state="visible")
        hrefs = page.eval_on_selector_all("#td-search-results a.td-search-hit",
                                          "a => a.map(x => x.getAttribute('href'))")
        assert any(h.startswith("../zh_CN/") for h in hrefs), f"{term}: no Chinese page among {hrefs}"
    box.fill("显存")
    hit = page.locator("#td-search-results a.td-search-hit[href^='../zh_CN/03_memory.html']").first
    hit.wait_for(state="visible")
    chinese_hits = page.locator("#td-search-results a.td-search-hit[href^='../zh_CN/']")
    labels = "\n".join(chinese_hits.nth(i).locator(".td-hit-title, .td-hit-page").all_inner_texts()[j]
                       for i in range(chinese_hits.count()) for j in range(2))  # the snippets quote the page's code
    assert "章节 · 中文" in labels and not english_prose(labels), f"English in the search hits: {english_prose(labels)}"
    shot("21-site-zh_CN-search-xiancun")
    hit.click()
    page.wait_for_url("**/zh_CN/03_memory.html*")

    # chapter 03: the frame and the chapter's summary table in Chinese; the check-yourself questions without answers
    bar = page.locator("nav.td-bar").inner_text() + page.locator("nav.td-site-nav").inner_text()
    assert not english_prose(bar.replace("Torch Doctor", "")), f"English in the bar: {english_prose(bar)}"
    assert "由课程的测试以中文执行" in bar, "chapter 03 was not executed in Chinese"
    checks = library_cells("course/03_memory.ipynb", ("check_answer", "checking"))
    for cell in checks:  # the page shows each question, not the runner's reference answer and its verdict
        shown = page.locator(f"[id='cell-id={cell}']")
        assert shown.count() == 1, f"check cell {cell} is not on the page"
        assert not shown.locator(".jp-OutputArea-output").count(), f"cell {cell} shows a verdict: {shown.inner_text()}"
    answers = [c.id for c in nbformat.read(REPO / "course/03_memory.ipynb", as_version=4).cells
               if c.get("metadata", {}).get("torchdoctor", {}).get("answer") is not None]
    for cell in answers:  # the answer cells as the learner gets them: None, not the reference answer
        assert "None" in page.locator(f"[id='cell-id={cell}']").inner_text(), f"answer cell {cell} shows an answer"
    summary = outputs_of(page, library_cells("course/03_memory.ipynb", ("chapter_summary", "summary_table")))
    assert "本章的错误" in summary, summary[:300]
    found = english_prose(summary)
    assert not found, f"English in what the library printed on zh_CN/03_memory.html: {found}"
    page.locator(f"[id='cell-id={checks[0]}']").scroll_into_view_if_needed()
    shot("22-site-zh_CN-chapter03-check-yourself")

    # the bug clinic: the drawn cases' turns as the Chinese run printed them (the runner leaves them unanswered: the
    # quiz's verdict, in Chinese), and the worked case's verdicts. The clinic's own texts (case titles, the turns'
    # names, PASSED / NOT YET verdicts, measurements) are not in the catalogue yet (issue 37 item 1): they are checked
    # to be there, not yet for English.
    page.goto((built / "zh_CN" / "bug_clinic.html").as_uri())
    verdict_cells = library_cells("course/bug_clinic.ipynb", ("check_diagnosis", "check_fix"))
    turns = [cell for cell in verdict_cells if "answered(" in cell_source("course/bug_clinic.ipynb", cell)]
    assert turns and len(turns) < len(verdict_cells), "the clinic has turns to answer and a worked case"
    for cell in turns:
        assert "：尚未作答。请在上面的单元格中写下你的答案" in outputs_of(page, [cell]), outputs_of(page, [cell])
    worked = [cell for cell in verdict_cells if cell not in turns]
    assert all(outputs_of(page, [cell]).strip() for cell in worked), "a worked verdict is missing"
    page.locator(f"[id='cell-id={worked[0]}']").scroll_into_view_if_needed()
    shot("23-site-zh_CN-clinic-verdict")


def test_a_wrong_answer_in_a_chinese_kernel_gets_chinese_hints(tmp_path):
    """The static site cannot run code: answering wrongly is checked in a kernel started for the Chinese chapter 03
    (as JupyterLab starts it), with Q5 answered wrongly twice: the verdict, the misconception, the nudge, then the
    narrower hint and the way to the answer, all Chinese."""
    from jupyter_client.manager import start_new_kernel

    from torchdoctor import explain_i18n, quiz

    notebook = i18n.build("course/03_memory.ipynb", out=tmp_path / "03_memory.ipynb")
    cells = {c.id: c.source for c in nbformat.read(notebook, as_version=4).cells}
    env = {k: v for k, v in os.environ.items() if k not in (explain_i18n.ENV_LANG, quiz.STRICT)}
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path),
                                       env=env | {explain_i18n.NOTEBOOK_ENV: str(notebook)})
    printed: list[str] = []
    try:
        for code in ('DEVICE, FAST, SEED = "cpu", True, 0', cells["c02"], "q5_frees = {'a'}  # empty_cache()"):
            client.execute_interactive(code, timeout=300)
        for _ in range(2):
            lines: list[str] = []
            client.execute_interactive(cells["c68c"], timeout=300, output_hook=lambda msg, lines=lines: lines.append(
                msg["content"].get("text", "") + msg["content"].get("traceback", [""])[-1]))
            printed.append("".join(lines))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    first, second = printed
    assert first.startswith("Q5") and "Q5：正确" not in first and "empty_cache()" in first, first
    assert len(second.splitlines()) > len(first.splitlines()) - 1 and 'reveal("Q5")' in second, second
    for text in printed:
        assert re.search(r"[\u4e00-\u9fff]{4}", text), text
        assert not english_prose(text), f"English in a Chinese hint: {english_prose(text)}\n{text}"
