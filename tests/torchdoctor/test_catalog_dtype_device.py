"""Chapter 04's catalog (dtype-device): every wording of a dtype mistake that the pinned PyTorch prints is explained
as the right entry, raised for real on the CPU."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor import explain

F64 = torch.float64


@pytest.mark.parametrize(
    ("raise_it", "entry"),
    [
        (lambda: F.cross_entropy(torch.randn(3, 4), torch.tensor([0.0, 1.0, 2.0])), "ce-target-dtype"),
        (lambda: F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 1, 2], dtype=torch.int32)), "ce-target-dtype"),
        (lambda: F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 1, 2], dtype=torch.int8)), "ce-target-dtype"),
        (lambda: F.cross_entropy(torch.randn(3, 4), F.one_hot(torch.tensor([0, 1, 2]), 4)),
         "ce-probability-target-long"),
        (lambda: nn.Linear(3, 2)(torch.from_numpy(np.ones((1, 3)))), "matmul-dtype"),
        (lambda: nn.Linear(3, 2)(torch.tensor([[1, 2, 3]])), "matmul-dtype"),
        (lambda: torch.ones(2, 3) @ torch.ones(3, 2, dtype=F64), "matmul-operator-dtype"),
        (lambda: torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.long), "matmul-operator-dtype"),
        (lambda: torch.mm(torch.ones(2, 3, dtype=torch.half), torch.ones(3, 2)), "matmul-operator-dtype"),
        (lambda: torch.bmm(torch.ones(1, 2, 3), torch.ones(1, 3, 2, dtype=F64)), "matmul-operator-dtype"),
        (lambda: nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, dtype=F64)), "conv-input-type"),
        (lambda: nn.Conv2d(1, 1, 3, bias=False)(torch.ones(1, 1, 5, 5, dtype=F64)), "matmul-operator-dtype"),
        (lambda: nn.Embedding(4, 2)(torch.tensor([1.0])), "embedding-index-dtype"),
    ],
)
def test_each_wording_of_a_dtype_mistake_is_explained(raised, raise_it, entry):
    exc = raised(raise_it)
    assert explain(exc).id == entry, f"{type(exc).__name__}: {exc}"


def test_matmul_operator_dtype_does_not_claim_the_linear_message_or_shape_errors(raised):
    assert explain(raised(lambda: torch.ones(2, 3) @ torch.ones(4, 2))).id != "matmul-operator-dtype"
    linear = explain(raised(lambda: nn.Linear(3, 2)(torch.ones(1, 3, dtype=F64))))
    assert linear.id == "matmul-dtype" and "Double" in linear.fix and "Float" in linear.fix


def test_the_meta_stand_in_of_chapter_4_is_explained_as_meta_both_ways(raised):
    """The chapter uses the meta device as a CPU stand-in for a device mismatch, in both directions."""
    with torch.device("meta"):
        layer = nn.Linear(3, 2)
    for fn in (lambda: layer(torch.ones(1, 3)), lambda: torch.ones(2, 3, device="meta") + torch.randn(2, 3)):
        d = explain(raised(fn))
        assert d.id == "meta-device", d.id


def test_the_cpu_rerun_of_a_device_side_assert_names_the_label(raised):
    d = explain(raised(lambda: F.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 10, 3]))))
    assert d.id == "ce-target-out-of-bounds" and "10" in d.fix


def test_the_meta_stand_in_for_numpy_on_a_gpu_tensor_is_explained_as_that_error(raised):
    """Chapter 4's CPU stand-in for .numpy() on a CUDA tensor: a meta tensor refuses with the same words."""
    d = explain(raised(lambda: torch.ones(3, device="meta").numpy()))
    assert d.id == "cuda-tensor-to-numpy", d.id


def test_a_device_side_assert_is_explained_whatever_its_exception_type():
    """In 2.14 a device-side assert raises torch.AcceleratorError (a RuntimeError); older versions, RuntimeError."""
    message = "CUDA error: device-side assert triggered\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
    assert issubclass(torch.AcceleratorError, RuntimeError)
    for kind in (torch.AcceleratorError, RuntimeError):
        assert explain(kind(message)).id == "device-side-assert", kind.__name__
