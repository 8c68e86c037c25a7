"""explain files the messages of every supported PyTorch release under the right entry, with the pinned release only.

tests/torchdoctor/message_corpus/<release>.json holds what each catalog reproducer raised under that release
(collected by `make message-corpus`, course_tools/message_corpus.py). For every recorded exception this test rebuilds
it (its class names, message and chain) and checks that explain gives the entry's id, or the id the corpus records
as ``expected`` for that message, from the exception and from its pasted traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor import explain
from torchdoctor.catalog import CATALOG

CORPUS = Path(__file__).parent / "message_corpus"
RELEASES = sorted(CORPUS.glob("*.json"), key=lambda p: tuple(int(x) for x in p.stem.split(".")))
IDS = {e.id for e in CATALOG}


def _records() -> list[tuple[str, str, dict]]:
    out = []
    for path in RELEASES:
        data = json.loads(path.read_text(encoding="utf-8"))
        for entry_id, record in data["entries"].items():
            if record["status"] == "raised":
                out.append((data["release"], entry_id, record))
    return out


RECORDS = _records()


def _classes(types: list[str]) -> type[BaseException]:
    """A class whose MRO has the recorded names (most derived first), so explain's type check sees what it saw."""
    base: type[BaseException] = Exception if "Exception" in types else BaseException
    for name in reversed([t for t in types if t not in ("Exception", "BaseException")]):
        base = type(name, (base,), {"__str__": lambda self: self.args[0]})
    return base


def _rebuild(chain: list[dict]) -> BaseException:
    """The recorded chain (newest first) as real exception objects linked as recorded."""
    excs = [_classes(item["types"])(item["message"]) for item in chain]
    for newer, older, item in zip(excs[:-1], excs[1:], chain[:-1], strict=True):
        if item.get("older") == "cause":
            newer.__cause__ = older
        else:
            newer.__context__ = older
            newer.__suppress_context__ = item.get("older") == "suppressed-context"
    return excs[0]


def _traceback_text(chain: list[dict]) -> str:
    """The traceback Python prints for the chain: oldest first, joined by the lines that say how they relate."""
    parts: list[str] = []
    for i, item in enumerate(reversed(chain)):
        if i:
            link = chain[len(chain) - i].get("older")
            if link == "suppressed-context":
                parts = []  # Python prints only the newer one
            else:
                parts.append("The above exception was the direct cause of the following exception:\n\n"
                             if link == "cause" else
                             "During handling of the above exception, another exception occurred:\n\n")
        header = f"{item['type']}: {item['message']}" if item["message"] else item["type"]
        parts.append(f'Traceback (most recent call last):\n  File "<reproducer>", line 1, in <module>\n{header}\n\n')
    return "".join(parts)


# Reproducers that raised no message under a release, with what happened instead (the collector's status).
NOT_RAISED: dict[tuple[str, str], str] = {}


def test_the_corpus_covers_the_supported_releases():
    import torch

    releases = [p.stem for p in RELEASES]
    assert torch.__version__.split("+")[0] in releases, f"no corpus of the pinned release: {releases}"
    assert len(releases) > 1, releases
    for path in RELEASES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["release"] == path.stem
        unknown = set(data["entries"]) - IDS
        assert not unknown, f"{path.name}: entries the catalog no longer has: {sorted(unknown)}"
        for entry_id, record in data["entries"].items():
            if (path.stem, entry_id) in NOT_RAISED:
                assert record["status"].startswith(NOT_RAISED[path.stem, entry_id]), (path.stem, entry_id)
                continue
            assert record["status"] == "raised" or record["status"].startswith("not run"), (
                f"torch {path.stem}, {entry_id}: the reproducer {record['status']}")


@pytest.mark.parametrize(("release", "entry_id", "record"), RECORDS, ids=[f"{r}-{e}" for r, e, _ in RECORDS])
def test_explain_files_the_recorded_message(release, entry_id, record):
    expected = record.get("expected", entry_id)
    assert expected in IDS, f"torch {release}, {entry_id}: expected id {expected!r} is not in the catalog"
    newest = record["chain"][0]
    for error in (_rebuild(record["chain"]), _traceback_text(record["chain"])):
        diagnosis = explain(error)
        got = diagnosis.id if diagnosis else None
        assert got == expected, (
            f"torch {release}, entry {entry_id}: explain gave {got!r} for {newest['type']}: {newest['message'][:300]!r}"
            + (f" (from the {'exception' if isinstance(error, BaseException) else 'pasted traceback'})"))
