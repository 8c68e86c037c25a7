"""Chapter 06 (data-loading): Dataset, DataLoader and its workers.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import functools
import io
import multiprocessing
import os
import re
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


class _KilledWorkerDataset(Dataset):
    """Kills its worker with SIGKILL, as the out-of-memory killer does: the worker cannot report anything."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGKILL)
        return torch.zeros(1)


# The next three entries are matched before the generic worker-exception entry (quotes_other_errors): their
# messages reach the main process quoted inside a worker's report, or stand in pasted text next to the parent's
# "worker exited unexpectedly", and they name the real cause, which the generic entries cannot.

_SHM = "/dev/shm"


def _shm_size() -> int | None:
    """The size in bytes of /dev/shm when it is a tmpfs with a size limit (Linux), else None."""
    try:
        with open("/proc/mounts") as mounts:
            fs_types = [line.split()[2] for line in mounts if line.split()[1:2] == [_SHM]]
        st = os.statvfs(_SHM)
    except OSError:
        return None
    size = st.f_blocks * st.f_frsize
    return size if fs_types and fs_types[-1] == "tmpfs" and size > 0 else None


class _BiggerThanShmDataset(Dataset):
    """Samples that are views of one byte (they cost no memory) such that a batch of two needs more bytes than
    all of /dev/shm: a worker's default_collate asks for that much shared memory and the kernel refuses at
    once (a tmpfs refuses a reservation larger than itself before allocating anything)."""

    def __init__(self, shm_bytes: int) -> None:
        self.sample_bytes = shm_bytes // 2 + 2**20

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros((), dtype=torch.uint8).expand(self.sample_bytes)


SHM_FILE = re.compile(r"unable to allocate shared memory\(shm\) for file <(/[^>]+)>")


def remove_leftover_shm_file(error: BaseException | str) -> int | None:
    """Delete the /dev/shm file that a failed allocation named in its message and left behind; return the
    bytes of memory it held (its allocated blocks), or None when there was no such file."""
    m = SHM_FILE.search(str(error))
    path = _SHM + m.group(1) if m else None
    if path is None or not os.path.exists(path):
        return None
    held = os.stat(path).st_blocks * 512
    os.unlink(path)
    return held


def shm_no_space() -> None:
    size = _shm_size()
    if size is None:
        raise OSError(f"{_SHM} is not a tmpfs with a size limit here: this reproducer needs Linux")
    loader = DataLoader(_BiggerThanShmDataset(size), batch_size=2, num_workers=1)
    try:
        _first_batch(loader)
    except RuntimeError as exc:
        remove_leftover_shm_file(exc)  # PyTorch leaves the (empty) file of the failed reservation behind
        raise


def _shm(g: Mapping[str, str]) -> str:
    pid = re.search(r"torch_(\d+)_", g["file"])
    who = f"Process {pid.group(1)} (a DataLoader worker when the error came from one)" if pid else "A process"
    return (
        f"{who} could not reserve shared memory for a batch: /dev/shm is full or too small. Give the container "
        "more (docker run --shm-size=2g or --ipc=host), or keep less in flight: fewer workers, a smaller "
        "prefetch_factor or batch size, uint8 images instead of float32. PyTorch leaves the failed file "
        f"/dev/shm{g['file']} behind (it holds no memory): delete it."
    )


SHM_NO_SPACE = ErrorEntry(
    id="shm-no-space",
    title="Shared memory (/dev/shm) is too small for the batches in flight",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    # torch 2.11 reports the same full /dev/shm as EAGAIN (tests/torchdoctor/message_corpus/2.11.0.json).
    pattern=r"unable to allocate shared memory\(shm\) for file <(?P<file>[^>]+)>: "
    r"(?:No space left on device|Resource temporarily unavailable)",
    example="unable to allocate shared memory(shm) for file </torch_4242_1585927346_0>: No space left on device (28)",
    cause="A DataLoader worker writes each batch it makes straight into shared memory (/dev/shm on Linux), and "
    "PyTorch reserves the whole block first (posix_fallocate); when /dev/shm cannot hold it (Docker gives a "
    "container 64 MiB unless told otherwise) the worker raises this RuntimeError and the main process re-raises "
    "it as 'Caught RuntimeError in DataLoader worker process N'. Up to num_workers x prefetch_factor batches "
    "are in flight at once, plus those your loop still holds. (Older releases did not reserve first: their "
    "workers died later, with a bus error.)",
    fix="Give the container more shared memory (docker run --shm-size=2g, or --ipc=host; Kubernetes: an emptyDir "
    "with medium: Memory mounted at /dev/shm), or keep less in flight: fewer workers, a smaller prefetch_factor "
    "or batch size, uint8 batches converted to float on the device. num_workers=0 avoids shared memory "
    "altogether, at the cost of parallel loading.",
    reproducer=shm_no_space,
    quotes_other_errors=True,
    specific_fix=_shm,
)


