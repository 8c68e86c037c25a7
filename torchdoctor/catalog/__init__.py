"""The error catalog: the one place where the course's knowledge about PyTorch errors lives.

One module per chapter (named after the chapter's slug in course.toml) holds that chapter's entries, each
beside its reproducer (a function that raises the error for real) and, where it has one, the fix that uses
the numbers of the message; the module lists them in ``ENTRIES``. ``explain``, the IPython extension, the cheat
sheet and the chapter summaries all read from here.

Chapter titles come from the course manifest and are read only when asked for (``chapter_title``,
``CHAPTERS``): importing the catalog never reads course.toml, which graded kernels do not have.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from torchdoctor.catalog import (
    accuracy,
    case_study,
    checkpoints,
    convergence,
    data_loading,
    dimensions,
    dtype_device,
    gradients,
    memory,
    method,
    multi_gpu,
)
from torchdoctor.catalog._entry import ErrorEntry, Needs
from torchdoctor.explain_i18n import chapter_label

__all__ = [
    "CATALOG", "CHAPTERS", "ErrorEntry", "Needs", "by_chapter", "chapter_title", "get_entry", "skip_reason",
]

_MODULES = (method, dimensions, gradients, memory, dtype_device, checkpoints, data_loading, convergence, accuracy,
            multi_gpu, case_study)

# Matching order: entries whose message quotes another error first, then chapter by chapter.
CATALOG: tuple[ErrorEntry, ...] = tuple(
    sorted((e for m in _MODULES for e in m.ENTRIES), key=lambda e: not e.quotes_other_errors)
)


def chapter_title(slug: str) -> str:
    """'01 Dimensions and shapes' for 'dimensions', from the course manifest; the slug itself when the
    manifest cannot be read (a graded kernel has no repository), so a diagnosis never fails for it."""
    from torchdoctor.manifest import ManifestError, load_manifest

    try:
        chapter = load_manifest().chapter(slug)
    except (ManifestError, KeyError):
        return slug
    return chapter_label(chapter.number, chapter.title)


class _Chapters(Mapping[str, str]):
    """Chapter slug -> label ('01 Dimensions and shapes') for every chapter of the manifest, in its order.

    Read from course.toml on first use, not on import.
    """

    def _labels(self) -> dict[str, str]:
        from torchdoctor.manifest import load_manifest

        return {c.slug: chapter_label(c.number, c.title) for c in load_manifest().chapters}

    def __getitem__(self, slug: str) -> str:
        return self._labels()[slug]

    def __iter__(self) -> Iterator[str]:
        return iter(self._labels())

    def __len__(self) -> int:
        return len(self._labels())

    def __repr__(self) -> str:
        return f"CHAPTERS({self._labels()!r})"


CHAPTERS: Mapping[str, str] = _Chapters()


def get_entry(entry_id: str) -> ErrorEntry:
    """The entry with this id; a KeyError lists the known ids."""
    for entry in CATALOG:
        if entry.id == entry_id:
            return entry
    raise KeyError(f"no catalog entry {entry_id!r}; known ids: {', '.join(e.id for e in CATALOG)}")


def by_chapter(chapter: str) -> list[ErrorEntry]:
    """The entries filed under a chapter, in catalog order."""
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; use one of {', '.join(CHAPTERS)}")
    return [e for e in CATALOG if e.chapter == chapter]


def skip_reason(entry: ErrorEntry) -> str | None:
    """Why the entry's reproducer cannot raise its error on this machine, or None when it can."""
    cuda_built = torch.backends.cuda.is_built()
    gpu = cuda_built and torch.cuda.is_available()
    if entry.needs == "cuda" and not gpu:
        return f"{entry.id}: needs a CUDA GPU, none is available here"
    if entry.needs == "cuda-build-without-gpu" and (not cuda_built or gpu):
        return f"{entry.id}: needs a CUDA build of PyTorch on a machine without a usable GPU"
    if entry.needs == "cpu-only-build" and cuda_built:
        return f"{entry.id}: needs a CPU-only build of PyTorch; this one was built with CUDA"
    return None
