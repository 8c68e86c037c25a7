"""The entry cuda-in-forked-worker (chapter 06 §12): its message is the one the pinned torch raises, explain finds it
inside a DataLoader worker's report before the generic worker-exception entry, the chapter's fix works in forked
workers, and what marks a process is asking about CUDA at all (checked on a CUDA build without a GPU, the CPU
runner; test_catalog.py raises the reproducer itself on every runner)."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torchdoctor import explain
from torchdoctor.catalog import get_entry

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="DataLoader workers are forked on Linux only")

MESSAGE = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
           "'spawn' start method")


def test_the_message_is_the_one_the_pinned_torch_raises():
    source = Path(torch.cuda.__file__).read_text()
    literals = re.search(r'raise RuntimeError\(\s*"(Cannot re-initialize CUDA[^"]*)"\s*"([^"]*)"\s*\)', source)
    assert literals is not None, "torch/cuda/__init__.py no longer raises the message as two string literals"
    assert "".join(literals.groups()) == MESSAGE == get_entry("cuda-in-forked-worker").example


def test_explain_finds_it_in_a_worker_report_before_the_generic_entry():
    """As pasted text: the DataLoader's message quoting the worker's traceback (test_catalog.py explains the live
    exception of the reproducer, its message and its formatted traceback)."""
    report = ("Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
              '  File "torch/cuda/__init__.py", line 579, in _lazy_init\n    raise RuntimeError(\n'
              f"RuntimeError: {MESSAGE}\n")
    for text in (f"RuntimeError: {report}", report, f"RuntimeError: {MESSAGE}"):
        assert explain(text).id == "cuda-in-forked-worker", text
    assert explain("RuntimeError: Caught RuntimeError in DataLoader worker process 0.").id == "worker-exception"


@pytest.mark.skipif(not torch.backends.cuda.is_built() or torch.cuda.is_available(),
                    reason="needs a CUDA build of PyTorch on a machine without a GPU")
def test_asking_is_available_is_what_marks_the_parent_without_a_gpu():
    """In a fresh process a forked worker that touches CUDA tries to start it (and finds no driver); after the parent
    asked torch.cuda.is_available(), the worker is refused with this entry's message instead; and the chapter's fix
    (CPU tensors from the workers) loads. Run in subprocesses: forked workers that touch CUDA leave nothing behind in
    the test process (in the full suite, a later test's forked worker once crashed after they ran here)."""
    script = textwrap.dedent("""\
        import sys
        import torch
        from torch.utils.data import DataLoader, Dataset


        class OnTheGpu(Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                return torch.zeros(1, device="cuda")


        class OnTheCpu(OnTheGpu):  # the fix: CPU tensors from the workers, the loop moves the batches
            def __getitem__(self, i):
                return torch.full((1,), float(i))


        if sys.argv[1] != "fresh":
            torch.cuda.is_available()
        dataset = OnTheCpu() if sys.argv[1] == "fixed" else OnTheGpu()
        try:
            batches = list(DataLoader(dataset, batch_size=1, num_workers=1, multiprocessing_context="fork"))
            print("loaded", torch.cat(batches).flatten().tolist())
        except RuntimeError as err:
            print(str(err).rstrip().splitlines()[-1])
    """)
    last_lines = {}
    for case in ("fresh", "asked", "fixed"):
        out = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, timeout=300)
        last_lines[case] = out.stdout.strip()
    assert "Found no NVIDIA driver" in last_lines["fresh"], last_lines
    assert last_lines["asked"] == f"RuntimeError: {MESSAGE}", last_lines
    assert last_lines["fixed"] == "loaded [0.0, 1.0]", last_lines
