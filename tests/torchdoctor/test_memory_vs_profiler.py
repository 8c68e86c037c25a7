"""peak_memory against two independent measurements: torch.profiler's allocation events and resident memory.

peak_memory counts tensor storages at the dispatcher. The profiler (profile_memory=True) is told of every block the
CPU allocator hands out and takes back, and the operating system's resident set size (RSS) sees every page the
process touches. Where no kernel allocates scratch memory inside an operation (linear layers), all three agree; CPU
convolution backward allocates scratch memory inside the kernel, which only the profiler and RSS see.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor.memory import LiveBytesTracker, peak_memory, profiler_peak

REPO = Path(__file__).resolve().parents[2]


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def chapter_cnn() -> nn.Module:
    """Chapter 03's CNN: a strided convolution, six convolution blocks at 16 x 16, a linear head."""
    torch.manual_seed(0)

    def block(c_in: int, stride: int = 1) -> nn.Module:
        return nn.Sequential(nn.Conv2d(c_in, 16, 3, stride=stride, padding=1), nn.ReLU())

    return nn.Sequential(block(3, 2), nn.Sequential(*[block(16) for _ in range(6)]), nn.Flatten(),
                         nn.Linear(16 * 16 * 16, 10))


def training_step(make, batch: int):
    model = make()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)

    def step() -> None:
        optimizer.zero_grad()  # set_to_none=True: a warm model's gradients are freed here
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return model, step


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_agrees_with_the_profiler_where_kernels_allocate_nothing_inside(one_thread):
    # Both count the same allocations of the same tensors, so the only room for a difference is the order of frees
    # inside one operation: 1% is generous (measured: 0.0%).
    ours = peak_memory(training_step(mlp, 256)[1], device="cpu")
    theirs = profiler_peak(training_step(mlp, 256)[1])
    assert abs(ours - theirs) <= 0.01 * theirs, (ours, theirs)


def test_misses_scratch_memory_inside_convolution_backward(one_thread):
    # CPU convolution backward allocates scratch buffers inside the kernel: the profiler sees them, the dispatcher
    # does not. On this CNN the count is about a tenth lower (measured 0.90 of the profiler's peak with torch 2.14.1);
    # the bounds say "lower, by a modest share", wide enough for other oneDNN builds.
    ours = peak_memory(training_step(chapter_cnn, 128)[1], device="cpu")
    theirs = profiler_peak(training_step(chapter_cnn, 128)[1])
    assert 0.8 * theirs <= ours < 0.97 * theirs, (ours, theirs)


def test_a_warm_models_zero_grad_lowers_the_count(one_thread):
    model, step = training_step(mlp, 256)
    step()  # warm: gradients and momentum buffers exist
    gradient_bytes = sum(p.grad.nbytes for p in model.parameters())
    ours = peak_memory(step, device="cpu")
    model2, step2 = training_step(mlp, 256)
    theirs = profiler_peak(step2, warmup=step2)  # the warm-up tells the profiler the gradients' sizes
    assert abs(ours - theirs) <= 0.01 * theirs + 4096, (ours, theirs)
    # Counting only what the step allocates (the frees of the old gradients ignored) overstates by the gradients:
    with LiveBytesTracker() as blind:
        step()
    assert blind.peak >= ours + 0.9 * gradient_bytes, (blind.peak, ours, gradient_bytes)


RSS_SCRIPT = r"""
import gc, json, sys
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
from tests.torchdoctor.test_memory_vs_profiler import chapter_cnn, mlp, training_step
from torchdoctor.memory import peak_memory


def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def rss_peak(step):
    gc.collect()
    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak resident size (VmHWM) starts again from the current one
    step()
    return status("VmHWM") - before


out = {}
cases = (("mlp", mlp, 128, False), ("cnn", chapter_cnn, 128, False), ("mlp warm", mlp, 256, True))
for name, make, batch, warm in cases:
    for _ in range(2):
        training_step(make, batch)[1]()  # libraries loaded, thread pools and allocator caches warm
    steps = [training_step(make, batch)[1] for _ in range(2)]
    if warm:
        for step in steps:
            step()
    out[name] = {"rss": rss_peak(steps[0]), "ours": peak_memory(steps[1], device="cpu")}
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_agrees_with_resident_memory():
    # glibc returns freed memory to the system only for blocks it mapped on their own and when trimming; these two
    # settings make every block above 64 KiB a mapping of its own and trim at once, so resident memory follows the
    # live blocks (to the 4 KiB page).
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(REPO)], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    if run.returncode != 0 and "clear_refs" in run.stderr:
        pytest.skip("cannot reset the peak resident size here (/proc/self/clear_refs)")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    mib = 2**20
    # Linear layers: the same bytes, up to page rounding and the interpreter's own small objects (measured 0.2%).
    assert abs(got["mlp"]["ours"] - got["mlp"]["rss"]) <= 0.03 * got["mlp"]["rss"], got["mlp"]
    # Convolutions: resident memory also holds the kernels' scratch buffers (measured: the count is 0.90 of it).
    assert 0.8 * got["cnn"]["rss"] <= got["cnn"]["ours"] < 0.97 * got["cnn"]["rss"], got["cnn"]
    # A warm step: the old gradients freed by zero_grad are counted (else the count would be 16 MiB higher); what
    # remains is small, so the tolerance is absolute: 1 MiB, a sixteenth of the gradients (measured: 0.1 MiB).
    assert abs(got["mlp warm"]["ours"] - got["mlp warm"]["rss"]) <= 1 * mib, got["mlp warm"]
