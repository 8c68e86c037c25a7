"""Measure, limit and estimate the memory that tensors use.

On CPU the bytes are tracked from live tensor storages: a dispatch mode sees every storage an operation
creates and a weak reference notices when it is freed. On CUDA the caching allocator's statistics are used.
"""

from __future__ import annotations

import copy
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_iter
from torch.utils.weak import WeakIdKeyDictionary

__all__ = [
    "MemoryReport",
    "LiveBytesTracker",
    "format_bytes",
    "measure_memory",
    "peak_memory",
    "memory_budget",
    "estimate_step_peak",
    "step_memory_breakdown",
    "oom_numbers",
]


def format_bytes(n: float) -> str:
    """Human-readable size with binary units, as PyTorch's own messages print it."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _storages(obj: Any) -> Iterator[torch.UntypedStorage]:
    for leaf in tree_iter(obj):
        if isinstance(leaf, torch.Tensor):
            yield leaf.untyped_storage()


class LiveBytesTracker(TorchDispatchMode):
    """Dispatch mode that counts the bytes of tensor storages created while it is active.

    A storage counts from the operation that creates it until it is freed. Storages that already existed
    (parameters, inputs, tensors modified in place or viewed) are never counted. ``on_alloc`` is called
    with the bytes about to become live and may raise to refuse them.
    """

    def __init__(self, on_alloc: Callable[[int, int], None] | None = None) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.by_op: dict[str, int] = {}
        self.peak_by_op: dict[str, int] = {}
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._refs: dict[int, weakref.ref] = {}
        self._on_alloc = on_alloc

    def _freed(self, op: str, nbytes: int, ref: weakref.ref) -> None:
        self._refs.pop(id(ref), None)
        self.live -= nbytes
        self.by_op[op] -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        inputs = {id(st) for st in _storages((args, kwargs))}
        out = func(*args, **kwargs)
        op = func.overloadpacket.__name__
        for st in _storages(out):
            if st in self._seen:
                continue
            nbytes = 0 if id(st) in inputs else st.nbytes()
            self._seen[st] = nbytes
            if nbytes == 0:
                continue
            if self._on_alloc is not None:
                self._on_alloc(nbytes, self.live)
            ref = weakref.ref(st, lambda r, op=op, n=nbytes: self._freed(op, n, r))
            self._refs[id(ref)] = ref
            self.live += nbytes
            self.by_op[op] = self.by_op.get(op, 0) + nbytes
            if self.live > self.peak:
                self.peak = self.live
                self.peak_by_op = {k: v for k, v in self.by_op.items() if v > 0}
        return out


@dataclass
class MemoryReport:
    """Peak bytes a function allocated above what was live before, and where they came from."""

    peak_bytes: int
    device: str
    breakdown: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"peak {format_bytes(self.peak_bytes)} above the start ({self.device})"]
        top = sorted(self.breakdown.items(), key=lambda kv: -kv[1])[:8]
        lines += [f"  {op:<34} {format_bytes(n):>12}" for op, n in top]
        return "\n".join(lines)


def _resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to account on; a CUDA device always gets its index, which some torch.cuda calls require."""
    dev = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def measure_memory(fn: Callable[[], Any], device: str | torch.device | None = None) -> MemoryReport:
    """Run ``fn()`` once and report its peak memory above the starting point.

    ``device`` chooses the accounting: "cpu" tracks live storages (with a breakdown by the operation that
    allocated them at the peak); "cuda" uses ``torch.cuda.max_memory_allocated``. By default CUDA is used when
    available.
    """
    dev = _resolve_device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = torch.cuda.memory_allocated(dev)
        fn()
        torch.cuda.synchronize(dev)
        return MemoryReport(torch.cuda.max_memory_allocated(dev) - start, str(dev))
    if dev.type != "cpu":
        raise ValueError(f"measure_memory supports 'cpu' and 'cuda', not {dev.type!r}")
    tracker = LiveBytesTracker()
    with tracker:
        fn()
    return MemoryReport(tracker.peak, "cpu", tracker.peak_by_op)


def peak_memory(fn: Callable[[], Any], device: str | torch.device | None = None) -> int:
    """Peak bytes of tensor storage that ``fn()`` allocated above what was live before it ran."""
    return measure_memory(fn, device).peak_bytes


