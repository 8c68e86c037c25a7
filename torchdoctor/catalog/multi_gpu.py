"""Chapter 09 (multi-gpu): torch.distributed, DDP and DataParallel.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "multi-gpu"


@contextmanager
def _single_process_group() -> Iterator[None]:
    """A one-process gloo group in memory, so DDP errors can be shown without launching anything."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def ddp_without_process_group() -> None:
    nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


DDP_NO_PROCESS_GROUP = ErrorEntry(
    id="ddp-no-process-group",
    title="Distributed call without a process group",
    chapter=CHAPTER,
    exception_types=("ValueError", "RuntimeError"),
    pattern=r"Default process group has not been initialized",
    example="Default process group has not been initialized, please make sure to call init_process_group.",
    cause="DistributedDataParallel and torch.distributed calls need torch.distributed.init_process_group() "
    "first, in every process; usually the script was started with python instead of torchrun.",
    fix="Launch with torchrun --nproc_per_node=N script.py and call dist.init_process_group(backend) "
    "('nccl' on GPUs, 'gloo' on CPU) before wrapping the model.",
    reproducer=ddp_without_process_group,
)


def ddp_device_ids_cpu() -> None:
    with _single_process_group():
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])


DDP_DEVICE_IDS_CPU = ErrorEntry(
    id="ddp-device-ids-cpu",
    title="DDP device_ids given for a CPU module",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"DistributedDataParallel device_ids and output_device arguments only work with "
    r"single-device/multiple-device GPU modules or CPU modules",
    example="DistributedDataParallel device_ids and output_device arguments only work with "
    "single-device/multiple-device GPU modules or CPU modules, but got device_ids [0], output_device None, "
    "and module parameters {device(type='cpu')}.",
    cause="device_ids tells DDP which GPU a single-device module lives on. The module is still on the CPU "
    "(it was never moved, or this is a CPU run), so device_ids makes no sense.",
    fix="On GPUs: model.to(f'cuda:{local_rank}') before DDP(model, device_ids=[local_rank]). On CPU: "
    "DDP(model) without device_ids.",
    reproducer=ddp_device_ids_cpu,
)


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(2, 2)
        self.unused = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def ddp_unused_parameters() -> None:
    with _single_process_group():
        model = nn.parallel.DistributedDataParallel(_TwoHeads())
        for _ in range(2):
            model(torch.ones(1, 2)).sum().backward()


def _ddp_unused(g: Mapping[str, str]) -> str:
    return (
        f"Parameters {g['indices'].strip()} (by position in model.parameters()) got no gradient. Remove the unused "
        f"layers, make every output take part in the loss, or pass find_unused_parameters=True to "
        f"DistributedDataParallel (it costs an extra pass over the graph)."
    )


DDP_UNUSED_PARAMETERS = ErrorEntry(
    id="ddp-unused-parameters",
    title="DDP: parameters that received no gradient",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected to have finished reduction in the prior iteration before starting a new one"
    r"(?:.*Parameter indices which did not receive grad for rank \d+: (?P<indices>[\d ]+))?",
    example="Expected to have finished reduction in the prior iteration before starting a new one. This error "
    "indicates that your module has parameters that were not used in producing loss.",
    cause="DDP waits for a gradient of every parameter; some parameters took no part in the loss (an unused "
    "layer or head, a branch skipped this step), so the previous reduction never finished.",
    fix="Remove unused parameters, make every output contribute to the loss, or pass "
    "find_unused_parameters=True to DistributedDataParallel.",
    reproducer=ddp_unused_parameters,
    specific_fix=_ddp_unused,
)


def process_group_twice() -> None:
    import torch.distributed as dist

    with _single_process_group():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


PROCESS_GROUP_TWICE = ErrorEntry(
    id="process-group-twice",
    title="Process group initialised twice",
    chapter=CHAPTER,
    exception_types=("ValueError", "RuntimeError"),
    pattern=r"trying to initialize the default process group twice",
    example="trying to initialize the default process group twice!",
    cause="init_process_group() ran again in a process that already has a group, e.g. a notebook cell run "
    "twice or a helper that initialises on every call.",
    fix="Guard it: if not dist.is_initialized(): dist.init_process_group(...); call "
    "dist.destroy_process_group() when done.",
    reproducer=process_group_twice,
)


def dataparallel_wrong_device() -> None:
    nn.DataParallel(nn.Linear(2, 2))(torch.ones(1, 2, device="cuda"))


DATAPARALLEL_WRONG_DEVICE = ErrorEntry(
    id="dataparallel-wrong-device",
    title="DataParallel module not on the first GPU",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"module must have its parameters and buffers on device (?P<expected>\S+) \(device_ids\[0\]\) but "
    r"found one of them on device: (?P<got>\S+)",
    example="module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of "
    "them on device: cpu",
    cause="nn.DataParallel copies the module from device_ids[0] to the other GPUs; the module was not moved "
    "there first.",
    fix="model.to('cuda:0') before nn.DataParallel(model); better, use DistributedDataParallel with one "
    "process per GPU.",
    reproducer=dataparallel_wrong_device,
    needs="cuda",
)


ENTRIES: tuple[ErrorEntry, ...] = (
    DDP_NO_PROCESS_GROUP,
    DDP_DEVICE_IDS_CPU,
    DDP_UNUSED_PARAMETERS,
    PROCESS_GROUP_TWICE,
    DATAPARALLEL_WRONG_DEVICE,
)
