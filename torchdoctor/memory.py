"""Measure, limit and estimate the memory that tensors use.

On CPU the bytes are tracked from live tensor storages: a dispatch mode sees every storage an operation
creates and a weak reference notices when it is freed. On CUDA the caching allocator's statistics are used.

What the CPU count sees, and what it does not (tests/torchdoctor/test_memory_vs_profiler.py measures both):

- It sees the storages of the tensors that operations return, at the dispatcher, as torch's own
  ``torch.distributed._tools.mem_tracker.MemTracker`` does. A kernel that allocates scratch memory *inside* one
  operation (CPU convolution backward does) is invisible to it: on chapter 03's CNN the peak is about a tenth below
  what ``torch.profiler.profile(profile_memory=True)`` and the process's resident memory show. Fully-connected
  layers allocate nothing inside, and there the count agrees with both.
- :func:`measure_memory` and :func:`peak_memory` also count the frees of storages that were alive before the call
  (found by the garbage collector's list of tensors), so a warm model's ``zero_grad(set_to_none=True)`` lowers the
  count as it lowers real use. Tensors that Python never saw (a graph's saved tensors whose owner is gone, C++-only
  buffers) are not found, and their frees are not counted.
- It counts bytes, not pages or allocator blocks: what ``torch.cuda.memory_allocated`` reports on a GPU before the
  caching allocator rounds each block up, not what ``nvidia-smi`` or the operating system shows.
"""

from __future__ import annotations

import copy
import gc
import os
import re
import sys
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

from torchdoctor.explain_i18n import translator

__all__ = [
    "MemoryReport",
    "LiveBytesTracker",
    "format_bytes",
    "measure_memory",
    "peak_memory",
    "profiler_peak",
    "memory_budget",
    "estimate_step_peak",
    "step_memory_breakdown",
    "oom_numbers",
]

tr = translator("memory")  # printed text in the learner's language (torchdoctor/explain_i18n.py)


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


def _existing_storages() -> Iterator[torch.UntypedStorage]:
    """The storages of every plain tensor the garbage collector knows (parameters, gradients, optimizer state,
    inputs, and any tensor a Python object refers to). Fake and meta tensors hold no memory and are left out."""
    is_tensor_type: dict[type, bool] = {}
    for obj in gc.get_objects():
        kind = type(obj)  # type(), not isinstance: no __class__ lookups on odd objects
        known = is_tensor_type.get(kind)
        if known is None:
            known = is_tensor_type[kind] = issubclass(kind, torch.Tensor) and (
                kind.__torch_dispatch__ is torch.Tensor.__torch_dispatch__)
        if not known:
            continue
        tensors = [obj]
        if obj.is_leaf and obj.requires_grad and obj.grad is not None:
            tensors.append(obj.grad)
        for t in tensors:
            if t.is_meta or t.is_sparse:
                continue
            try:
                yield t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # tensors without a storage of their own
                continue


