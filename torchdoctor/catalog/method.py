"""Chapter 00 (method): errors raised by the debugging tools and by your own checks.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "method"


def anomaly_nan() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
        warnings.filterwarnings("ignore", message="Error detected in")  # the forward traceback, shown in class
        with torch.autograd.detect_anomaly():
            x = torch.zeros(3, requires_grad=True)
            # sqrt's gradient at 0 is inf, and inf * 0 is nan. A plain inf gradient would not be flagged:
            # anomaly mode only checks for nan.
            (torch.sqrt(x) * 0).sum().backward()


ANOMALY_NAN = ErrorEntry(
    id="anomaly-nan",
    title="Anomaly detection found NaN in a backward function",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Function '(?P<function>\w+)' returned nan values in its (?P<index>\d+)\w* output",
    example="Function 'SqrtBackward0' returned nan values in its 0th output.",
    cause="torch.autograd.detect_anomaly() checks every backward function; this one produced NaN. The "
    "warning printed just before the error shows the forward line that created the node.",
    fix="Look at the forward traceback printed with the error: guard the operation (clamp before sqrt or "
    "log, add an epsilon to denominators), and turn anomaly detection off again once fixed: it is slow.",
    reproducer=anomaly_nan,
)


def nonfinite_forward() -> None:
    from torchdoctor.gradients import find_nonfinite

    class Log(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.log(x)

    model = nn.Sequential(nn.Identity(), Log())
    with find_nonfinite(model):
        model(torch.tensor([[1.0, -1.0]]))


def _nonfinite_fix(g: Mapping[str, str]) -> str:
    if g["input"] == "was finite":
        return (
            f"{g['module']} turned a finite input into {g['kind']}: look at its forward (log or sqrt of negative "
            f"numbers, division by zero, overflow) and guard it with a clamp or an epsilon."
        )
    return (
        f"The input of {g['module']} already held {g['kind']}: check the data (torch.isfinite(x).all()) and "
        f"whatever ran before the model."
    )


NONFINITE_FORWARD = ErrorEntry(
    id="nonfinite-forward",
    title="NaN or Inf in a module's output (torchdoctor.find_nonfinite)",
    chapter=CHAPTER,
    exception_types=("NonFiniteError",),
    pattern=r"first (?P<kind>NaN|Inf) in the output of (?P<module>.+?): its input (?P<input>was finite|already held)",
    example="first NaN in the output of 1 (LogFeatures): its input was finite, so this module created it",
    cause="find_nonfinite's forward hooks stopped the forward pass at the first module whose output holds NaN or "
    "Inf. If its input was finite, that module made it (log or sqrt of a negative number, a division by zero, "
    "an overflow); if its input already held NaN/Inf, the data or code outside the modules did.",
    fix="Look at that module's forward: clamp before log/sqrt, add an epsilon to denominators, lower the "
    "learning rate if the weights have grown huge; when the input was already bad, check the data with "
    "torch.isfinite(x).all() before the model.",
    reproducer=nonfinite_forward,
    specific_fix=_nonfinite_fix,
)


def own_assert_failed() -> None:
    x = torch.zeros(4, 3, dtype=torch.float64)
    assert x.dtype == torch.float32, f"x: expected dtype float32, got {x.dtype}"


OWN_ASSERT_FAILED = ErrorEntry(
    id="own-assert-failed",
    title="A check of your own failed (assert with an 'expected ..., got ...' message)",
    chapter=CHAPTER,
    exception_types=("AssertionError",),
    # "<what>: expected ..., got ...", the form chapter 00 teaches; anchored so that a PyTorch message pasted
    # without its type ("..., expected input[...] to have 3 channels, but got 1") is never taken for an assert.
    pattern=r"(?i)^\s*[\w.\[\]()' -]{1,60}: expected\b.*\bgot\b",
    example="x: expected dtype float32, got torch.float64",
    cause="An assert written to catch a wrong value at a boundary (a batch entering the model, a tensor before the "
    "loss) failed: the value is not what the code after it assumes. The message is the one its author wrote.",
    fix="Read what was expected and what was found, then fix where the value comes from (e.g. .float() after "
    "NumPy, .long() for class labels, a reshape that keeps the batch dimension); do not delete the assert.",
    reproducer=own_assert_failed,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    ANOMALY_NAN,
    NONFINITE_FORWARD,
    OWN_ASSERT_FAILED,
)
