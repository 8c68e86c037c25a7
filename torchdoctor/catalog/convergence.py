"""Chapter 07 (convergence): training that diverges or is set up in the wrong order.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry, warnings_as_errors

CHAPTER = "convergence"


def clip_nonfinite() -> None:
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([float("nan"), 1.0])
    nn.utils.clip_grad_norm_([p], max_norm=1.0, error_if_nonfinite=True)


CLIP_NONFINITE = ErrorEntry(
    id="clip-nonfinite",
    title="Gradient norm is NaN or Inf while clipping",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"The total norm of order (?P<order>[\w.]+) for gradients from `parameters` is non-finite",
    example="The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be "
    "clipped.",
    cause="Some gradient is already NaN or Inf, so clipping cannot rescue the step: the loss diverged "
    "(learning rate too high), the data contains NaN/Inf, or an operation like log(0) or sqrt(0) "
    "produced it.",
    fix="Find the first non-finite value (torchdoctor.gradients.find_nonfinite, detect_anomaly), check the "
    "data with torch.isfinite(x).all(), and lower the learning rate; skip the step only as a last resort.",
    reproducer=clip_nonfinite,
)


def scheduler_before_optimizer() -> None:
    p = nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with warnings_as_errors(UserWarning):
        scheduler.step()


SCHEDULER_BEFORE_OPTIMIZER = ErrorEntry(
    id="scheduler-before-optimizer",
    title="lr_scheduler.step() called before optimizer.step()",
    chapter=CHAPTER,
    exception_types=("UserWarning",),
    pattern=r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`",
    example="Detected call of `lr_scheduler.step()` before `optimizer.step()`.",
    cause="The scheduler was stepped before the optimizer, so the first value of the schedule is skipped.",
    fix="Call optimizer.step() first, then scheduler.step() (per epoch or per batch, as the scheduler expects).",
    reproducer=scheduler_before_optimizer,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    CLIP_NONFINITE,
    SCHEDULER_BEFORE_OPTIMIZER,
)
