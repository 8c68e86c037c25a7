"""Chapter 08 (accuracy): losses used with the wrong kind of output.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "accuracy"


def bce_input_range() -> None:
    logits = torch.tensor([2.5, -1.0, 0.3])
    F.binary_cross_entropy(logits, torch.tensor([1.0, 0.0, 1.0]))


BCE_INPUT_RANGE = ErrorEntry(
    id="bce-input-range",
    title="BCELoss got values outside [0, 1]",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"all elements of (?P<which>input|target) should be between 0 and 1",
    example="all elements of input should be between 0 and 1",
    cause="nn.BCELoss expects probabilities but got raw scores (logits) from a model without a final sigmoid, "
    "or targets that are not 0/1.",
    fix="Return logits and use nn.BCEWithLogitsLoss (numerically stable); keep targets as floats in [0, 1].",
    reproducer=bce_input_range,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    BCE_INPUT_RANGE,
)
