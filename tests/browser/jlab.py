"""What a person does in JupyterLab, as Playwright steps: open a notebook, run it, type into a cell, save, press
nbgrader's Validate button. Each step waits for what the person would wait for (a prompt number, an idle kernel,
a dialog), never for a fixed time."""

from __future__ import annotations

import itertools

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.lab import Lab

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
_workspaces = itertools.count()


def open_notebook(page, lab: Lab, path: str) -> None:
    """Open `path` (relative to the lab's root) in a fresh workspace with a new kernel, and wait until the kernel
    is idle."""
    lab.shut_down_sessions()
    page.goto(lab.page_url(f"lab/workspaces/test{next(_workspaces)}/tree/{path}"))
    page.locator(f"{NOTEBOOK} .jp-Cell").first.wait_for()
    wait_kernel_idle(page)


def wait_kernel_idle(page) -> None:
    page.locator(f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()


def code_cells(page):
    return page.locator(f"{NOTEBOOK} .jp-CodeCell")


_STARTED = """([sel, before]) => [...document.querySelectorAll(sel + ' .jp-CodeCell .jp-InputArea-prompt')]
    .some(p => p.textContent.includes('*')
               || parseInt((p.textContent.match(/\\[(\\d+)\\]/) || [])[1] || '0') > before)"""
_FINISHED = """([sel, before]) => {
    const texts = [...document.querySelectorAll(sel + ' .jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
    const counts = texts.map(t => parseInt((t.match(/\\[(\\d+)\\]/) || [])[1] || '0'));
    return !texts.some(t => t.includes('*')) && Math.max(0, ...counts) > before;
}"""


def run_all(page, tries: int = 3) -> None:
    """Run ▸ Run All Cells, then wait until a cell ran that had not run before, none is queued or running, and
    the kernel is idle (a run stops at the first error of a cell not tagged `raises-exception`).

    A click while the page is still connecting to the kernel is dropped by JupyterLab (the cells never get
    queued); then, as a person would, click again."""
    before = last_execution_count(page)
    for attempt in range(tries):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function(_STARTED, arg=[NOTEBOOK, before], timeout=30_000)
            break
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            wait_kernel_idle(page)
    page.wait_for_function(_FINISHED, arg=[NOTEBOOK, before])
    wait_kernel_idle(page)


def run_cell(page, cell) -> None:
    """Run one code cell as a person would: click into it, Shift+Enter, and wait until the kernel is idle."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    wait_kernel_idle(page)


def wait_for_widget(page, target, cell, start_again, first_wait_ms: int = 60_000) -> None:
    """Wait for `target`, a part of the widget `cell` displays. If it is not drawn within `first_wait_ms`, print what
    the cell shows and run the cell again, as a student would; if that does not draw it either, start afresh with
    `start_again()` (a new kernel and page: open the notebook and run it all), then wait once more.

    On the loaded 2-core CI machine the widget was sometimes never drawn although every cell had run; run alone it
    is drawn in about a second. A second run of the cell did not always draw it, nor did a reload of the page
    with the same kernel (stop 15's CI run, where the cell's output area stayed empty throughout)."""
    try:
        target.wait_for(timeout=first_wait_ms)
        return
    except PlaywrightTimeout:
        print(f"widget not drawn {first_wait_ms / 1000:.0f} s after its cell ran (the cell shows "
              f"{output_summary(cell)}): running it again")
    run_cell(page, cell)
    try:
        target.wait_for(timeout=first_wait_ms)
    except PlaywrightTimeout:
        print(f"still not drawn (the cell shows {output_summary(cell)}): a new kernel, and Run All again")
        start_again()
        target.wait_for()


def output_summary(cell) -> list[str]:
    """The start of each output of `cell` as HTML (with its MIME type, where JupyterLab marks it): what a failed wait
    printed."""
    return cell.locator(".jp-OutputArea-output").evaluate_all("els => els.map(e => e.outerHTML.slice(0, 300))")


def last_execution_count(page) -> int:
    numbers = [int(p.strip("[]: ")) for p in prompts(page) if p.strip("[]: ").isdigit()]
    return max(numbers, default=0)


def cells_with_code(page, text: str):
    """The code cells whose source (not their output) contains `text`."""
    return code_cells(page).filter(has=page.locator(".cm-content", has_text=text))


def prompts(page) -> list[str]:
    """The prompts of the code cells, e.g. ['[1]:', '[2]:', '[ ]:']."""
    return [text.strip() for text in page.locator(f"{NOTEBOOK} .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()]


def set_source(page, cell, text: str) -> None:
    """Replace a code cell's text as a person pasting it would: click into its editor, select all, paste."""
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")  # back to command mode


def cell_text(cell) -> str:
    cell.locator(".cm-content .cm-line").first.wait_for()  # the editor is drawn after the cell
    return cell.locator(".cm-content").evaluate(
        "el => [...el.querySelectorAll('.cm-line')].map(l => l.textContent).join('\\n')")


def save(page) -> None:
    page.keyboard.press("ControlOrMeta+s")
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current.jp-mod-dirty").wait_for(state="detached")


def validate(page) -> str:
    """Press nbgrader's Validate button and return what its dialog says (the dialog stays open)."""
    page.locator(f"{NOTEBOOK} .jp-NotebookPanel-toolbar").get_by_text("Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog", has_text="Validation Results")
    dialog.wait_for()
    return dialog.locator(".jp-Dialog-body").inner_text()


def close_dialog(page) -> None:
    page.locator(".jp-Dialog .jp-Dialog-button").last.click()
    page.locator(".jp-Dialog").wait_for(state="detached")
