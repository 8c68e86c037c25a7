"""Chapter 06 (data-loading): Dataset, DataLoader and its workers.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import io
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
    cause="A worker process died without raising a Python exception: a bus error from too little shared memory "
    "(/dev/shm in Docker, which prints 'Unexpected bus error encountered in worker'), the out-of-memory killer, "
    "a crash in native code, or a worker that could not even start: under the spawn/forkserver start methods "
    "it prints \"Can't get attribute '...' on <module '__main__'\" when the Dataset was defined in a notebook.",
    fix="Read what the worker printed on stderr (above the error in a notebook, or in the terminal); run with "
    "num_workers=0 to see whether the data code itself fails; in containers give more shared memory (docker run "
    "--shm-size=2g or --ipc=host), or use fewer workers, smaller batches or a smaller prefetch_factor; move a "
    "Dataset defined in a notebook into an importable .py file.",
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
    pattern=r"Can't pickle (?:local object '(?P<name>[^']+)'|<function (?P<function>\S+) at 0x[0-9a-f]+>: "
    r"attribute lookup)",
    example="Can't pickle local object 'make_loader.<locals>.<lambda>'",
    cause="With the 'spawn' or 'forkserver' start method (the default on macOS and Windows, and on Linux from "
    "Python 3.14) everything handed to the workers is pickled, and lambdas or functions defined inside "
    "other functions cannot be (a lambda is pickled by name, and '<lambda>' is no name).",
    fix="Define the dataset, collate_fn and transforms at module level in an importable .py file, or use "
    "num_workers=0 in notebooks.",
    reproducer=cant_pickle_local,
)


class _SometimesNoneDataset(Dataset):
    """Returns None for sample 1, as a __getitem__ that swallows a read error does."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int] | None:
        return None if i == 1 else (torch.zeros(2), i)


def collate_none() -> None:
    _first_batch(DataLoader(_SometimesNoneDataset(), batch_size=2))


COLLATE_NONE = ErrorEntry(
    id="collate-none",
    title="A sample in the batch is None",
    chapter=CHAPTER,
    exception_types=("TypeError",),
    pattern=r"found <class 'NoneType'>|but got NoneType|object of type 'NoneType' has no len\(\)",
    example="object of type 'NoneType' has no len()",
    cause="The DataLoader's default_collate got None for a sample: a Dataset's __getitem__ returned None (often "
    "from an except clause around a file that could not be read, or a missing return). The message depends on "
    "where the None sits in the batch: 'found <class 'NoneType'>' when it is first, otherwise "
    "\"object of type 'NoneType' has no len()\" (samples are tuples) or 'expected Tensor ... but got NoneType'. If "
    "the traceback does not pass through default_collate (torch/utils/data/_utils/collate.py), it is a plain None "
    "in your own code: the value whose len() you took is None.",
    fix="Decide what an unreadable sample means: fail loudly with the file name (let the error through, add a "
    "note), drop it in a collate_fn that filters out None before calling default_collate, or remove bad files "
    "from the list once, before training. Check that every path of __getitem__ returns.",
    reproducer=collate_none,
)


class _PilImageDataset(Dataset):
    """Returns PIL images, as ImageFolder does without a ToTensor-like transform."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        from PIL import Image  # Pillow comes with torchvision; imported here so torchdoctor needs only torch

        return Image.new("RGB", (8, 8)), 0


def collate_unsupported_type() -> None:
    _first_batch(DataLoader(_PilImageDataset(), batch_size=2))


def _unsupported(g: Mapping[str, str]) -> str:
    found = g["found"]
    if "PIL" in found:
        return (
            "The samples are PIL images: give the dataset a transform that makes tensors, e.g. "
            "torchvision.transforms.v2.Compose([v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True)]) "
            "or transforms.ToTensor()."
        )
    return (
        f"default_collate cannot batch {found}: convert it to a tensor or number in __getitem__, or write a "
        "collate_fn that handles it (e.g. returns a list)."
    )


COLLATE_UNSUPPORTED_TYPE = ErrorEntry(
    id="collate-unsupported-type",
    title="default_collate cannot batch this type",
    chapter=CHAPTER,
    exception_types=("TypeError",),
    pattern=r"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    r"found (?P<found>.+)",
    example="default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found <class 'PIL.Image.Image'>",
    cause="The default collate_fn only knows tensors, NumPy arrays of numbers, numbers, strings and "
    "dicts/lists/tuples of those. A PIL image (ImageFolder without a transform to tensors), a NumPy array of "
    "strings or a custom object cannot be batched.",
    fix="Turn each sample into tensors in the Dataset (for images: a transform such as v2.PILToTensor() + "
    "v2.ToDtype(torch.float32, scale=True)), or pass a collate_fn that knows the type.",
    reproducer=collate_unsupported_type,
    specific_fix=_unsupported,
)


class _MixedTypeDataset(Dataset):
    """Returns a tensor for even indices and a NumPy array for odd ones (a cache that stores arrays)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        import numpy as np  # torchdoctor needs only torch; NumPy comes with it in the course's environment

        return torch.zeros(2) if i % 2 == 0 else np.zeros(2, dtype=np.float32)


