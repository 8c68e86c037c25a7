"""Every catalog entry is well formed, and every reproducer still raises its error on the pinned PyTorch."""

import re
import traceback

import pytest

from torchdoctor import explain
from torchdoctor.catalog import CATALOG, CHAPTERS, by_chapter, get_entry, skip_reason


def test_catalog_size_and_unique_ids():
    ids = [e.id for e in CATALOG]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)
    for e in CATALOG:
        assert re.fullmatch(r"[a-z0-9-]+", e.id), e.id
        assert e.chapter in CHAPTERS
        assert e.title and e.cause and e.fix and callable(e.reproducer)


def test_every_chapter_with_errors_is_known():
    for slug in CHAPTERS:
        assert by_chapter(slug), f"chapter {slug} has no catalog entry"
    with pytest.raises(ValueError, match="unknown chapter"):
        by_chapter("nope")
    with pytest.raises(KeyError, match="known ids"):
        get_entry("nope")


def test_issue_errors_are_covered():
    required = {
        "mat1-mat2-shapes", "embedding-index", "view-invalid-size", "no-grad-fn", "backward-twice", "cuda-oom",
        "device-side-assert", "ce-target-dtype", "conv-input-type", "state-dict-keys", "missing-class-on-load",
        "worker-killed", "ran-out-of-input", "dataparallel-wrong-device", "view-non-contiguous",
        "inplace-saved-tensor", "non-scalar-backward", "leaf-inplace", "ce-target-out-of-bounds", "conv-channels",
        "weights-only-load", "state-dict-size-mismatch", "collate-unequal-sizes", "worker-exception",
        "ddp-no-process-group", "ddp-device-ids-cpu", "cuda-no-driver", "cuda-not-compiled", "device-mismatch",
    }
    assert required <= {e.id for e in CATALOG}


@pytest.mark.parametrize("entry", CATALOG, ids=lambda e: e.id)
def test_example_message_matches_its_own_entry(entry):
    assert entry.regex.search(entry.example)
    diagnosis = explain(f"{entry.exception_type}: {entry.example}")
    assert diagnosis is not None and diagnosis.id == entry.id


@pytest.mark.parametrize("entry", CATALOG, ids=lambda e: e.id)
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
    for error in (exc, str(exc), "".join(traceback.format_exception(exc))):
        diagnosis = explain(error)
        assert diagnosis is not None and diagnosis.id == entry.id, error
