"""peak_memory, memory_budget and estimate_step_peak on a small CNN training step."""

import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed._tools.mem_tracker import MemTracker

from torchdoctor import estimate_step_peak, measure_memory, memory_budget, peak_memory


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )


def training_step(batch: int, bf16: bool = False):
    torch.manual_seed(0)
    model = small_cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return model, optimizer, x, y, step


def test_orders_batch_sizes_and_precisions():
    fp32_32 = peak_memory(training_step(32)[-1], device="cpu")
    fp32_128 = peak_memory(training_step(128)[-1], device="cpu")
    bf16_128 = peak_memory(training_step(128, bf16=True)[-1], device="cpu")
    assert fp32_128 > 3 * fp32_32
    assert bf16_128 < fp32_128


@pytest.mark.parametrize("batch,bf16", [(32, False), (128, False), (128, True)])
def test_agrees_with_torch_distributed_mem_tracker(batch, bf16):
    ours = peak_memory(training_step(batch, bf16)[-1], device="cpu")
    model, optimizer, x, y, step = training_step(batch, bf16)
    tracker = MemTracker()
    tracker.track_external(model, optimizer, x, y)
    cpu = torch.device("cpu")
    with tracker:
        start = tracker.get_tracker_snapshot("current")[cpu]["Total"]
        step()
    theirs = tracker.get_tracker_snapshot("peak")[cpu]["Total"] - start
    assert abs(ours - theirs) <= 0.05 * theirs, (ours, theirs)


def test_report_breakdown_and_only_new_storages_count():
    weights = torch.randn(1000, 1000)  # 4 MB already live: not counted
    report = measure_memory(lambda: (weights @ weights).sum(), device="cpu")
    assert report.peak_bytes == 4_000_000 + 4  # the product, then the 4-byte sum while it is alive
    assert report.breakdown["mm"] == 4_000_000
    assert "peak 3.81 MiB" in str(report)
    assert peak_memory(lambda: weights.add_(1).t(), device="cpu") == 0  # in place and views allocate nothing


def test_memory_budget_raises_a_real_oom_on_cpu():
    with memory_budget(10_000, device="cpu"):
        torch.ones(1000)  # 4000 bytes fit
    with pytest.raises(torch.OutOfMemoryError, match="Simulated CPU memory budget") as info:
        with memory_budget(10_000, device="cpu"):
            keep = torch.ones(2000)  # noqa: F841
            torch.ones(1000)
    assert "7.81 KiB" in str(info.value) and "9.77 KiB budget" in str(info.value)
    with pytest.raises(ValueError, match="positive"):
        with memory_budget(0):
            pass


def test_memory_budget_in_backward_and_step():
    # Garbage left by earlier tests, collected during a measured step, would lower peak_memory (it counts frees of
    # older tensors) but not memory_budget (it does not): collect it first, so both see the same step.
    gc.collect()
    step = training_step(32)[-1]
    needed = peak_memory(step, device="cpu")
    step = training_step(32)[-1]
    with pytest.raises(torch.OutOfMemoryError):
        with memory_budget(needed // 2, device="cpu"):
            step()
    step = training_step(32)[-1]
    gc.collect()
    with memory_budget(needed, device="cpu"):
        step()


def test_what_if_estimate_matches_a_real_step_without_allocating():
    model, optimizer, x, y, step = training_step(32)
    real = peak_memory(step, device="cpu")
    fresh = training_step(32)[0]

    def sgd(params):
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)

    estimate_32 = estimate_step_peak(fresh, (x, y), F.cross_entropy, 32, sgd)
    assert abs(estimate_32 - real) <= 0.05 * real
    before = [p.detach().clone() for p in fresh.parameters()]
    big = estimate_step_peak(fresh, (x, y), F.cross_entropy, 4096, sgd)  # ~0.9 GB if it were real
    assert big > 100 * estimate_32 / 2
    assert estimate_step_peak(fresh, (x, y), F.cross_entropy, 4096, sgd, autocast_dtype=torch.bfloat16) < big
    assert all(torch.equal(a, b) for a, b in zip(before, fresh.parameters(), strict=True))
    assert all(p.grad is None for p in fresh.parameters())


