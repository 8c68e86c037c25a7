"""The cheat sheet's introduction says where each entry is checked, with counts computed from the catalog (issue 34).

Its Markdown used to say that the tests run every entry's reproducer; some run on the GPU runner only and one on no
runner of the course. The introduction now names each "checked on" value and types no count: the code cell under it
prints them from ``checked_on_counts()``, so an entry added to the catalog changes the figures, never the text.
"""

import re
from pathlib import Path

import nbformat

from torchdoctor.catalog import CATALOG
from torchdoctor.catalog._entry import CHECKED_ON
from torchdoctor.cheatsheet import checked_on_counts

ROOT = Path(__file__).resolve().parents[2]
CHEATSHEET = ROOT / "course" / "cheatsheet.ipynb"


def test_checked_on_counts_cover_the_catalog_in_order():
    counts = checked_on_counts()
    assert sum(counts.values()) == len(CATALOG) and all(counts.values())
    assert list(counts) == [where for where in CHECKED_ON.values() if where in counts]
    for needs, where in CHECKED_ON.items():
        assert counts.get(where, 0) == sum(e.needs == needs for e in CATALOG)


def test_cheatsheet_introduction_names_every_checked_on_value_and_types_no_count():
    cells = nbformat.read(CHEATSHEET, as_version=4).cells
    intro = cells[0].source
    assert not re.search(r"\d", intro), "the introduction types a number: print it from checked_on_counts() instead"
    for where in CHECKED_ON.values():
        assert f"*{where.split(' (needs')[0]}*" in intro, f"the introduction does not explain {where!r}"
    first_code = [c.source for c in cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    assert "checked_on_counts()" in first_code[0]
