"""Catalog entries of chapter 10 (case study), checked on the errors PyTorch really raises in the variants the
chapter shows, beyond the one message each reproducer raises."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor import explain


def test_squeezed_batch_of_one_in_cat_names_its_position(raised):
    model = nn.Linear(4, 1)
    batches = [torch.randn(37, 4)] * 27 + [torch.randn(1, 4)]   # 1000 samples in batches of 37
    exc = raised(lambda: torch.cat([model(b).squeeze() for b in batches]))
    diagnosis = explain(exc)
    assert diagnosis.id == "cat-zero-dim"
    assert "position 27" in diagnosis.fix and ".squeeze(-1)" in diagnosis.fix
    assert torch.cat([model(b).squeeze(-1) for b in batches]).shape == (1000,)   # the fix it gives works


def test_scalar_losses_in_cat_are_cat_zero_dim_and_stack_is_the_fix(raised):
    losses = [torch.tensor(0.5), torch.tensor(0.25)]
    exc = raised(lambda: torch.cat(losses))
    diagnosis = explain(exc)
    assert diagnosis.id == "cat-zero-dim" and "position 0" in diagnosis.fix and "torch.stack" in diagnosis.fix
    assert torch.stack(losses).shape == (2,)


@pytest.mark.parametrize("product", [
    lambda x, w: x @ w,
    lambda x, w: torch.matmul(x, w),
    lambda x, w: torch.mv(x, w),
], ids=["operator", "matmul", "mv"])
def test_every_matrix_vector_product_with_a_short_vector_is_matvec(product, raised):
    exc = raised(lambda: product(torch.randn(32, 4), torch.randn(3)))
    diagnosis = explain(exc)
    assert diagnosis.id == "matvec-size-mismatch"
    assert "(32x4)" in diagnosis.fix and "vector of 3 values" in diagnosis.fix and "must have 4" in diagnosis.fix


def test_a_load_state_dict_size_mismatch_is_not_taken_for_matvec(raised):
    exc = raised(lambda: nn.Linear(3, 1).load_state_dict(nn.Linear(4, 1).state_dict()))
    assert explain(exc).id == "state-dict-size-mismatch"


@pytest.mark.parametrize("data", [
    ["1.0", "2.0"],                      # one flat row: no extra dimension anywhere
    [["5.1", "3.5"], ["4.9", "3.0"]],    # rows from csv.reader
    [[1.0, 2.0], ["3.0", "4.0"]],        # only some rows left as text: TypeError "invalid data type 'str'"
    "1.0",                               # a single string
], ids=["flat", "nested", "mixed", "single"])
def test_strings_in_torch_tensor_are_tensor_from_strings(data, raised):
    exc = raised(lambda: torch.tensor(data))
    assert type(exc) in (ValueError, TypeError) and "'str'" in str(exc)
    assert explain(exc).id == "tensor-from-strings"


@pytest.mark.parametrize("quoted", [
    "RuntimeError: mat1 dim 1 != mat2 dim 0",
    "RuntimeError: size mismatch",
    "ValueError: too many dimensions",
    "RuntimeError: size mismatch, m1: [32 x 3], m2: [4 x 1]",
    "TypeError: new(): invalid data type 'float'",   # right words, not a string
])
def test_old_quotes_are_not_claimed(quoted):
    """The case study shows that explain does not recognise messages quoted from old PyTorch versions."""
    assert explain(quoted) is None


def test_a_squeezed_batch_of_one_in_mse_loss_is_named_as_such(raised):
    model = nn.Linear(4, 1)

    def squeezed_loss():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F.mse_loss(model(torch.randn(1, 4)).squeeze(), torch.randn(1))

    diagnosis = explain(raised(squeezed_loss))
    assert diagnosis.id == "mse-broadcast-warning"
    assert "prediction has no dimension" in diagnosis.fix and "squeeze(-1)" in diagnosis.fix
    assert "grid" not in diagnosis.fix
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.mse_loss(model(torch.randn(1, 4)).squeeze(-1), torch.randn(1))   # the fix it gives raises nothing
