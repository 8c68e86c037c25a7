"""The course site (`make site`) in a real Chromium: every ready chapter's page shows its plots and its
tracebacks, links to its notebook and its homework; the contents page follows course.toml; no solution is there.

The site is built into a scratch folder from the executed notebooks in build/notebooks/. Under `make test` the
notebooks part writes them while pytest runs: this test waits until each is complete (papermill's end time set)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")

from course_tools import site as course_site  # noqa: E402
from torchdoctor.manifest import load_manifest  # noqa: E402

WAIT_FOR_NOTEBOOKS_S = 1500  # the notebooks part of `make test` runs beside pytest on two cores
IDLE_S = 240  # nothing executed for this long while some notebooks are missing: nobody is running them
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")


def complete(path: Path) -> str | None:
    """The notebook's text when papermill has finished writing it (its end time is set), else None."""
    try:
        text = path.read_text(encoding="utf-8")
        return text if json.loads(text)["metadata"]["papermill"]["end_time"] is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def snapshot_executed(pages: list[course_site.Page], snapshot: Path) -> None:
    """Copy each page's executed notebook, once complete, into `snapshot`: the site is built from there, so that
    a notebook run starting meanwhile cannot hand the build a half-written file."""
    deadline = time.monotonic() + WAIT_FOR_NOTEBOOKS_S
    waiting = list(pages)
    while True:
        for page in list(waiting):
            if (text := complete(page.executed)) is not None:
                target = page.executed_in(snapshot)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                waiting.remove(page)
        if not waiting:
            return
        newest = max((p.executed.stat().st_mtime for p in pages if p.executed.exists()), default=0)
        if time.monotonic() > deadline or time.time() - newest > IDLE_S:
            pytest.fail("no complete executed copy of " + ", ".join(p.notebook for p in waiting)
                        + ": run `make test-notebooks` (or `python -m course_tools.run_notebooks`) first")
        time.sleep(5)  # polling files that another process writes, not waiting on the page


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("executed")
    snapshot_executed(course_site.pages(), folder)
    return folder


@pytest.fixture(scope="module")
def built(snapshot, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    course_site.build(out, run=False, executed=snapshot)
    return out


def image_outputs(nb) -> int:
    return sum(1 for c in nb.cells for o in c.get("outputs", []) if any(m in o.get("data", {}) for m in IMAGES))


def test_the_contents_page_follows_the_manifest(built, page, shot):
    page.goto((built / "index.html").as_uri())
    manifest = load_manifest()
    toc = page.locator("#toc")
    for chapter in manifest.chapters:
        row = toc.locator("tr", has_text=chapter.label)
        assert row.count() == 1, f"{chapter.label} is not on the contents page"
        link = row.locator("a", has_text=chapter.label)
        assert link.count() == (1 if chapter.status == "ready" else 0), chapter.label
    shot("12-site-contents")
    assert not list(built.rglob("solutions*")), "a solutions folder reached the site"


def test_every_page_renders_its_plots_and_tracebacks(built, snapshot, page, shot):
    for entry in course_site.pages():
        page.goto((built / entry.html_name).as_uri())
        executed = nbformat.read(entry.executed_in(snapshot), as_version=4)
        # plots: as many as the executed notebook holds, each one decoded by the browser
        images = page.locator(".jp-OutputArea-output img")
        assert images.count() == image_outputs(executed), f"{entry.html_name}: plots missing"
        broken = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                               ".filter(img => !(img.complete && img.naturalWidth > 0)).length")
        assert broken == 0, f"{entry.html_name}: {broken} plots do not render"
        stderr = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                              has_text="Traceback")
        is_chapter = entry.notebook in [c.notebook for c in load_manifest().chapters]
        if is_chapter:
            assert stderr.count() >= 1, f"{entry.html_name}: no traceback shown"
            assert images.count() >= 1, f"{entry.html_name}: no plot"
        # links: the notebook and the homework, both present in the site
        notebook = page.locator("a.td-notebook-link")
        assert (built / notebook.get_attribute("href")).is_file()
        if entry.homework:
            homework = page.locator("a.td-homework-link")
            assert (built / homework.get_attribute("href")).is_file(), f"{entry.html_name}: homework link broken"
        if entry.notebook.endswith("01_dimensions.ipynb"):
            stderr.first.scroll_into_view_if_needed()
            shot("13-site-chapter01-traceback")
            images.first.scroll_into_view_if_needed()
            shot("14-site-chapter01-plot")
        if entry.notebook.endswith("cheatsheet.ipynb"):
            shot("15-site-cheatsheet")


