"""The cheat sheet and the chapters' summary tables, rendered from the catalog (never written by hand).

The cheat sheet lists catalog entries; a chapter's summary lists exactly the errors its notebook declares it
raises (the ``id`` of each ``raises`` declaration), so it can neither miss one nor list one the chapter never shows.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from torchdoctor.catalog import CATALOG, CHAPTERS, ErrorEntry, by_chapter, chapter_title, get_entry
from torchdoctor.catalog._entry import CHECKED_ON
from torchdoctor.explain import explain
from torchdoctor.explain_i18n import CHEATSHEET, chapter_label, text, translate, translator
from torchdoctor.raised import raised_message

# The table's columns (translated like the catalog's texts: torchdoctor/explain_i18n.py).
COLUMNS = ("message", "error", "cause", "fix", "checked on")
tr = translator(CHEATSHEET)  # captions, labels and the text layout

__all__ = ["CatalogTable", "chapter_summary", "cheatsheet_table", "checked_on_counts", "declared_error_ids",
           "interactive_cheatsheet"]


def _md(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", "<br>")


def _code(text: str) -> str:
    """A message as a Markdown code span in a table cell: entities are not decoded inside code, so ``<`` stays as it
    is (escaped, it would show as ``&lt;``); ``|`` still ends a cell, and a backtick needs a longer fence."""
    escaped = text.replace("|", "\\|")
    return f"`` {escaped} ``" if "`" in text else f"`{escaped}`"


@dataclass(repr=False)
class CatalogTable:
    """A table of catalog entries that renders as HTML or Markdown in notebooks and as text elsewhere."""

    entries: list[ErrorEntry]
    caption: str
    show_chapter: bool = True
    messages: dict[str, str] | None = None  # entry id -> the message raised in this session (else the sample)

    def _message(self, e: ErrorEntry) -> str:
        """The message shown for an entry: the one raised in this session if given, else the catalog's sample."""
        return ((self.messages or {}).get(e.id) or f"{e.exception_type}: {e.example}").splitlines()[0]

    def _columns(self, e: ErrorEntry) -> list[str]:
        title, cause, fix = translate(e, {})  # English unless TORCHDOCTOR_LANG asks otherwise
        cols = [self._message(e), title, cause, fix, text(CHEATSHEET, e.checked_on)]
        return ([e.chapter] if self.show_chapter else []) + cols

    def _header(self) -> list[str]:
        names = (["chapter"] if self.show_chapter else []) + list(COLUMNS)
        return [text(CHEATSHEET, name) for name in names]

    def _repr_markdown_(self) -> str:
        lines = [f"**{_md(self.caption)}**", "", "| " + " | ".join(self._header()) + " |"]
        lines.append("|" + " --- |" * len(self._header()))
        for e in self.entries:
            columns = self._columns(e)
            cells = [_md(c) for c in columns]
            cells[-5] = _code(columns[-5])
            lines.append("| " + " | ".join(cells) + " |")
        if not self.entries:
            lines.append("| " + " | ".join([tr("no matching error")] + [""] * (len(self._header()) - 1)) + " |")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._header())
        rows = []
        for e in self.entries:
            cells = [html.escape(c) for c in self._columns(e)]
            cells[-5] = f"<code>{cells[-5]}</code>"
            rows.append("<tr>" + "".join(f'<td style="text-align:left">{c}</td>' for c in cells) + "</tr>")
        empty = html.escape(tr("no matching error"))
        body = "".join(rows) or f'<tr><td colspan="{len(self._header())}">{empty}</td></tr>'
        return f"<table><caption>{html.escape(self.caption)}</caption><tr>{head}</tr>{body}</table>"

    def __str__(self) -> str:
        blocks = [self.caption]
        for e in self.entries:
            title, cause, fix = translate(e, {})
            blocks.append(tr(
                "[{chapter}] {title} ({id})\n  message: {message}\n  cause: {cause}\n  fix: {fix}\n"
                "  checked on: {checked_on}", chapter=e.chapter, title=title, id=e.id, message=self._message(e),
                cause=cause, fix=fix, checked_on=text(CHEATSHEET, e.checked_on),
            ))
        return "\n\n".join(blocks)

    def __repr__(self) -> str:
        return str(self)

    def __len__(self) -> int:
        return len(self.entries)