class LiveBytesTracker(TorchDispatchMode):
    """Dispatch mode that counts the bytes of tensor storages created while it is active.

    A storage counts from the operation that creates it until it is freed. Storages that already existed
    (parameters, inputs, tensors modified in place or viewed) are never counted as allocated. With
    ``count_existing_frees=True`` their frees are counted: on entry the tracker lists the storages of the tensors
    that Python holds, and ``live`` goes down by a storage's bytes when one of them is freed inside the block (so
    ``live`` can go below zero, and ``freed_existing`` says by how much). ``on_alloc`` is called with the bytes
    about to become live and may raise to refuse them.

    Only storages that operations return are seen: memory a kernel allocates and frees inside one operation
    (scratch buffers, as CPU convolution backward uses) is not.
    """

    def __init__(self, on_alloc: Callable[[int, int], None] | None = None, count_existing_frees: bool = False) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.freed_existing = 0
        self.by_op: dict[str, int] = {}
        self.peak_by_op: dict[str, int] = {}
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._refs: dict[int, weakref.ref] = {}
        self._on_alloc = on_alloc
        self._count_existing_frees = count_existing_frees

    def __enter__(self):  # type: ignore[no-untyped-def]
        if self._count_existing_frees:
            for st in _existing_storages():
                if st in self._seen:
                    continue
                nbytes = st.nbytes()
                self._seen[st] = 0
                if nbytes:
                    ref = weakref.ref(st, lambda r, n=nbytes: self._freed_existing(n, r))
                    self._refs[id(ref)] = ref
        return super().__enter__()

    def _freed(self, op: str, nbytes: int, ref: weakref.ref) -> None:
        self._refs.pop(id(ref), None)
        self.live -= nbytes
        self.by_op[op] -= nbytes

    def _freed_existing(self, nbytes: int, ref: weakref.ref) -> None:
        self._refs.pop(id(ref), None)
        self.live -= nbytes
        self.freed_existing += nbytes

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
        lines = [tr("peak {peak} above the start ({device})", peak=format_bytes(self.peak_bytes), device=self.device)]
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

    On "cpu" the peak is the highest point of (bytes of the storages that operations inside ``fn`` created and that
    are still alive) minus (bytes of storages alive before the call that ``fn`` freed, such as the gradients a
    warm model's ``zero_grad()`` drops, or tensors in reference cycles that a garbage collection during ``fn``
    frees). Scratch memory that a kernel allocates inside one operation is not seen (see
    the module's docstring): the figure is what the tensors need, a lower bound of what the process uses.
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
    tracker = LiveBytesTracker(count_existing_frees=True)
    with tracker:
        fn()
    return MemoryReport(tracker.peak, "cpu", tracker.peak_by_op)


def peak_memory(fn: Callable[[], Any], device: str | torch.device | None = None) -> int:
    """Peak bytes of tensor storage that ``fn()`` allocated above what was live before it ran (frees of what was
    live before included); see :func:`measure_memory` for what the CPU count sees and misses."""
    return measure_memory(fn, device).peak_bytes


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send what C++ code writes to file descriptor 2 to /dev/null for a while (the profiler's start and stop
    lines, and its complaint that a CPU-only machine has no GPU driver)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profiler_peak(fn: Callable[[], Any], warmup: Callable[[], Any] | None = None) -> int:
    """Peak bytes above the start of ``fn()`` as ``torch.profiler.profile(profile_memory=True)`` counts them on CPU.

    An independent check of :func:`peak_memory`: the profiler is told of every block the CPU allocator hands out
    and takes back, including scratch memory that kernels allocate inside one operation, which the dispatcher-level
    count cannot see. The profiler does not know the size of blocks allocated before it started, so their frees
    are lost; ``warmup`` (for a warm model: the previous step) runs under the profiler before ``fn`` and is not
    measured, so that the frees of what it allocated are counted.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    mark = "torchdoctor.profiler_peak"
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if warmup is not None:
            warmup()
        with record_function(mark):
            fn()
    events = []
    todo = list(prof.profiler.kineto_results.experimental_event_tree())
    while todo:
        event = todo.pop()
        events.append(event)
        todo.extend(event.children)
    window = next(e for e in events if e.name == mark)
    allocations = sorted((e.start_time_ns, e.extra_fields.alloc_size) for e in events
                         if type(e.extra_fields).__name__ == "_ExtraFields_Allocation")
    live = start = peak = 0
    for time_ns, size in allocations:
        if time_ns > window.end_time_ns:
            break
        if time_ns < window.start_time_ns:
            start = peak = live = live + size
            continue
        live += size
        peak = max(peak, live)
    return peak - start


def _simulated_oom(budget: int) -> Callable[[int, int], None]:
    """The check of a simulated budget. Its message's first sentence stays English in every language, as PyTorch's
    messages do: explain() and ``oom_numbers`` read it, and notebooks declare it; the explanation after it is
    translated."""

    def check(nbytes: int, live: int) -> None:
        if live + nbytes > budget:
            raise torch.OutOfMemoryError(
                f"Simulated CPU memory budget exceeded (torchdoctor.memory_budget): tried to allocate "
                f"{format_bytes(nbytes)} with {format_bytes(live)} of the {format_bytes(budget)} budget already "
                "in use. " + tr("Nothing ran out for real: this budget only counts tensors created inside the "
                                "block. On a GPU the same situation reads '{gpu_message}'.",
                                gpu_message="CUDA out of memory. Tried to allocate ...")
            )

    return check


@contextmanager
def memory_budget(budget_bytes: int, device: str | torch.device | None = None) -> Iterator[None]:
    """Raise ``torch.OutOfMemoryError`` when the tensors of the block would pass ``budget_bytes``.

    On CPU this is a simulated budget: only storages created inside the block count. Unlike :func:`peak_memory`, it
    does not subtract the frees of tensors that existed before the block (that would need a scan of every live
    object at each entry), so for a step that frees old tensors (a warm model's ``zero_grad()``) it is stricter than
    ``peak_memory`` by what the step frees; for a step that frees nothing old, a step fits exactly when its
    ``peak_memory`` is within the budget. On CUDA it is real:
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
# Each field, with every wording PyTorch has used for it (first match wins). The CUDA message since torch 2.1:
#   "Tried to allocate A. GPU 0 has a total capacity of T of which F is free. [Process N has P memory in use. ...]
#    [Including non-PyTorch memory, this process has U memory in use. ][L allowed; ]Of the allocated memory X is
#    allocated by PyTorch, [with Y allocated in private pools (e.g., CUDA Graphs), ]and R is reserved by PyTorch
#    but unallocated."  (torch 2.1 printed "total capacty"; "L allowed" appears under a memory fraction.)
# Before 2.1: "Tried to allocate A (GPU 0; T total capacity; X already allocated; F free; [L allowed; ]
#    V reserved in total by PyTorch)".
_OOM_FIELDS = {
    "tried to allocate": [r"[Tt]ried to allocate " + _SIZE],
    "total capacity": [r"total capaci?ty of " + _SIZE, _SIZE + r" total capacity"],
    "free": [r"of which " + _SIZE + r" is free", _SIZE + r" free[;)]"],
    "allowed": [_SIZE + r" allowed;"],
    "in use by this process": [r"this process has " + _SIZE + r" memory in use"],
    "allocated by PyTorch": [r"[Oo]f the allocated memory " + _SIZE + r" is allocated by PyTorch",
                             _SIZE + r" already allocated"],
    "allocated in private pools": [r"with " + _SIZE + r" allocated in private pools"],
    "reserved but unallocated": [_SIZE + r" is reserved by PyTorch but unallocated"],
    "reserved in total by PyTorch": [_SIZE + r" reserved in total by PyTorch"],
    "requested": [r"Requested size: " + _SIZE],
    "budget in use": [r"with " + _SIZE + r" of the"],
    "budget": [r"of the " + _SIZE + r" budget"],
}
_OTHER_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + r" memory in use")


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


def oom_numbers(message: str | BaseException) -> dict[str, int]:
    """The sizes an out-of-memory message states, in bytes, by what they mean.

    Reads every wording of PyTorch's CUDA message: today's ("Tried to allocate 2.00 GiB. GPU 0 has a total
    capacity of 7.79 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 6.72 GiB memory
    in use. Of the allocated memory 6.50 GiB is allocated by PyTorch, and 12.00 MiB is reserved by PyTorch but
    unallocated."), with the "1.50 GiB allowed;" clause a memory fraction adds
    (``torch.cuda.set_per_process_memory_fraction``, :func:`memory_budget`), with the processes the driver lists
    ("Process 2102 has 17.54 GiB memory in use.": other processes, or this one in a container, whose process ids
    differ from the driver's), torch 2.1's ("total capacty"), the wording before 2.1 ("(GPU 0; 11.17 GiB total
    capacity; 9.80 GiB already allocated; 310.81 MiB free; 10.12 GiB reserved in total by PyTorch)"), the
    allocator's memory-fraction rejection ("Requested size: ..."), and the simulated CPU budget's message of
    :func:`memory_budget`.

    Keys, present only when the message states them: "tried to allocate", "total capacity", "free", "allowed",
    "in use by this process", "in use by process <pid>" (one per listed process), "allocated by PyTorch" ("already
    allocated" before 2.1), "allocated in private pools", "reserved but unallocated", "reserved in total by
    PyTorch" (before 2.1: allocated plus cached), "requested", "budget in use", "budget". The sizes are as printed
    (rounded to two decimals). A message with none of them gives ``{}``.
    """
    text = str(message)
    found = {}
    for name, patterns in _OOM_FIELDS.items():
        for pattern in patterns:
            match = re.search(pattern, text)
            if match:
                found[name] = _bytes(match.group(1), match.group(2))
                break
    for pid, number, unit in _OTHER_PROCESS.findall(text):
        found[f"in use by process {pid}"] = _bytes(number, unit)
    return found
