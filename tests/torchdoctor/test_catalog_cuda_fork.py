"""The entry cuda-in-forked-worker (chapter 06 §12): its message is the one the pinned torch raises, explain finds it
inside a DataLoader worker's report before the generic worker-exception entry, the chapter's fix works in forked
workers, and what marks a process is asking about CUDA at all (checked on a CUDA build without a GPU, the CPU
runner; test_catalog.py raises the reproducer itself on every runner)."""

import re
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from torchdoctor import explain
from torchdoctor.catalog import data_loading, get_entry

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="DataLoader workers are forked on Linux only")

MESSAGE = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
           "'spawn' start method")


def test_the_message_is_the_one_the_pinned_torch_raises():
    source = Path(torch.cuda.__file__).read_text()
    literals = re.search(r'raise RuntimeError\(\s*"(Cannot re-initialize CUDA[^"]*)"\s*"([^"]*)"\s*\)', source)
    assert literals is not None, "torch/cuda/__init__.py no longer raises the message as two string literals"
    assert "".join(literals.groups()) == MESSAGE == get_entry("cuda-in-forked-worker").example


def test_explain_finds_it_in_a_worker_report_before_the_generic_entry(raised):
    exc = raised(data_loading.cuda_in_forked_worker) if torch.backends.cuda.is_built() else None
    report = (str(exc) if exc is not None else
              "Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
              '  File "torch/cuda/__init__.py", line 579, in _lazy_init\n    raise RuntimeError(\n'
              f"RuntimeError: {MESSAGE}\n")
    assert report.startswith("Caught RuntimeError in DataLoader worker process 0.")
    for text in (f"RuntimeError: {report}", report, *(["".join(traceback.format_exception(exc))] if exc else [])):
        assert explain(text).id == "cuda-in-forked-worker", text
    assert explain(f"RuntimeError: {MESSAGE}").id == "cuda-in-forked-worker"


class _CpuSamples(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((3,), float(i))


def test_the_fix_works_in_forked_workers_after_cuda_was_asked_for():
    torch.cuda.is_available()           # marks this process on a CUDA build, as in the reproducer
    batches = list(DataLoader(_CpuSamples(), batch_size=4, num_workers=2, multiprocessing_context="fork"))
    assert torch.equal(torch.cat(batches), torch.arange(8.0).repeat_interleave(3).view(8, 3))


@pytest.mark.skipif(not torch.backends.cuda.is_built() or torch.cuda.is_available(),
                    reason="needs a CUDA build of PyTorch on a machine without a GPU")
def test_asking_is_available_is_what_marks_the_parent_without_a_gpu():
    """In a fresh process a forked worker that touches CUDA tries to start it (and finds no driver); after the parent
    asked torch.cuda.is_available(), the worker is refused with this entry's message instead."""
    script = textwrap.dedent("""\
        import sys
        import torch
        from torch.utils.data import DataLoader, Dataset


        class OnTheGpu(Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                return torch.zeros(1, device="cuda")


        if sys.argv[1] == "asked":
            torch.cuda.is_available()
        try:
            next(iter(DataLoader(OnTheGpu(), batch_size=1, num_workers=1, multiprocessing_context="fork")))
        except RuntimeError as err:
            print(str(err).rstrip().splitlines()[-1])
    """)
    last_lines = {}
    for case in ("fresh", "asked"):
        out = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, timeout=300)
        last_lines[case] = out.stdout.strip()
    assert "Found no NVIDIA driver" in last_lines["fresh"], last_lines
    assert last_lines["asked"] == f"RuntimeError: {MESSAGE}", last_lines