@pytest.mark.cuda
def test_cuda_accounting_and_real_budget():
    model = small_cnn().cuda()
    x = torch.randn(64, 3, 32, 32, device="cuda")
    assert peak_memory(lambda: model(x).sum().backward(), device="cuda") > 0
    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
        with memory_budget(64 * 2**20, device="cuda"):
            torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")


def test_cuda_budget_uses_an_indexed_device_and_restores_the_fraction(monkeypatch):
    """No GPU needed: the torch.cuda calls are recorded. set_per_process_memory_fraction rejects 'cuda'
    without an index, and a fraction set by the user before the block must survive it."""
    calls = []
    fake = {
        "is_available": lambda: True,
        "current_device": lambda: 0,
        "get_device_properties": lambda dev: type("Props", (), {"total_memory": 1000})(),
        "get_per_process_memory_fraction": lambda dev: 0.8,
        "set_per_process_memory_fraction": lambda fraction, dev: calls.append((fraction, dev)),
        "empty_cache": lambda: None,
    }
    for name, fn in fake.items():
        monkeypatch.setattr(torch.cuda, name, fn)
    with memory_budget(250, device="cuda"):
        pass
    assert calls == [(0.25, torch.device("cuda", 0)), (0.8, torch.device("cuda", 0))]


def test_bad_arguments_and_meta_models():
    with pytest.raises(ValueError, match="positive number of bytes"):
        with memory_budget("1GB"):
            pass
    model = nn.Linear(3, 3, device="meta")
    inputs = (torch.randn(2, 3, device="meta"), torch.randn(2, 3, device="meta"))
    assert estimate_step_peak(model, inputs, F.mse_loss, 4) == estimate_step_peak(
        nn.Linear(3, 3), (torch.randn(2, 3), torch.randn(2, 3)), F.mse_loss, 4)
    with pytest.raises(ValueError, match="batch_size must be an int"):
        estimate_step_peak(nn.Linear(3, 3), (torch.randn(2, 3), torch.randn(2, 3)), F.mse_loss, 2.5)


def test_step_breakdown_names_what_holds_memory():
    from torchdoctor.memory import step_memory_breakdown

    model, _, x, y, _ = training_step(32)
    n_params = sum(p.numel() for p in model.parameters())
    sgd = step_memory_breakdown(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, F.cross_entropy, "cpu")
    assert sgd["parameters"] == sgd["gradients"] == 4 * n_params
    assert sgd["optimizer state"] == 0
    # conv1 output 32x16x32x32 floats is one of the saved activations
    assert sgd["activations"] > 32 * 16 * 32 * 32 * 4
    assert sgd["peak"] >= sgd["activations"] + sgd["gradients"]
    adam = step_memory_breakdown(model, torch.optim.Adam(model.parameters()), x, y, F.cross_entropy, "cpu")
    assert 2 * 4 * n_params <= adam["optimizer state"] <= 2 * 4 * n_params + 64  # exp_avg, exp_avg_sq (+ step)
    fresh = training_step(32)
    assert abs(sgd["peak"] - peak_memory(fresh[-1], device="cpu")) <= 0.05 * sgd["peak"]


def test_oom_numbers_reads_todays_cuda_message_and_the_simulated_one():
    from torchdoctor.catalog.memory import CUDA_OOM
    from torchdoctor.memory import oom_numbers

    numbers = oom_numbers(CUDA_OOM.example)
    assert numbers["tried to allocate"] == 2 * 2**30
    assert numbers["reserved but unallocated"] == 12 * 2**20
    assert set(numbers) == {"tried to allocate", "total capacity", "free", "in use by this process",
                            "allocated by PyTorch", "reserved but unallocated"}
    with pytest.raises(torch.OutOfMemoryError) as info:
        with memory_budget(10_000, device="cpu"):
            keep = torch.ones(2000)  # noqa: F841
            torch.ones(1000)
    assert oom_numbers(info.value) == {"tried to allocate": round(3.91 * 1024), "budget in use": round(7.81 * 1024),
                                       "budget": round(9.77 * 1024)}
    assert oom_numbers("CUDA out of memory. Allocation was preemptively rejected because it would exceed "
                       "per_process_memory_fraction limit. Requested size: 1.50 GiB") == {"requested": 3 * 2**29}
    assert oom_numbers("KeyError: 'lr'") == {}


