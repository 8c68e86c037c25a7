"""Small programs that raise each catalogued error for real.

Each function takes no arguments and raises the error its catalog entry describes. They are the evidence
behind the catalog: a test runs them against the pinned PyTorch and fails when an error no longer happens or
reads differently. Keep them minimal, quick and free of side effects.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

# --- helpers -------------------------------------------------------------------------------------------


@contextmanager
def _warnings_as_errors(category: type[Warning]) -> Iterator[None]:
    """Turn one warning category into an exception, so a warning can be caught like an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", category)
        yield


def _first_batch(loader: DataLoader) -> Any:
    """Fetch one batch and shut the workers down even when fetching fails."""
    it = iter(loader)
    try:
        return next(it)
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


@contextmanager
def _single_process_group() -> Iterator[None]:
    """A one-process gloo group in memory, so DDP errors can be shown without launching anything."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


class TinyNet(nn.Module):
    """A model class defined at module level, so that whole-model pickles can refer to it."""

    def __init__(self, out_features: int = 10) -> None:
        super().__init__()
        self.fc = nn.Linear(20, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class GrownNet(nn.Module):
    """TinyNet with an extra layer: the shape a model takes after someone edits it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(20, 10)
        self.head = nn.Linear(10, 2)


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


# --- method --------------------------------------------------------------------------------------------


def anomaly_nan() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
        warnings.filterwarnings("ignore", message="Error detected in")  # the forward traceback, shown in class
        with torch.autograd.detect_anomaly():
            x = torch.zeros(3, requires_grad=True)
            # sqrt's gradient at 0 is inf, and inf * 0 is nan. A plain inf gradient would not be flagged:
            # anomaly mode only checks for nan.
            (torch.sqrt(x) * 0).sum().backward()


# --- dimensions ----------------------------------------------------------------------------------------


def mat1_mat2_shapes() -> None:
    nn.Linear(784, 10)(torch.randn(32, 128))


def view_invalid_size() -> None:
    torch.randn(4, 3, 32, 32).view(5, -1)  # 12288 elements cannot be split into rows of 5


def view_non_contiguous() -> None:
    torch.randn(3, 4).t().view(12)


def embedding_index() -> None:
    nn.Embedding(10, 3)(torch.tensor([3, 10]))


def ce_target_out_of_bounds() -> None:
    F.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 10, 3]))


def conv_channels() -> None:
    nn.Conv2d(3, 16, 3)(torch.randn(8, 1, 28, 28))


def conv_input_dims() -> None:
    nn.Conv2d(3, 16, 3)(torch.randn(3, 32))


def broadcast_size() -> None:
    torch.randn(2, 3) + torch.randn(2, 4)


def mse_broadcast_warning() -> None:
    with _warnings_as_errors(UserWarning):
        F.mse_loss(torch.randn(8, 1), torch.randn(8))


def ce_batch_size() -> None:
    F.cross_entropy(torch.randn(32, 10), torch.randint(0, 10, (16,)))


def rnn_input_size() -> None:
    nn.LSTM(input_size=10, hidden_size=20)(torch.randn(5, 3, 8))


def pool_output_too_small() -> None:
    nn.MaxPool2d(2)(torch.randn(1, 8, 1, 1))


def kernel_bigger_than_input() -> None:
    nn.Conv2d(1, 1, 5)(torch.randn(1, 1, 3, 3))


def lazy_uninitialized() -> None:
    sum(p.numel() for p in nn.LazyLinear(3).parameters())


# --- gradients -----------------------------------------------------------------------------------------


def no_grad_fn() -> None:
    x = torch.tensor([1.0, 2.0])
    (x * 2).sum().backward()


