"""Chapter 06 (data-loading): Dataset, DataLoader and its workers.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "data-loading"


def _first_batch(loader: DataLoader) -> Any:
    """Fetch one batch and shut the workers down even when fetching fails."""
    it = iter(loader)
    try:
        return next(it)
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


class _BrokenDataset(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        raise ValueError(f"sample {i} could not be read")


class _BusErrorDataset(Dataset):
    """Kills its worker with SIGBUS, which is what an exhausted /dev/shm looks like from the main process."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGBUS)
        return torch.zeros(1)


def worker_exception() -> None:
    _first_batch(DataLoader(_BrokenDataset(), batch_size=2, num_workers=1))


def _worker(g: Mapping[str, str]) -> str:
    return (
        f"Worker {g['worker']} raised {g['inner']}; the real error is under 'Original Traceback' in the message. "
        f"Rerun with num_workers=0 to get it in the main process with a normal traceback, fix it there "
        f"(usually in __getitem__ or collate_fn), then turn the workers back on."
    )


WORKER_EXCEPTION = ErrorEntry(
    id="worker-exception",
    title="Exception inside a DataLoader worker",
    chapter=CHAPTER,
    exception_types=(),
    pattern=r"Caught (?P<inner>\w+) in DataLoader worker process (?P<worker>\d+)",
    example="Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):",
    cause="Your Dataset's __getitem__ (or collate_fn) raised inside a worker process; the DataLoader "
    "re-raises it in the main process with the worker's traceback pasted into the message.",
    fix="Read the 'Original Traceback' part of the message, or rerun with num_workers=0 for a normal "
    "traceback, fix the dataset code, then turn the workers back on.",
    reproducer=worker_exception,
    quotes_other_errors=True,
    specific_fix=_worker,
)


def collate_unequal() -> None:
    _first_batch(DataLoader([torch.ones(3), torch.ones(4)], batch_size=2))


COLLATE_UNEQUAL_SIZES = ErrorEntry(
    id="collate-unequal-sizes",
    title="DataLoader cannot stack samples of different sizes",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"stack expects each tensor to be equal size, but got \[(?P<a>[\d, ]*)\] at entry (?P<i>\d+) and "
    r"\[(?P<b>[\d, ]*)\] at entry (?P<j>\d+)",
    example="stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1",
    cause="The default collate_fn stacks the samples of a batch, so every sample must have the same shape; "
    "variable-length sequences or images of different sizes cannot be stacked.",
    fix="Resize or crop images in the dataset's transform, or write a collate_fn that pads "
    "(torch.nn.utils.rnn.pad_sequence) or returns a list.",
    reproducer=collate_unequal,
)


def worker_killed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _first_batch(DataLoader(_BusErrorDataset(), batch_size=2, num_workers=1))


WORKER_KILLED = ErrorEntry(
    id="worker-killed",
    title="DataLoader worker died",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) (?:exited unexpectedly|is killed by signal)",
    example="DataLoader worker (pid(s) 4242) exited unexpectedly",
    cause="A worker process was killed, not raised an exception: a bus error from too little shared memory "
    "(/dev/shm in Docker), the out-of-memory killer, or a crash in native code.",
    fix="Run with num_workers=0 to see whether the data code itself fails; in containers give more shared "
    "memory (docker run --shm-size=2g or --ipc=host); use fewer workers or smaller batches.",
    reproducer=worker_killed,
)


def cant_pickle_local() -> None:
    data = [torch.ones(2) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Got pickle error")
        loader = DataLoader(data, batch_size=2, num_workers=1, collate_fn=lambda b: b, multiprocessing_context="spawn")
        _first_batch(loader)


CANT_PICKLE_LOCAL = ErrorEntry(
    id="cant-pickle-local",
    title="Cannot send a local function or lambda to DataLoader workers",
    chapter=CHAPTER,
    exception_types=("AttributeError", "PicklingError"),
    pattern=r"Can't pickle local object '(?P<name>[^']+)'",
    example="Can't pickle local object 'make_loader.<locals>.<lambda>'",
    cause="With the 'spawn' or 'forkserver' start method (the default on macOS and Windows, and on Linux from "
    "Python 3.14) everything handed to the workers is pickled, and lambdas or functions defined inside "
    "other functions cannot be.",
    fix="Define the dataset, collate_fn and transforms at module level in an importable .py file, or use "
    "num_workers=0 in notebooks.",
    reproducer=cant_pickle_local,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    WORKER_EXCEPTION,
    COLLATE_UNEQUAL_SIZES,
    WORKER_KILLED,
    CANT_PICKLE_LOCAL,
)