def _simulated_oom(budget: int) -> Callable[[int, int], None]:
    def check(nbytes: int, live: int) -> None:
        if live + nbytes > budget:
            raise torch.OutOfMemoryError(
                f"Simulated CPU memory budget exceeded (torchdoctor.memory_budget): tried to allocate "
                f"{format_bytes(nbytes)} with {format_bytes(live)} of the {format_bytes(budget)} budget already "
                f"in use. Nothing ran out for real: this budget only counts tensors created inside the block. "
                f"On a GPU the same situation reads 'CUDA out of memory. Tried to allocate ...'."
            )

    return check


@contextmanager
def memory_budget(budget_bytes: int, device: str | torch.device | None = None) -> Iterator[None]:
    """Raise ``torch.OutOfMemoryError`` when the tensors of the block would pass ``budget_bytes``.

    On CPU this is a simulated budget: only storages created inside the block count. On CUDA it is real:
    the process's memory fraction is set so that the allocator holds at most ``budget_bytes`` in total
    (memory already in use before the block included), and the previous fraction is restored afterwards.
    """
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int | float) or budget_bytes <= 0:
        raise ValueError(f"budget_bytes must be a positive number of bytes (2 * 2**30 for 2 GiB), got {budget_bytes!r}")
    dev = _resolve_device(device)
    if dev.type == "cpu":
        with LiveBytesTracker(on_alloc=_simulated_oom(budget_bytes)):
            yield
        return
    if dev.type != "cuda":
        raise ValueError(f"memory_budget supports 'cpu' and 'cuda', not {dev.type!r}")
    total = torch.cuda.get_device_properties(dev).total_memory
    if budget_bytes > total:
        raise ValueError(f"budget {format_bytes(budget_bytes)} is more than the GPU has ({format_bytes(total)})")
    previous = torch.cuda.get_per_process_memory_fraction(dev)
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(budget_bytes / total, dev)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(previous, dev)
        torch.cuda.empty_cache()


