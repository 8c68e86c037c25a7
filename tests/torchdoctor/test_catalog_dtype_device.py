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


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_numpy_of_a_dtype_numpy_lacks_is_explained_and_the_fix_works(raised, dtype):
    """Chapter 4: t.detach().cpu().numpy() is not enough for bfloat16 (nor float8); .float() first is."""
    t = torch.ones(3, dtype=dtype)
    d = explain(raised(lambda: t.detach().cpu().numpy()))
    assert d.id == "numpy-unsupported-dtype" and ".float()" in d.fix, d
    assert t.detach().float().cpu().numpy().tolist() == [1.0, 1.0, 1.0]
    complex_half = explain(raised(lambda: torch.ones(2, dtype=torch.complex32).numpy()))
    assert complex_half.id == "numpy-unsupported-dtype" and ".cfloat()" in complex_half.fix


def test_copying_a_meta_tensor_to_the_cpu_is_explained_as_meta(raised):
    exc = raised(lambda: torch.ones(3, device="meta").detach().cpu().numpy())
    assert type(exc) is NotImplementedError and explain(exc).id == "meta-device"


def test_adam_state_left_in_float32_after_double_is_explained(raised):
    """Chapter 4: module.to() does not convert the optimizer's state; Adam's next step fails in lerp."""
    net = nn.Linear(3, 2)
    adam = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    adam.step()
    net.double()
    adam.zero_grad()
    net(torch.ones(1, 3, dtype=F64)).sum().backward()
    d = explain(raised(adam.step))
    assert d.id == "optimizer-state-dtype" and "float" in d.fix and "double" in d.fix, d
    # the fix the entry gives: load_state_dict casts the state to the parameters' dtype
    adam.load_state_dict(adam.state_dict())
    adam.step()
    assert {t.dtype for s in adam.state.values() for k, t in s.items() if k != "step"} == {F64}


def test_a_hard_coded_cuda_device_without_a_gpu_is_explained(raised):
    if torch.cuda.is_available() or not torch.backends.cuda.is_built():
        pytest.skip("needs a CUDA build of PyTorch on a machine without a GPU (as the CPU runner is)")
    d = explain(raised(lambda: torch.zeros(8, 64, device="cuda")))
    assert d.id == "cuda-no-driver", d