def collate_mixed_types() -> None:
    _first_batch(DataLoader(_MixedTypeDataset(), batch_size=2))


COLLATE_MIXED_TYPES = ErrorEntry(
    id="collate-mixed-types",
    title="A batch mixes tensors with other types",
    chapter=CHAPTER,
    exception_types=("TypeError",),
    pattern=r"expected Tensor as element (?P<index>\d+) in argument (?P<argument>\d+), but got (?P<got>[\w.]+)",
    example="expected Tensor as element 1 in argument 0, but got numpy.ndarray",
    cause="torch.stack (which the default collate_fn calls, with the type of the batch's first sample) got a "
    "list in which some entries are not tensors: a __getitem__ that returns a tensor on one path and a NumPy "
    "array, a number or a list on another.",
    fix="Return the same type from every path of __getitem__ (convert with torch.as_tensor), or build the "
    "list you pass to torch.stack / torch.cat from tensors only.",
    reproducer=collate_mixed_types,
)


def _truncated_png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.effect_noise((32, 32), 64).save(buffer, format="PNG")
    return buffer.getvalue()[: len(buffer.getvalue()) // 2]


def image_file_truncated() -> None:
    from PIL import Image

    Image.open(io.BytesIO(_truncated_png())).convert("RGB")


IMAGE_FILE_TRUNCATED = ErrorEntry(
    id="image-file-truncated",
    title="Image file is truncated",
    chapter=CHAPTER,
    exception_types=("OSError",),
    pattern=r"^image file is truncated",
    example="image file is truncated",
    cause="Pillow read the header of an image file but the pixel data ends early: an interrupted download, "
    "copy or write. Image.open is lazy, so the error appears later, when the pixels are decoded (convert, "
    "load, a transform). The message does not name the file.",
    fix="Find every bad file once (open and load each image in a scan, collect the paths that fail) and "
    "re-create or drop them; in __getitem__, add the path to the error (err.add_note(path); raise) rather than "
    "returning None. ImageFile.LOAD_TRUNCATED_IMAGES = True hides the damage (grey pixels), use it knowingly.",
    reproducer=image_file_truncated,
)


def image_unidentified() -> None:
    from PIL import Image

    Image.open(io.BytesIO(b""))


IMAGE_UNIDENTIFIED = ErrorEntry(
    id="image-unidentified",
    title="Pillow cannot identify the image file",
    chapter=CHAPTER,
    exception_types=("UnidentifiedImageError", "OSError"),
    pattern=r"cannot identify image file (?P<path>.+)",
    example="cannot identify image file '/data/train/cat/0007.png'",
    cause="The file is empty, is not an image (an HTML error page saved as .jpg, a stray .txt or .DS_Store in an "
    "image folder), or is in a format Pillow was built without.",
    fix="Open the named file (its size, its first bytes); delete or re-create it, or restrict the file list to "
    "image extensions (ImageFolder does this with IMG_EXTENSIONS or is_valid_file).",
    reproducer=image_unidentified,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    WORKER_EXCEPTION,
    COLLATE_UNEQUAL_SIZES,
    WORKER_KILLED,
    CANT_PICKLE_LOCAL,
    COLLATE_NONE,
    COLLATE_UNSUPPORTED_TYPE,
    COLLATE_MIXED_TYPES,
    IMAGE_FILE_TRUNCATED,
    IMAGE_UNIDENTIFIED,
)
