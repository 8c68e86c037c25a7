"""The requirement sentences of an assignment's text: each sentence that states a rule ends with its id in brackets,
``[R<part>.<n>]`` (docs/instructors.md, "Requirement tables"). The grader quotes them in feedback; the requirement
tables (``course_tools.requirements``) list them. Pure text: no nbgrader, no course."""

from __future__ import annotations

import re

__all__ = ["MARKER", "requirement_sentences", "requirement_texts"]

MARKER = re.compile(r"\[(R\d+\.\d+)\]")
# Where a requirement's text can begin: a paragraph, a list item, the line after a heading (and the previous marker).
BLOCK_START = re.compile(r"(?:\n\s*(?:[-*]|\d+\.)\s+|\n\s*\n|^#+ [^\n]*(?:\n|$))", re.MULTILINE)
LIST_MARK = re.compile(r"^(?:[-*]|\d+\.)\s+")


def requirement_sentences(markdown: str) -> list[tuple[str, str]]:
    """(id, sentence) for each marker in a markdown text, the sentence being the whole text that the marker ends:
    every sentence since the previous marker or the start of its paragraph or list item, whichever comes last (a
    rule stated over several sentences keeps them all, issue 35)."""
    found, start = [], 0
    for match in MARKER.finditer(markdown):
        pieces = [p for p in BLOCK_START.split(markdown[start:match.start()].rstrip()) if p and p.strip()]
        sentence = LIST_MARK.sub("", " ".join(pieces[-1].split())) if pieces else ""
        found.append((match.group(1), sentence))
        start = match.end()
    return found


def requirement_texts(markdown_cells: list[str]) -> dict[str, str]:
    """id -> sentence over a notebook's markdown cells (the first sentence of an id that appears twice)."""
    texts: dict[str, str] = {}
    for source in markdown_cells:
        for rid, sentence in requirement_sentences(source):
            texts.setdefault(rid, sentence)
    return texts