class _SharedBatchesDataset(Dataset):
    def __len__(self) -> int:
        return 400

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros(2)


def _worker_open_files_limit(soft: int, worker_id: int) -> None:
    import resource  # Unix only

    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def too_many_open_files() -> None:
    """Keep every batch a worker sent: each one holds an open file descriptor (PyTorch's default sharing
    strategy on Linux), and a lowered limit of open files runs out after a few dozen batches.

    Only the main process gets the lowered limit: its worker, forked with it, gets the usual one back (on a loaded
    machine a worker that ran out first once died of a segmentation fault instead of the main process raising)."""
    import resource  # Unix only

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 256
    kept = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(in_use + 40, hard), hard))
    try:
        loader = DataLoader(_SharedBatchesDataset(), batch_size=1, num_workers=1,
                            worker_init_fn=functools.partial(_worker_open_files_limit, soft))
        for batch in loader:
            kept.append(batch)
    finally:
        kept.clear()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


TOO_MANY_OPEN_FILES = ErrorEntry(
    id="too-many-open-files",
    title="Too many open files",
    chapter=CHAPTER,
    exception_types=("RuntimeError", "OSError"),
    pattern=r"Too many open files",
    example="Too many open files. Communication with the workers is no longer possible. Please increase the "
    "limit using `ulimit -n` in the shell or change the sharing strategy by calling "
    "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code",
    cause="The process reached its limit of open files (ulimit -n). With DataLoader workers on Linux, every "
    "tensor a worker sends is shared through a file descriptor that stays open as long as the tensor lives, so "
    "a loop that keeps the received batches (appends them, or views of them, to a list) runs out after about "
    "'ulimit -n' of them, and PyTorch raises this RuntimeError. As a plain OSError ('[Errno 24] Too many open "
    "files: ...') it means that code opened files without closing them (open or Image.open without a with "
    "block in __getitem__).",
    fix="Keep copies or numbers, not the received tensors (batch.clone(), .tolist(), .item(), or torch.cat the "
    "kept pieces into one tensor as you go); raise the limit (ulimit -n 65536 in the shell that starts Python); "
    "or call torch.multiprocessing.set_sharing_strategy('file_system') at the start of the script. Open files "
    "in a with block so that they are closed.",
    reproducer=too_many_open_files,
    quotes_other_errors=True,
)


def spawn_without_main_guard() -> None:
    """Start DataLoader workers with 'spawn' in the state of a spawned child that re-runs a script without a
    main guard: multiprocessing itself refuses, with its own message. (tests/ also run the real script.)"""
    process = multiprocessing.current_process()
    inheriting = getattr(process, "_inheriting", False)
    process._inheriting = True  # what multiprocessing sets while a spawned child imports the parent's script
    try:
        iter(DataLoader(range(4), batch_size=2, num_workers=1, multiprocessing_context="spawn"))
    finally:
        process._inheriting = inheriting


SPAWN_WITHOUT_MAIN_GUARD = ErrorEntry(
    id="spawn-without-main-guard",
    title='A script starts worker processes without `if __name__ == "__main__":`',
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"An attempt has been made to start a new process before\s+the\s+current process has finished its "
    r"bootstrapping phase",
    example="An attempt has been made to start a new process before the\n        current process has finished "
    "its bootstrapping phase.",
    cause="With the 'spawn' start method (the default on Windows and macOS; 'forkserver', Linux's default from "
    "Python 3.14, does the same) each worker is a new Python that imports your script to find your classes. A "
    "script that builds the DataLoader and iterates over it at the top level does so again inside the worker, "
    "which would start workers of its own; multiprocessing stops it with this message, printed by the worker, "
    "and the main process reports 'DataLoader worker (pid(s) ...) exited unexpectedly'.",
    fix='Put the code that runs the training (building the loaders, the loop) in a function and call it under '
    'if __name__ == "__main__": main(). Keep at the top level only what the workers need: imports, Dataset '
    "classes, collate functions, transforms.",
    reproducer=spawn_without_main_guard,
    quotes_other_errors=True,
)


