"""Fixtures of the browser tests: a real Chromium (Debian's `chromium` package; `make setup` installs it where
apt-get can) driven by Playwright through `executable_path`, JupyterLab in the student's and the instructor's
view on scratch copies of the course, and screenshots in build/screenshots/.

The tests skip, saying why, only where no Chromium or no Playwright can be found; `make test` installs both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.lab import SCREENSHOTS, Lab, find_chromium, running_lab, scratch_course

# Every wait is on a condition, never a fixed sleep; the limits are generous because `make test` runs the
# notebooks, the grading corpus and these tests side by side on two cores.
WAIT_MS = 180_000


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium to drive: install Debian's `chromium` package (`make setup` does it as root "
                    "where apt-get exists) or set CHROMIUM=/path/to/chromium")
    return path


@pytest.fixture(scope="session")
def browser(chromium: str) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is missing: run `make setup`")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            # the container runs as root, where Chromium's own sandbox cannot start
            args=["--no-sandbox"] if os.geteuid() == 0 else [],
        )
        try:
            yield browser
        finally:
            browser.close()


def pytest_collection_modifyitems(session, config, items):
    """The browser tests run after every other test: their session-wide Playwright keeps an event loop running in
    this thread, where a later `asyncio.run()` (the grading tests') would fail. The site's test, which waits for the
    executed notebooks that `make test` writes beside pytest, runs last of all, so nothing else waits with it."""
    items.sort(key=lambda item: (item.path.parent.name == "browser", item.path.name == "test_site.py"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.browser_failed = report.failed
    return report


@pytest.fixture
def page(browser, request, screenshots: Path) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"page error: {error}"))
    try:
        yield page
        if getattr(request.node, "browser_failed", False):  # what the page showed when the test failed
            page.screenshot(path=str(screenshots / f"FAILED-{request.node.name}.png"))
            report_failure(request, console)
    finally:
        context.close()


def report_failure(request, console: list[str]) -> None:
    """Print what a failed browser test leaves to go on: the page's console and the tail of its JupyterLab's log."""
    print(f"--- the page's console ({len(console)} messages, the last 80):", *console[-80:], sep="\n")
    for name in ("student_lab", "instructor_lab"):
        if name in request.fixturenames:
            lab = request.getfixturevalue(name)
            print(f"--- the last 80 lines of {lab.log}:", *lab.log_text().splitlines()[-80:], sep="\n")


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        old.unlink()
    return SCREENSHOTS


@pytest.fixture
def shot(page, screenshots: Path):
    """shot("02-hw1-validate-fails") saves the page as build/screenshots/02-hw1-validate-fails.png."""

    def take(name: str) -> Path:
        path = screenshots / f"{re.sub(r'[^A-Za-z0-9_.-]', '-', name)}.png"
        page.screenshot(path=str(path))
        return path

    return take


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("student")
    with running_lab("student", scratch_course(tmp / "course"), tmp / "home") as lab:
        yield lab


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("instructor")
    with running_lab("instructor", scratch_course(tmp / "course"), tmp / "home") as lab:
        yield lab
