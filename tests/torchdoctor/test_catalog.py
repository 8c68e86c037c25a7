"""Every catalog entry is well formed, and every reproducer still raises its error on the pinned PyTorch."""

import importlib
import os
import re
import subprocess
import sys
import traceback

import pytest

from torchdoctor import explain
from torchdoctor.catalog import CATALOG, CHAPTERS, ErrorEntry, by_chapter, chapter_title, get_entry, skip_reason
from torchdoctor.manifest import load_manifest


def test_catalog_size_and_unique_ids():
    ids = [e.id for e in CATALOG]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)
    for e in CATALOG:
        assert re.fullmatch(r"[a-z0-9-]+", e.id), e.id
        assert e.title and e.cause and e.fix and callable(e.reproducer)


def test_chapters_come_from_the_manifest():
    manifest = load_manifest()
    assert dict(CHAPTERS) == {c.slug: c.label for c in manifest.chapters}
    assert chapter_title("dimensions") == manifest.chapter("dimensions").label == "01 Dimensions and shapes"
    for e in CATALOG:
        assert e.chapter in CHAPTERS, f"{e.id}: chapter {e.chapter!r} is not in course.toml"
    with pytest.raises(ValueError, match="unknown chapter"):
        by_chapter("nope")
    with pytest.raises(KeyError, match="known ids"):
        get_entry("nope")


def test_one_module_per_chapter_holds_that_chapters_entries():
    """An entry, its fix and its reproducer live in the module named after its chapter's slug."""
    for slug in CHAPTERS:
        try:
            module = importlib.import_module(f"torchdoctor.catalog.{slug.replace('-', '_')}")
        except ModuleNotFoundError:
            assert not by_chapter(slug), f"chapter {slug} has entries but no module"
            continue
        assert module.CHAPTER == slug
        listed = list(module.ENTRIES)
        defined = [v for v in vars(module).values() if isinstance(v, ErrorEntry)]
        assert listed == defined, f"{module.__name__}: ENTRIES must list every entry the module defines, in order"
        assert {e.id for e in by_chapter(slug)} == {e.id for e in listed}
        for e in listed:
            assert e.chapter == slug
            assert e.reproducer.__module__ == module.__name__, f"{e.id}: its reproducer lives elsewhere"
            if e.specific_fix is not None:
                assert e.specific_fix.__module__ == module.__name__, f"{e.id}: its fix lives elsewhere"


def test_importing_torchdoctor_does_not_read_the_manifest(tmp_path):
    """Graded kernels have torchdoctor but not the repository: import and explain must work without course.toml."""
    code = (
        "import torch, torchdoctor\n"
        "d = torchdoctor.explain('mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)')\n"
        "print(d.id, '|', d.chapter_title, '|', 'more:' in str(d))\n"
    )
    env = {**os.environ, "TORCHDOCTOR_MANIFEST": str(tmp_path / "missing.toml")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["mat1-mat2-shapes", "|", "dimensions", "|", "True"]


@pytest.mark.parametrize("entry", CATALOG, ids=lambda e: e.id)
def test_example_message_matches_its_own_entry(entry):
    assert entry.regex.search(entry.example)
    diagnosis = explain(f"{entry.exception_type}: {entry.example}")
    assert diagnosis is not None and diagnosis.id == entry.id


@pytest.mark.parametrize("entry", [pytest.param(e, marks=[pytest.mark.cuda] if e.needs == "cuda" else [])
                                   for e in CATALOG], ids=lambda e: e.id)
def test_reproducer_raises_the_catalogued_error(entry):
    reason = skip_reason(entry)
    if reason:
        pytest.skip(reason)
    with pytest.raises(BaseException) as info:
        entry.reproducer()
    exc = info.value
    names = [c.__name__ for c in type(exc).__mro__]
    if entry.exception_types:
        assert entry.exception_types[0] in names, f"raised {type(exc).__name__}: {exc}"
    assert entry.regex.search(str(exc)), f"message no longer matches: {exc}"
    # explain recognises the live exception, its message and its real, formatted traceback
    for error in (exc, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))):
        diagnosis = explain(error)
        assert diagnosis is not None and diagnosis.id == entry.id, error
