"""Every section of every chapter ends with something the learner does, checked in the notebook (issue 33).

A section is a ``## `` heading of a chapter (at the start of a markdown cell or within one) and what follows it up
to the next one. It is closed by a learner
action when one of its code cells asks a check-yourself question (``check_answer``, ``checking`` or ``answered``
with a question id; a prediction, a finding or a repair), is an answer cell (metadata ``torchdoctor.answer``), or
hands the learner's diagnosis or fix of a bug clinic case to ``case.check_diagnosis`` / ``case.check_fix``.
A chapter's "Summary" recaps and is not a section of its own; the cheat sheet is a reference page, not a chapter.
``python -m pytest tests/test_section_actions.py -s`` prints each section with the question that closes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p for p in (REPO / "course").glob("*.ipynb") if p.stem != "cheatsheet")
ASKED = re.compile(r"\b(?:check_answer|checking|answered)\(\s*[\"'](Q\d+[^\"']*)[\"']|\.(check_fix|check_diagnosis)\(")
HEADING = re.compile(r"^##\s+(.+)$", re.M)
RECAP = re.compile(r"^(\d+\.\s*)?Summary$")

# Sections that do not yet end with a learner action (issue 33 adds one to each, then removes it from here).
NOT_YET: dict[str, set[str]] = {
}


def sections(path: Path) -> list[tuple[str, list[str]]]:
    """(heading, the questions its code cells ask or answer) for each ``## `` section of the notebook."""
    found: list[tuple[str, list[str]]] = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":   # a heading may stand anywhere in a cell: the section starts there
            found += [(heading.strip(), []) for heading in HEADING.findall(cell.source)]
        elif found and cell.cell_type == "code":
            asked = ["".join(groups) for groups in ASKED.findall(cell.source)]
            answer = cell.get("metadata", {}).get("torchdoctor", {}).get("answer") is not None
            found[-1][1].extend(asked or (["answer cell"] if answer else []))
    return [(heading, asked) for heading, asked in found if not RECAP.match(heading)]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_section_ends_with_a_learner_action(path):
    listed = NOT_YET.get(path.stem, set())
    table = sections(path)
    print(f"\n{path.name}")
    for heading, asked in table:
        print(f"  {heading[:70]:<72} {', '.join(dict.fromkeys(asked)) or '(none yet)'}")
    open_sections = {heading for heading, asked in table if not asked}
    unknown = sorted(open_sections - listed)
    closed = sorted(listed - open_sections)
    assert not unknown, f"{path.name}: these sections end without a learner action: {unknown}"
    assert not closed, f"{path.name}: now closed by a question, remove them from NOT_YET: {closed}"