def backward_twice() -> None:
    x = torch.ones(2, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    y.backward()


def non_scalar_backward() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward()


def inplace_saved_tensor() -> None:
    x = torch.ones(3, requires_grad=True)
    y = x.exp()  # exp saves its output for backward
    y.add_(1)
    y.sum().backward()


def leaf_inplace() -> None:
    w = torch.ones(3, requires_grad=True)
    w.sub_(0.1)


def numpy_requires_grad() -> None:
    torch.ones(2, requires_grad=True).numpy()


# --- memory --------------------------------------------------------------------------------------------


def cuda_oom() -> None:
    free, total = torch.cuda.mem_get_info()
    torch.empty(total + 2**30, dtype=torch.uint8, device="cuda")


def cpu_alloc_failure() -> None:
    torch.empty(10**15, dtype=torch.uint8)  # a petabyte: more than any address space allows


def simulated_budget() -> None:
    from torchdoctor.memory import memory_budget

    with memory_budget(1024, device="cpu"):
        torch.ones(1024)


def checkpoint_use_reentrant() -> None:
    from torch.utils.checkpoint import checkpoint

    with _warnings_as_errors(UserWarning):
        checkpoint(torch.sin, torch.ones(2, requires_grad=True))


def cuda_amp_deprecated() -> None:
    with _warnings_as_errors(FutureWarning):
        torch.cuda.amp.GradScaler()


# --- dtype-device ----------------------------------------------------------------------------------------


def ce_target_dtype() -> None:
    F.cross_entropy(torch.randn(3, 5), torch.tensor([1.0, 2.0, 3.0]))


def ce_probability_target_long() -> None:
    F.cross_entropy(torch.randn(3, 5), F.one_hot(torch.tensor([1, 2, 3]), 5))


def matmul_dtype() -> None:
    nn.Linear(3, 2)(torch.tensor([[1, 2, 3]]))


def conv_input_type() -> None:
    nn.Conv2d(1, 1, 3)(torch.randn(1, 1, 5, 5, dtype=torch.float64))


def embedding_index_dtype() -> None:
    nn.Embedding(10, 3)(torch.tensor([1.0, 2.0]))


def cuda_no_driver() -> None:
    torch.zeros(1, device="cuda")


def cuda_not_compiled() -> None:
    torch.zeros(1, device="cuda")


def device_mismatch() -> None:
    nn.Linear(2, 2).cuda()(torch.ones(1, 2))


def meta_device() -> None:
    with torch.device("meta"):
        layer = nn.Linear(2, 2)  # built without memory, never materialised
    layer(torch.ones(1, 2))


def device_side_assert() -> None:
    # A device-side assert leaves the CUDA context unusable, so it runs in a child process; the child's
    # exception type and message are raised here unchanged.
    code = (
        "import json, torch\n"
        "try:\n"
        "    torch.nn.functional.cross_entropy(torch.randn(4, 10, device='cuda'),"
        " torch.tensor([1, 2, 10, 3], device='cuda'))\n"
        "    torch.cuda.synchronize()\n"
        "except RuntimeError as e:\n"
        "    print(json.dumps([type(e).__name__, str(e)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    if not lines:
        raise AssertionError(f"the child process raised nothing; stderr: {out.stderr[-2000:]}")
    name, message = json.loads(lines[-1])
    raise getattr(torch, name, RuntimeError)(message)


def cuda_tensor_to_numpy() -> None:
    torch.ones(2, device="cuda").numpy()


# --- checkpoints -----------------------------------------------------------------------------------------


def state_dict_keys() -> None:
    GrownNet().load_state_dict(TinyNet().state_dict())


def state_dict_size_mismatch() -> None:
    TinyNet(out_features=5).load_state_dict(TinyNet().state_dict())


def weights_only_load() -> None:
    buffer = io.BytesIO()
    torch.save(TinyNet(), buffer)  # the whole pickled module, not its state_dict
    buffer.seek(0)
    torch.load(buffer)


def missing_class_on_load() -> None:
    module = types.ModuleType("torchdoctor_scratch_models")
    module.OldNet = type("OldNet", (nn.Linear,), {"__module__": module.__name__})
    sys.modules[module.__name__] = module
    buffer = io.BytesIO()
    try:
        torch.save(module.OldNet(2, 2), buffer)
        del module.OldNet  # the class is gone when the file is read, as in a fresh session
        buffer.seek(0)
        torch.load(buffer, weights_only=False)
    finally:
        del sys.modules[module.__name__]


def ran_out_of_input() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "empty.pt")
        open(path, "wb").close()
        torch.load(path, weights_only=False)


def corrupted_checkpoint() -> None:
    buffer = io.BytesIO()
    torch.save(TinyNet().state_dict(), buffer)
    torch.load(io.BytesIO(buffer.getvalue()[:200]))  # a truncated download or copy


# --- data-loading ----------------------------------------------------------------------------------------


def collate_unequal() -> None:
    _first_batch(DataLoader([torch.ones(3), torch.ones(4)], batch_size=2))


def worker_exception() -> None:
    _first_batch(DataLoader(_BrokenDataset(), batch_size=2, num_workers=1))


def worker_killed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _first_batch(DataLoader(_BusErrorDataset(), batch_size=2, num_workers=1))


def cant_pickle_local() -> None:
    data = [torch.ones(2) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Got pickle error")
        loader = DataLoader(data, batch_size=2, num_workers=1, collate_fn=lambda b: b, multiprocessing_context="spawn")
        _first_batch(loader)


# --- convergence -----------------------------------------------------------------------------------------


def clip_nonfinite() -> None:
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([float("nan"), 1.0])
    nn.utils.clip_grad_norm_([p], max_norm=1.0, error_if_nonfinite=True)


def scheduler_before_optimizer() -> None:
    p = nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with _warnings_as_errors(UserWarning):
        scheduler.step()


# --- accuracy --------------------------------------------------------------------------------------------


def bce_input_range() -> None:
    logits = torch.tensor([2.5, -1.0, 0.3])
    F.binary_cross_entropy(logits, torch.tensor([1.0, 0.0, 1.0]))


def bce_target_size() -> None:
    F.binary_cross_entropy_with_logits(torch.randn(8, 1), torch.ones(8))


def batchnorm_single_sample() -> None:
    nn.BatchNorm1d(4).train()(torch.randn(1, 4))


# --- multi-gpu -------------------------------------------------------------------------------------------


def ddp_without_process_group() -> None:
    nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


def ddp_device_ids_cpu() -> None:
    with _single_process_group():
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])


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


def process_group_twice() -> None:
    import torch.distributed as dist

    with _single_process_group():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def dataparallel_wrong_device() -> None:
    nn.DataParallel(nn.Linear(2, 2))(torch.ones(1, 2, device="cuda"))

