"""Chapter 10 (case study): errors met while debugging a hand-written linear-regression script.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "case-study"


def cat_zero_dim() -> None:
    # Predictions collected batch by batch with .squeeze(): the last batch holds one sample, and squeeze()
    # removes its batch dimension too.
    model = nn.Linear(4, 1)
    batches = [torch.randn(3, 4), torch.randn(1, 4)]
    with torch.no_grad():
        torch.cat([model(xb).squeeze() for xb in batches])


def _cat_zero_dim(g: Mapping[str, str]) -> str:
    return (
        f"The tensor at position {g['position']} of the list has no dimension at all (shape ()). If it is a model "
        f"output of a batch of one that went through .squeeze(), squeeze only the dimension you mean: "
        f".squeeze(-1) keeps the batch dimension. If the list is meant to hold scalars (one loss per step), use "
        f"torch.stack(values) instead of torch.cat."
    )


CAT_ZERO_DIM = ErrorEntry(
    id="cat-zero-dim",
    title="torch.cat got a tensor without dimensions (a batch of one squeezed away)",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"zero-dimensional tensor \(at position (?P<position>\d+)\) cannot be concatenated",
    example="zero-dimensional tensor (at position 15) cannot be concatenated",
    cause="torch.cat joins tensors along an existing dimension, and one tensor in the list has none (shape ()). "
    "The usual source is .squeeze() without an argument on an (N, 1) model output: for a batch of one it "
    "removes the batch dimension too, so the last, one-sample batch of a data set comes out as a scalar.",
    fix="Squeeze only the dimension you mean: pred.squeeze(-1) (or pred.view(-1)) keeps the batch dimension. To "
    "collect scalars such as per-step losses, use torch.stack instead of torch.cat.",
    reproducer=cat_zero_dim,
    specific_fix=_cat_zero_dim,
)


def matvec_size_mismatch() -> None:
    x = torch.randn(32, 4)
    w = torch.randn(3)  # a hand-written weight vector of the wrong length
    x @ w


def _matvec(g: Mapping[str, str]) -> str:
    return (
        f"A ({g['rows']}x{g['cols']}) matrix was multiplied by a vector of {g['vec']} values: the vector must "
        f"have {g['cols']} (one weight per column, that is per feature). Print both shapes; either the weight was "
        f"created with the wrong length or the data has a different number of features than you think. A "
        f"reshape will not fix this; the sizes themselves differ."
    )


MATVEC_SIZE_MISMATCH = ErrorEntry(
    id="matvec-size-mismatch",
    title="Matrix times vector with the wrong vector length",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"size mismatch, got input \((?P<out>\d+)\), mat \((?P<rows>\d+)x(?P<cols>\d+)\), "
    r"vec \((?P<vec>\d+)\)",
    example="size mismatch, got input (32), mat (32x4), vec (3)",
    cause="A matrix-vector product (x @ w or torch.mv with a 1-D w) needs the vector to have as many values as "
    "the matrix has columns. In a hand-written linear model x is (batch, features) and w one weight per "
    "feature, so the weight has a different length than the data has features.",
    fix="Print x.shape and w.shape. Create the weight from the data (torch.zeros(x.shape[1])), or fix the data "
    "if a feature column was lost or added. Reshaping does not help: the sizes differ.",
    reproducer=matvec_size_mismatch,
    specific_fix=_matvec,
)


def tensor_from_strings() -> None:
    rows = [["5.1", "3.5"], ["4.9", "3.0"]]  # numbers read from a text file and never converted
    torch.tensor(rows)


TENSOR_FROM_STRINGS = ErrorEntry(
    id="tensor-from-strings",
    title="torch.tensor got strings (numbers read from text and never converted)",
    chapter=CHAPTER,
    exception_types=("ValueError", "TypeError"),
    # a list holding strings: "too many dimensions 'str'"; a single string, or strings after numbers in a nested
    # list: "new(): invalid data type 'str'"
    pattern=r"(?:too many dimensions|new\(\): invalid data type) '(?P<type>str|bytes|numpy\.str_)'",
    example="too many dimensions 'str'",
    cause="torch.tensor was given Python strings, typically values read from a CSV or text file. A string is a "
    "sequence, so PyTorch tries to read it as one more dimension and gives up ('too many dimensions'; where it "
    "meets the string as a single value it says 'invalid data type' instead). The data's shape is not the "
    "problem (a flat list of strings fails the same way), and unsqueeze or squeeze cannot help.",
    fix="Convert the text to numbers before making the tensor: [[float(v) for v in row] for row in rows], "
    "numpy.asarray(rows, dtype=numpy.float32), or pandas.to_numeric; check that no column holds labels or "
    "headers.",
    reproducer=tensor_from_strings,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    CAT_ZERO_DIM,
    MATVEC_SIZE_MISMATCH,
    TENSOR_FROM_STRINGS,
)
