"""The cheat sheet and the chapters' summary tables, rendered from the catalog (never written by hand)."""

from __future__ import annotations

import html
from dataclasses import dataclass

from torchdoctor.catalog import CATALOG, CHAPTERS, ErrorEntry, by_chapter
from torchdoctor.explain import explain

__all__ = ["CatalogTable", "cheatsheet_table", "chapter_summary", "interactive_cheatsheet"]


def _md(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", "<br>")


@dataclass(repr=False)
class CatalogTable:
    """A table of catalog entries that renders as HTML or Markdown in notebooks and as text elsewhere."""

    entries: list[ErrorEntry]
    caption: str
    show_chapter: bool = True

    def _columns(self, e: ErrorEntry) -> list[str]:
        cols = [f"{e.exception_type}: {e.example.splitlines()[0]}", e.title, e.cause, e.fix]
        return ([e.chapter] if self.show_chapter else []) + cols

    def _header(self) -> list[str]:
        return (["chapter"] if self.show_chapter else []) + ["message", "error", "cause", "fix"]

    def _repr_markdown_(self) -> str:
        lines = [f"**{_md(self.caption)}**", "", "| " + " | ".join(self._header()) + " |"]
        lines.append("|" + " --- |" * len(self._header()))
        for e in self.entries:
            cells = [_md(c) for c in self._columns(e)]
            cells[-4] = f"`{cells[-4]}`"
            lines.append("| " + " | ".join(cells) + " |")
        if not self.entries:
            lines.append("| " + " | ".join(["no matching error"] + [""] * (len(self._header()) - 1)) + " |")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._header())
        rows = []
        for e in self.entries:
            cells = [html.escape(c) for c in self._columns(e)]
            cells[-4] = f"<code>{cells[-4]}</code>"
            rows.append("<tr>" + "".join(f'<td style="text-align:left">{c}</td>' for c in cells) + "</tr>")
        body = "".join(rows) or f'<tr><td colspan="{len(self._header())}">no matching error</td></tr>'
        return f"<table><caption>{html.escape(self.caption)}</caption><tr>{head}</tr>{body}</table>"

    def __str__(self) -> str:
        blocks = [self.caption]
        for e in self.entries:
            blocks.append(
                f"[{e.chapter}] {e.title} ({e.id})\n  message: {e.exception_type}: {e.example.splitlines()[0]}\n"
                f"  cause: {e.cause}\n  fix: {e.fix}"
            )
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
    caption = "All errors" if chapter is None else CHAPTERS[chapter]
    if search and search.strip():
        words = search.lower().split()
        explained = explain(search)

        def hit(e: ErrorEntry) -> bool:
            haystack = " ".join([e.id, e.title, e.example, e.cause, e.fix, e.exception_type]).lower()
            return all(w in haystack for w in words) or (explained is not None and explained.id == e.id)

        entries = [e for e in entries if hit(e)]
        caption += f" matching {search.strip()!r}"
    return CatalogTable(entries, f"{caption} ({len(entries)})")


def chapter_summary(chapter: str) -> CatalogTable:
    """The summary table at the end of a chapter: message, cause and fix of every error it teaches."""
    return CatalogTable(by_chapter(chapter), f"Errors in this chapter: {CHAPTERS[chapter]}", show_chapter=False)


def interactive_cheatsheet() -> object:
    """A chapter menu and a search box over the table (ipywidgets); without ipywidgets, the whole table.

    The table is an HTML widget whose value is replaced, not an Output widget: notebook runners (nbclient,
    under papermill) intermittently hang waiting for outputs captured by an Output widget.
    """
    try:
        import ipywidgets as widgets
    except ImportError:
        return cheatsheet_table()

    chapter = widgets.Dropdown(options=[("all chapters", None), *[(t, c) for c, t in CHAPTERS.items()]])
    search = widgets.Text(placeholder="search words or paste an error message", continuous_update=False)
    table = widgets.HTML()

    def refresh(_: object = None) -> None:
        table.value = cheatsheet_table(chapter.value, search.value)._repr_html_()

    chapter.observe(refresh, names="value")
    search.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([chapter, search]), table])