# Real messages, as PyTorch printed them (numbers from reports of real runs), one per wording.
MEMORY_FRACTION_AND_OTHER_PROCESS = (
    "CUDA out of memory. Tried to allocate 996.00 MiB. GPU 0 has a total capacity of 44.43 GiB of which 9.06 GiB is "
    "free. Process 2102129 has 17.54 GiB memory in use. Including non-PyTorch memory, this process has 17.81 GiB "
    "memory in use. 17.69 GiB allowed; Of the allocated memory 17.44 GiB is allocated by PyTorch, and 59.88 MiB is "
    "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
CONTAINER_TORCH_2_1 = (  # torch 2.1: "capacty"; in a container the driver lists this process by its host pid
    "CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacty of 14.75 GiB of which 1.66 GiB is "
    "free. Process 414660 has 13.09 GiB memory in use. Of the allocated memory 10.09 GiB is allocated by PyTorch, "
    "and 1.92 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")
PRIVATE_POOLS_NOTHING_FREE = (
    "HIP out of memory. Tried to allocate 76.00 MiB. GPU 0 has a total capacity of 191.69 GiB of which 0 bytes is "
    "free. 1.20 GiB allowed; Of the allocated memory 1.14 GiB is allocated by PyTorch, with 17.00 MiB allocated in "
    "private pools (e.g., HIP Graphs), and 18.63 MiB is reserved by PyTorch but unallocated.")
BEFORE_2_1 = (
    "CUDA out of memory. Tried to allocate 3.81 GiB (GPU 0; 14.58 GiB total capacity; 5.28 GiB already allocated; "
    "3.63 GiB free; 10.58 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
    "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")


def gib(x: float) -> int:
    return round(x * 2**30)


def mib(x: float) -> int:
    return round(x * 2**20)


def test_oom_numbers_reads_every_wording():
    from torchdoctor.memory import oom_numbers

    assert oom_numbers(MEMORY_FRACTION_AND_OTHER_PROCESS) == {
        "tried to allocate": mib(996), "total capacity": gib(44.43), "free": gib(9.06), "allowed": gib(17.69),
        "in use by this process": gib(17.81), "in use by process 2102129": gib(17.54),
        "allocated by PyTorch": gib(17.44), "reserved but unallocated": mib(59.88)}
    assert oom_numbers(CONTAINER_TORCH_2_1) == {
        "tried to allocate": gib(1.95), "total capacity": gib(14.75), "free": gib(1.66),
        "in use by process 414660": gib(13.09), "allocated by PyTorch": gib(10.09),
        "reserved but unallocated": gib(1.92)}
    assert oom_numbers(PRIVATE_POOLS_NOTHING_FREE) == {
        "tried to allocate": mib(76), "total capacity": gib(191.69), "free": 0, "allowed": gib(1.20),
        "allocated by PyTorch": gib(1.14), "allocated in private pools": mib(17),
        "reserved but unallocated": mib(18.63)}
    old = {"tried to allocate": gib(3.81), "total capacity": gib(14.58), "allocated by PyTorch": gib(5.28),
           "free": gib(3.63), "reserved in total by PyTorch": gib(10.58)}
    assert oom_numbers(BEFORE_2_1) == old
    # Under a memory fraction the allocator of those versions put "<size> allowed; " after the free memory.
    assert oom_numbers(BEFORE_2_1.replace("free; ", "free; 6.00 GiB allowed; ")) == {**old, "allowed": gib(6)}
    assert oom_numbers(RuntimeError(CONTAINER_TORCH_2_1))["free"] == gib(1.66)  # the exception itself works too