class _SamplesOnTheGpuDataset(Dataset):
    """Puts each sample on the GPU in __getitem__, as datasets written for a GPU machine often do."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((3,), float(i), device="cuda")


def cuda_in_forked_worker() -> None:
    """A forked DataLoader worker touches CUDA after this process has: PyTorch refuses in the worker.

    Asking torch.cuda.is_available() is enough to mark this process (it asks the driver, unless
    PYTORCH_NVML_BASED_CUDA_CHECK=1), on a CUDA build with or without a GPU; with a GPU, CUDA is also started
    for real, as moving a model there does. A PyTorch built without CUDA raises another error in the worker."""
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
    _first_batch(DataLoader(_SamplesOnTheGpuDataset(), batch_size=2, num_workers=1, multiprocessing_context="fork"))


CUDA_IN_FORKED_WORKER = ErrorEntry(
    id="cuda-in-forked-worker",
    title="CUDA used in a worker process started with fork",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Cannot re-initialize CUDA in forked subprocess",
    example="Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
    "'spawn' start method",
    cause="A process made by fork (DataLoader workers on Linux up to Python 3.13, or multiprocessing with the "
    "'fork' start method) touched CUDA (a tensor created with device='cuda', .cuda() or .to('cuda'), a torch.cuda "
    "call) after its parent had started CUDA, and CUDA cannot be used in such a copy of the parent. The parent "
    "counts as having started CUDA once it moved anything to the GPU, and already once it called "
    "torch.cuda.is_available() (unless PYTORCH_NVML_BASED_CUDA_CHECK=1), so the message appears on a machine "
    "without a GPU too. From a DataLoader worker it is re-raised as 'Caught RuntimeError in DataLoader worker "
    "process N'.",
    fix="Keep CUDA out of the workers: return CPU tensors from __getitem__ and move each batch to the GPU in the "
    "training loop (batch.to(device, non_blocking=True), with pin_memory=True). If the workers must use CUDA, "
    "start them with spawn: DataLoader(..., multiprocessing_context='spawn'), with the Dataset in an importable "
    "module.",
    reproducer=cuda_in_forked_worker,
    quotes_other_errors=True,
)


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
        _first_batch(DataLoader(_KilledWorkerDataset(), batch_size=2, num_workers=1))


WORKER_KILLED = ErrorEntry(
    id="worker-killed",
    title="DataLoader worker died",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) (?:exited unexpectedly|is killed by signal)",
    example="DataLoader worker (pid(s) 4242) exited unexpectedly",
    cause="A worker process died without raising a Python exception, so the main process only sees that it is "
    "gone; what the worker printed on its stderr says why. Nothing at all: the out-of-memory killer (SIGKILL). "
    "\"Can't get attribute '...' on <module '__main__'\": under the spawn/forkserver start methods a worker "
    "could not find a Dataset defined in a notebook. 'An attempt has been made to start a new process before the "
    "current process has finished its bootstrapping phase': a script without if __name__ == '__main__': under "
    "spawn. 'Unexpected bus error encountered in worker': SIGBUS, a crash in native code or, on older PyTorch "
    "releases, a full /dev/shm (the pinned release reserves shared memory first and raises 'unable to allocate "
    "shared memory(shm)' instead).",
    fix="Read what the worker printed on stderr (above the error in a notebook, or in the terminal); run with "
    "num_workers=0 to see whether the data code itself fails; for the out-of-memory killer use fewer workers "
    "or less memory per worker (dmesg names the killed process); move a Dataset defined in a notebook into an "
    "importable .py file; put a script's training code under if __name__ == '__main__':; for a bus error in a "
    "container give more shared memory (docker run --shm-size=2g or --ipc=host).",
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
    SHM_NO_SPACE,
    TOO_MANY_OPEN_FILES,
    SPAWN_WITHOUT_MAIN_GUARD,
    CUDA_IN_FORKED_WORKER,
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
