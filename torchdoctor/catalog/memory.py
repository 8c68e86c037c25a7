"""Chapter 03 (memory): out-of-memory errors and memory-related warnings.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from torchdoctor.catalog._entry import ErrorEntry, warnings_as_errors

CHAPTER = "memory"


def simulated_budget() -> None:
    from torchdoctor.memory import memory_budget

    with memory_budget(1024, device="cpu"):
        torch.ones(1024)


SIMULATED_MEMORY_BUDGET = ErrorEntry(
    id="simulated-memory-budget",
    title="Simulated memory budget exceeded (torchdoctor)",
    chapter=CHAPTER,
    exception_types=("OutOfMemoryError",),
    pattern=r"Simulated CPU memory budget exceeded",
    example="Simulated CPU memory budget exceeded (torchdoctor.memory_budget): tried to allocate 4.00 KiB "
    "with 0 B of the 1.00 KiB budget already in use.",
    cause="The block ran inside torchdoctor.memory_budget on CPU and its tensors would pass the budget: the "
    "CPU stand-in for a CUDA out-of-memory error.",
    fix="Treat it like a real OOM: smaller batches, gradient accumulation, autocast, activation "
    "checkpointing, no_grad for evaluation, and no tensors kept alive by accident.",
    reproducer=simulated_budget,
)


def cuda_oom() -> None:
    free, total = torch.cuda.mem_get_info()
    torch.empty(total + 2**30, dtype=torch.uint8, device="cuda")


def _cuda_oom(g: Mapping[str, str]) -> str:
    return (
        f"One allocation of {g['size']} did not fit. Reduce the batch size, use gradient accumulation, "
        f"torch.autocast, activation checkpointing, and torch.no_grad() for evaluation; look for tensors kept "
        f"alive by accident (a loss summed as a tensor keeps its graph, in evaluation with every activation: "
        f"use loss.item())."
    )


CUDA_OOM = ErrorEntry(
    id="cuda-oom",
    title="CUDA out of memory",
    chapter=CHAPTER,
    exception_types=("OutOfMemoryError", "RuntimeError"),
    # Under torch.cuda.set_per_process_memory_fraction the allocator may refuse before it asks the driver, with
    # "Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit".
    pattern=r"CUDA out of memory\. (?:Tried to allocate (?P<size>[\d.]+ (?:bytes|[KMGTP]iB))|Allocation was "
    r"preemptively rejected)",
    example="CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which "
    "1.06 GiB is free. Including non-PyTorch memory, this process has 6.72 GiB memory in use. Of the "
    "allocated memory 6.50 GiB is allocated by PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated. "
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
    "avoid fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)",
    cause="The GPU could not provide one more block: parameters, gradients, optimizer state and the "
    "activations saved for backward (which grow with the batch size) together need more than the card has.",
    fix="Reduce the batch size, accumulate gradients, use torch.autocast, activation checkpointing and "
    "torch.no_grad() for evaluation; free references to old tensors (loss.item(), not loss).",
    reproducer=cuda_oom,
    needs="cuda",
    specific_fix=_cuda_oom,
)


def cpu_alloc_failure() -> None:
    torch.empty(10**15, dtype=torch.uint8)  # a petabyte: more than any address space allows


def _cpu_alloc(g: Mapping[str, str]) -> str:
    from torchdoctor.memory import format_bytes

    return (
        f"One tensor needed {format_bytes(int(g['bytes']))}. Check the shape you asked for (a wrong size "
        f"such as a pixel count used as a batch size), then reduce the batch size or process the data in chunks."
    )


CPU_ALLOC_FAILURE = ErrorEntry(
    id="cpu-alloc-failure",
    title="CPU allocation failed",
    chapter=CHAPTER,
    exception_types=("RuntimeError", "OutOfMemoryError"),
    pattern=r"DefaultCPUAllocator: can't allocate memory: you tried to allocate (?P<bytes>\d+) bytes",
    example="[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
    "tried to allocate 1000000000000000 bytes. Error code 12 (Cannot allocate memory)",
    cause="The operating system refused a single allocation, most often because a shape is far larger "
    "than intended.",
    fix="Check the shape of the tensor being created; then reduce batch size or work in chunks.",
    reproducer=cpu_alloc_failure,
    specific_fix=_cpu_alloc,
)


def checkpoint_use_reentrant() -> None:
    from torch.utils.checkpoint import checkpoint

    with warnings_as_errors(UserWarning):
        checkpoint(torch.sin, torch.ones(2, requires_grad=True))


CHECKPOINT_USE_REENTRANT = ErrorEntry(
    id="checkpoint-use-reentrant",
    title="Activation checkpointing without use_reentrant",
    chapter=CHAPTER,
    exception_types=("UserWarning",),
    pattern=r"the use_reentrant parameter should be passed explicitly",
    example="torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
    cause="torch.utils.checkpoint.checkpoint still defaults to the old reentrant implementation and warns "
    "that the argument will become required.",
    fix="Pass use_reentrant=False (the recommended implementation).",
    reproducer=checkpoint_use_reentrant,
)


def cuda_amp_deprecated() -> None:
    with warnings_as_errors(FutureWarning):
        torch.cuda.amp.GradScaler()


CUDA_AMP_DEPRECATED = ErrorEntry(
    id="cuda-amp-deprecated",
    title="torch.cuda.amp is deprecated",
    chapter=CHAPTER,
    exception_types=("FutureWarning",),
    pattern=r"`torch\.cuda\.amp\.(?P<api>\w+)\(args\.\.\.\)` is deprecated",
    example="`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
    "`torch.amp.GradScaler('cuda', args...)` instead.",
    cause="Mixed precision moved to the device-generic torch.amp module; older tutorials still use "
    "torch.cuda.amp.",
    fix="Use torch.amp.autocast('cuda', ...) and torch.amp.GradScaler('cuda').",
    reproducer=cuda_amp_deprecated,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    SIMULATED_MEMORY_BUDGET,
    CUDA_OOM,
    CPU_ALLOC_FAILURE,
    CHECKPOINT_USE_REENTRANT,
    CUDA_AMP_DEPRECATED,
)
