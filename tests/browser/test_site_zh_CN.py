"""The course site in both languages (issue 24) in a real Chromium: from an English chapter the language switch
leads to its Chinese twin (Chinese text, the English run's plots and tracebacks, the Chinese notebook and homework
to download) and back; the Chinese contents page lists the Chinese chapters; the search finds a Chinese section.

Built like tests/browser/test_site.py's site, from a snapshot of the executed notebooks in build/notebooks/."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from course_tools import site as course_site  # noqa: E402
from tests.browser.test_site import image_outputs, search_index, snapshot_executed  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402


@pytest.fixture(scope="module")
def built_zh(tmp_path_factory) -> tuple[Path, Path]:
    snapshot = tmp_path_factory.mktemp("executed")
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
        executed = nbformat.read(entry.executed_in(snapshot), as_version=4)
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
