from torchdoctor.catalog import CATALOG, by_chapter
from torchdoctor.cheatsheet import chapter_summary, cheatsheet_table, interactive_cheatsheet


def test_full_table_lists_every_entry_in_every_format():
    table = cheatsheet_table()
    assert len(table) == len(CATALOG)
    md, page = table._repr_markdown_(), table._repr_html_()
    for e in CATALOG:
        assert e.title in str(table)
        assert e.title.replace("|", "\\|") in md
    assert md.count("\n| ") == len(CATALOG) + 2 and page.count("<tr>") == len(CATALOG) + 1


def test_filter_by_chapter_and_search():
    assert [e.id for e in cheatsheet_table("checkpoints").entries] == [e.id for e in by_chapter("checkpoints")]
    assert {e.id for e in cheatsheet_table(search="DataLoader worker").entries} >= {"worker-exception", "worker-killed"}
    pasted = cheatsheet_table(search="RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    assert [e.id for e in pasted.entries] == ["mat1-mat2-shapes"]
    assert len(cheatsheet_table("memory", search="no such words anywhere")) == 0
    assert "no matching error" in cheatsheet_table(search="zzz")._repr_markdown_()


def test_chapter_summary_is_generated_from_the_catalog():
    summary = chapter_summary("dimensions")
    md = summary._repr_markdown_()
    assert md.startswith("**Errors in this chapter: 01 Dimensions")
    for e in by_chapter("dimensions"):
        assert e.title in md
    assert "| chapter |" not in md


def test_interactive_cheatsheet_filters_by_chapter_and_search():
    ui = interactive_cheatsheet()
    (chapter, search), table = ui.children[0].children, ui.children[1]
    assert "mat1 and mat2" in table.value and "Weights only load failed" in table.value
    chapter.value = "checkpoints"
    assert "Weights only load failed" in table.value and "mat1 and mat2" not in table.value
    chapter.value, search.value = None, "Target 10 is out of bounds."
    assert "out of bounds" in table.value and "Weights only load failed" not in table.value