def search_index(built: Path) -> list[dict]:
    text = (built / "search-index.js").read_text(encoding="utf-8")
    return json.loads(text.removeprefix("window.TD_SEARCH_INDEX = ").rstrip().removesuffix(";"))


def search_and_open(page, query: str, href: str) -> None:
    """Type `query` into the search box of the page shown, check `href` is among the hits, and follow it."""
    box = page.locator("#td-search")
    box.fill("")
    box.type(query)
    hit = page.locator(f"#td-search-results a.td-search-hit[href='{href}']")
    hit.first.wait_for(state="visible")
    hit.first.click()
    page.wait_for_url(f"**/{href}")


def check_guide_pages(built: Path, page) -> None:
    """Every guide renders (a title, the navigation marking it) and every link it holds into the site resolves."""
    for stem in course_site.GUIDES:
        page.goto((built / f"{stem}.html").as_uri())
        assert page.locator("main.td-doc h1").count() == 1, f"{stem}.html has no title"
        assert page.locator(f"nav.td-bar a[href='{stem}.html'][aria-current='page']").count() == 1, stem
        hrefs = page.eval_on_selector_all("main.td-doc a[href]", "links => links.map(a => a.getAttribute('href'))")
        for href in hrefs:
            target, _, anchor = href.partition("#")
            if re.match(r"[a-z]+:", href):
                continue
            assert (built / target).is_file() if target else True, f"{stem}.html links {href}, not on the site"
            if anchor and target.endswith(".html"):
                page_text = (built / target).read_text(encoding="utf-8")
                assert f'id="{anchor}"' in page_text, f"{stem}.html links {href}: no such anchor"
            elif anchor:
                assert page.locator(f"[id='{anchor}']").count() == 1, f"{stem}.html: no anchor #{anchor}"


def check_guides_and_search(built: Path, page, shot) -> None:
    """A reader starts on a guide, finds a chapter's section and then a guide's section with the search box."""
    page.goto((built / "students.html").as_uri())
    assert page.locator("h1").first.inner_text().startswith("Students")
    for stem in course_site.GUIDES:  # the navigation by reader, on every page
        assert page.locator(f"nav.td-bar a[href='{stem}.html']").count() == 1, stem
    # a chapter's section, as a student searches for it: chapter 01's section on the mat1/mat2 message
    sections = [e for e in search_index(built) if e["href"].startswith("01_dimensions.html#")]
    assert sections, "chapter 01 has no section in the search index"
    section = next((e for e in sections if "mat1" in e["title"]), sections[0])
    search_and_open(page, section["title"], section["href"])
    anchor = section["href"].split("#", 1)[1]
    heading = page.locator(f"[id='{anchor}']")
    assert heading.count() == 1 and heading.is_visible(), f"{section['href']}: the section is not on the page"
    shot("16-site-search-chapter-section")
    # a guide's section, searched from the chapter's page
    page.locator("#td-search").type("grading a big class slurm")
    shot("17-site-search-results")
    search_and_open(page, "grading a big class slurm", "instructors.html#grading-a-big-class")
    assert page.locator("h2#grading-a-big-class").is_visible()
    assert page.locator("main.td-doc table").count() >= 1  # the Markdown's tables rendered
    shot("18-site-guide-instructors")


def test_the_guides_are_on_the_site_and_its_search_finds_chapters_and_guides(built, page, shot):
    index = search_index(built)
    pages = {e["href"].split("#")[0] for e in index}
    assert {p.html_name for p in course_site.pages()} | {f"{stem}.html" for stem in course_site.GUIDES} <= pages, (
        "the search index leaves out pages")
    assert {e["kind"] for e in index} == {"chapter", "cheat sheet", "guide"}
    check_guide_pages(built, page)
    check_guides_and_search(built, page, shot)
