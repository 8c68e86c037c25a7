from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_tools.notebook_check import declared_error
from torchdoctor.catalog import CATALOG, by_chapter, get_entry
from torchdoctor.cheatsheet import chapter_summary, cheatsheet_table, declared_error_ids, interactive_cheatsheet
from torchdoctor.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]


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


READY = [c for c in load_manifest().chapters if c.status == "ready"]


@pytest.mark.parametrize("chapter", READY, ids=lambda c: c.slug)
def test_chapter_summary_is_exactly_the_errors_the_chapter_declares(chapter):
    cells = nbformat.read(ROOT / chapter.notebook, as_version=4).cells
    declared = [declared_error(c) for c in cells if c.cell_type == "code"]
    declared_ids = {d.id for d in declared if d is not None}
    summary = chapter_summary(chapter.slug)
    ids = [e.id for e in summary.entries]
    assert declared_ids, f"{chapter.notebook} declares no error"
    assert len(ids) == len(set(ids)) and set(ids) == declared_ids
    md = summary._repr_markdown_()
    assert md.startswith(f"**Errors in this chapter: {chapter.label}") and "| chapter |" not in md


def test_dimensions_summary_has_the_batch_of_one_errors_and_nothing_it_does_not_show():
    ids = [e.id for e in chapter_summary("dimensions").entries]
    assert {"bce-target-size", "batchnorm-single-sample", "state-dict-keys"} <= set(ids)
    assert not {"rnn-input-size", "pool-output-too-small", "ce-batch-size"} & set(ids)


def test_declared_error_ids_in_order_of_first_appearance(tmp_path):
    nb = new_notebook(cells=[new_code_cell("a", metadata={"torchdoctor": {"raises": {"id": "b-id"}}}),
                             new_code_cell("b"),
                             new_code_cell("c", metadata={"torchdoctor": {"raises": {"id": "a-id"}}}),
                             new_code_cell("d", metadata={"torchdoctor": {"raises": {"id": "b-id"}}})])
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert declared_error_ids(tmp_path / "x.ipynb") == ["b-id", "a-id"]


def test_summary_of_a_chapter_without_a_notebook_says_so(tmp_path, monkeypatch):
    manifest = tmp_path / "course.toml"  # the real manifest, in a folder without notebooks
    manifest.write_text((ROOT / "course.toml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("TORCHDOCTOR_MANIFEST", str(manifest))
    with pytest.raises(FileNotFoundError, match="chapter 'gradients' has no notebook yet"):
        chapter_summary("gradients")
    with pytest.raises(KeyError, match="unknown chapter"):
        chapter_summary("nope")


def test_every_table_says_where_each_reproducer_was_checked():
    table = cheatsheet_table()
    assert "| checked on |" in table._repr_markdown_() and "<th>checked on</th>" in table._repr_html_()
    assert get_entry("mat1-mat2-shapes").checked_on == "CPU"
    assert get_entry("cuda-oom").checked_on == "CUDA runner only"
    assert get_entry("cuda-no-driver").checked_on.startswith("CPU")
    for e in CATALOG:
        assert e.checked_on in str(table)


def test_interactive_cheatsheet_filters_by_chapter_and_search():
    ui = interactive_cheatsheet()
    (chapter, search), table = ui.children[0].children, ui.children[1]
    assert "mat1 and mat2" in table.value and "Weights only load failed" in table.value
    chapter.value = "checkpoints"
    assert "Weights only load failed" in table.value and "mat1 and mat2" not in table.value
    chapter.value, search.value = None, "Target 10 is out of bounds."
    assert "out of bounds" in table.value and "Weights only load failed" not in table.value