def cheatsheet_table(chapter: str | None = None, search: str | None = None) -> CatalogTable:
    """The catalog as a table, optionally limited to one chapter and/or to a search.

    ``search`` is either words that must all appear (case-insensitive) in an entry's message, title, cause,
    fix or id, or a pasted error message, which finds the entry ``explain`` would give.
    """
    entries = list(CATALOG) if chapter is None else by_chapter(chapter)
    caption = tr("All errors") if chapter is None else chapter_title(chapter)
    if search and search.strip():
        words = search.lower().split()
        explained = explain(search)

        def hit(e: ErrorEntry) -> bool:
            haystack = " ".join([e.id, e.title, e.example, e.cause, e.fix, e.exception_type]).lower()
            return all(w in haystack for w in words) or (explained is not None and explained.id == e.id)

        entries = [e for e in entries if hit(e)]
        caption = tr("{caption} matching {search}", caption=caption, search=repr(search.strip()))
    return CatalogTable(entries, tr("{caption} ({count})", caption=caption, count=len(entries)))


def checked_on_counts() -> dict[str, int]:
    """How many catalog entries each "checked on" value has (the cheat sheet's introduction counts them here, so no
    count is typed): the values in the current language, in the order of ``CHECKED_ON``, those of no entry left out.
    """
    counts = {where: sum(e.checked_on == where for e in CATALOG) for where in CHECKED_ON.values()}
    return {text(CHEATSHEET, where): n for where, n in counts.items() if n}


def declared_error_ids(notebook: str | Path) -> list[str]:
    """The catalog ids that a notebook's cells declare they raise, in order of first appearance."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    ids: list[str] = []
    for cell in cells:
        raises = cell.get("metadata", {}).get("torchdoctor", {}).get("raises")
        if isinstance(raises, dict) and raises.get("id") and raises["id"] not in ids:
            ids.append(raises["id"])
    return ids


def chapter_summary(chapter: str) -> CatalogTable:
    """The summary table at the end of a chapter: message, cause and fix of exactly the errors its notebook
    raises (its declarations), whichever chapter the catalog files them under. The notebook is the one
    course.toml names for the chapter."""
    from torchdoctor.manifest import load_manifest, manifest_path

    info = load_manifest().chapter(chapter)
    notebook = manifest_path().parent / info.notebook
    if not notebook.is_file():
        raise FileNotFoundError(f"chapter {chapter!r} has no notebook yet ({info.notebook}, status {info.status})")
    entries = [get_entry(entry_id) for entry_id in declared_error_ids(notebook)]
    # The messages this session's cells raised (torchdoctor.raised), where there are; the catalog's sample elsewhere.
    messages = {e.id: m for e in entries if (m := raised_message(e.id)) is not None}
    caption = tr("Errors in this chapter: {chapter}", chapter=chapter_label(info.number, info.title))
    return CatalogTable(entries, caption, show_chapter=False, messages=messages)


def interactive_cheatsheet() -> object:
    """A chapter menu and a search box over the table (ipywidgets); without ipywidgets, the whole table.

    The table is an HTML widget whose value is replaced, not an Output widget: notebook runners (nbclient,
    under papermill) intermittently hang waiting for outputs captured by an Output widget.
    """
    try:
        import ipywidgets as widgets
    except ImportError:
        return cheatsheet_table()

    chapter = widgets.Dropdown(options=[(tr("all chapters"), None), *[(t, c) for c, t in CHAPTERS.items()]])
    search = widgets.Text(placeholder=tr("search words or paste an error message"), continuous_update=False)
    table = widgets.HTML()

    def refresh(_: object = None) -> None:
        table.value = cheatsheet_table(chapter.value, search.value)._repr_html_()

    chapter.observe(refresh, names="value")
    search.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([chapter, search]), table])
