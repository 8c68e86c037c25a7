"""torchdoctor: the companion library of the Torch Doctor course.

``explain(error)`` diagnoses PyTorch errors from the course's catalog; ``%load_ext torchdoctor`` does it for
every failing notebook cell; the submodules hold the debugging tools (shapes, gradients, memory, sanity,
devices) and the cheat sheet.
"""

from torchdoctor.catalog import CATALOG, CHAPTERS, ErrorEntry, by_chapter, chapter_title, get_entry
from torchdoctor.devices import pick_device, seed_everything
from torchdoctor.explain import Diagnosis, explain
from torchdoctor.gradients import find_nonfinite, global_grad_norm, grad_norms
from torchdoctor.ipython_extension import load_ipython_extension, unload_ipython_extension
from torchdoctor.memory import (
    estimate_step_peak,
    format_bytes,
    measure_memory,
    memory_budget,
    oom_numbers,
    peak_memory,
    step_memory_breakdown,
)
from torchdoctor.quiz import answered, check_answer, checking, load_hints, reveal
from torchdoctor.raised import track as _track_raised
from torchdoctor.shapes import expect_shape, shape_table

_track_raised()  # in IPython: a chapter's summary shows the messages its cells really raised

__version__ = "0.1.0"

__all__ = [
    "CATALOG",
    "CHAPTERS",
    "Diagnosis",
    "ErrorEntry",
    "answered",
    "by_chapter",
    "chapter_title",
    "check_answer",
    "checking",
    "estimate_step_peak",
    "expect_shape",
    "explain",
    "find_nonfinite",
    "format_bytes",
    "get_entry",
    "global_grad_norm",
    "grad_norms",
    "load_hints",
    "load_ipython_extension",
    "measure_memory",
    "memory_budget",
    "oom_numbers",
    "peak_memory",
    "pick_device",
    "reveal",
    "seed_everything",
    "shape_table",
    "step_memory_breakdown",
    "unload_ipython_extension",
]