def estimate_step_peak(
    model: nn.Module,
    example_inputs: Sequence[torch.Tensor],
    loss_fn: Callable[..., torch.Tensor],
    batch_size: int,
    optimizer_factory: Callable[[Any], torch.optim.Optimizer] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> int:
    """Estimate the peak bytes of one training step at ``batch_size`` without allocating anything.

    The step is ``loss_fn(model(*inputs[:-1]), inputs[-1]).backward()`` followed by ``optimizer.step()``;
    ``example_inputs`` are tensors (any batch size, on the model's device) whose first dimension is replaced
    by ``batch_size``.
    Everything runs on fake tensors, which carry shapes and dtypes but no data, so the figure matches
    :func:`peak_memory` for the same step on CPU: gradients, optimizer state and activations, above the
    parameters. The model itself is not modified.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int of at least 1, got {batch_size!r}")
    if len(example_inputs) < 2 or not all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in example_inputs):
        raise ValueError("example_inputs needs the model inputs followed by the target, e.g. (x, y): tensors "
                         "with a batch dimension first")
    mode = FakeTensorMode()
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(mode.from_tensor(p.detach()), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = mode.from_tensor(b)
    fake_model = copy.deepcopy(model, memo)
    with mode:
        batch = [torch.empty((batch_size, *t.shape[1:]), dtype=t.dtype, device=t.device) for t in example_inputs]
        make_opt = optimizer_factory or (lambda params: torch.optim.SGD(params, lr=0.1))
        optimizer = make_opt(fake_model.parameters())
        autocast = (
            torch.autocast(batch[0].device.type, dtype=autocast_dtype) if autocast_dtype is not None else nullcontext()
        )
        tracker = LiveBytesTracker()
        with tracker:
            with autocast:
                loss = loss_fn(fake_model(*batch[:-1]), batch[-1])
            loss.backward()
            optimizer.step()
            del loss
    return tracker.peak


def _tensor_bytes(tensors: Any) -> int:
    """Bytes of the distinct storages behind the tensors in ``tensors`` (any nesting of lists, dicts, tuples)."""
    seen: dict[int, int] = {}
    for leaf in tree_iter(tensors):
        if isinstance(leaf, torch.Tensor):
            st = leaf.untyped_storage()
            seen[st.data_ptr() or id(st)] = st.nbytes()
    return sum(seen.values())


def step_memory_breakdown(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor | Sequence[torch.Tensor],
    target: torch.Tensor,
    loss_fn: Callable[..., torch.Tensor],
    device: str | torch.device | None = None,
) -> dict[str, int]:
    """Run one training step and say, in bytes, what holds memory in it.

    The step is ``optimizer.zero_grad(set_to_none=True)``, ``loss_fn(model(*inputs), target).backward()`` and
    ``optimizer.step()``. The result has the keys ``"parameters"`` (alive before the step), ``"activations"``
    (what the forward pass left alive for the backward pass: saved tensors, the output and the loss),
    ``"gradients"`` (the ``.grad`` tensors after backward), ``"optimizer state"`` (the optimizer's tensors after
    the step: nothing for plain SGD, two copies of the parameters for Adam) and ``"peak"`` (the step's peak above
    what was alive before it, as :func:`peak_memory` measures it). ``device`` chooses the accounting as in
    :func:`measure_memory`.
    """
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    dev = _resolve_device(device)
    params = [p for p in model.parameters()]
    result = {"parameters": _tensor_bytes(params)}
    optimizer.zero_grad(set_to_none=True)

    def state_bytes() -> int:
        return _tensor_bytes([dict(s) for s in optimizer.state.values()])

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = torch.cuda.memory_allocated(dev)
        loss = loss_fn(model(*inputs), target)
        torch.cuda.synchronize(dev)
        result["activations"] = torch.cuda.memory_allocated(dev) - start
        loss.backward()
        result["gradients"] = _tensor_bytes([p.grad for p in params if p.grad is not None])
        optimizer.step()
        del loss
        torch.cuda.synchronize(dev)
        result["optimizer state"] = state_bytes()
        result["peak"] = torch.cuda.max_memory_allocated(dev) - start
        return result
    if dev.type != "cpu":
        raise ValueError(f"step_memory_breakdown supports 'cpu' and 'cuda', not {dev.type!r}")
    tracker = LiveBytesTracker()
    with tracker:
        loss = loss_fn(model(*inputs), target)
        result["activations"] = tracker.live
        loss.backward()
        result["gradients"] = _tensor_bytes([p.grad for p in params if p.grad is not None])
        optimizer.step()
        del loss
    result["optimizer state"] = state_bytes()
    result["peak"] = tracker.peak
    return result


_SIZE = r"(\d+(?:\.\d+)?) ?(bytes|B|KiB|MiB|GiB|TiB|PiB|EiB)"
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}
_OOM_FIELDS = {
    "tried to allocate": r"[Tt]ried to allocate " + _SIZE,
    "total capacity": r"total capacity of " + _SIZE,
    "free": r"of which " + _SIZE + r" is free",
    "in use by this process": r"this process has " + _SIZE + r" memory in use",
    "allocated by PyTorch": r"[Oo]f the allocated memory " + _SIZE + r" is allocated by PyTorch",
    "reserved but unallocated": _SIZE + r" is reserved by PyTorch but unallocated",
    "requested": r"Requested size: " + _SIZE,
    "budget in use": r"with " + _SIZE + r" of the",
    "budget": r"of the " + _SIZE + r" budget",
}


def oom_numbers(message: str | BaseException) -> dict[str, int]:
    """The sizes an out-of-memory message states, in bytes, by what they mean.

    Reads today's CUDA message ("Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which
    1.06 GiB is free. Including non-PyTorch memory, this process has 6.72 GiB memory in use. Of the allocated
    memory 6.50 GiB is allocated by PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated.") and the
    simulated CPU budget's message of :func:`memory_budget`. Keys: "tried to allocate", "total capacity", "free",
    "in use by this process", "allocated by PyTorch", "reserved but unallocated", "requested", "budget in use",
    "budget"; only those the message states are present. The sizes are as printed (rounded to two decimals).
    """
    text = str(message)
    found = {}
    for name, pattern in _OOM_FIELDS.items():
        match = re.search(pattern, text)
        if match:
            number, unit = match.group(1), match.group(2)
            found[name] = round(float(number) * _UNITS[unit])
    return found
