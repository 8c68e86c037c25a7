"""Catalog texts that were wrong (issue 7, item 8), each checked on the exception PyTorch really raises."""

import os
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor import explain, get_entry


def test_bce_target_size_for_a_batch_of_one_says_squeeze_1(raised):
    def squeezed_batch_of_one():
        logits = nn.Linear(2, 1)(torch.randn(1, 2)).squeeze()  # (1, 1) -> ()
        F.binary_cross_entropy_with_logits(logits, torch.ones(1))

    d = explain(raised(squeezed_batch_of_one))
    assert d.id == "bce-target-size" and d.chapter == "dimensions"
    assert "squeeze(1)" in d.fix and "0-d" in d.fix
    assert "squeeze(-1)" not in d.fix and "unsqueeze(-1)" not in d.fix
    # the advice works: squeeze(1) keeps the batch dimension of a batch of one
    logits = nn.Linear(2, 1)(torch.randn(1, 2)).squeeze(1)
    F.binary_cross_entropy_with_logits(logits, torch.ones(1))


def test_bce_target_size_for_a_column_of_logits(raised):
    d = explain(raised(lambda: F.binary_cross_entropy_with_logits(torch.randn(8, 1), torch.ones(8))))
    assert d.id == "bce-target-size" and "squeeze(1)" in d.fix and "unsqueeze(1)" in d.fix
    assert "squeeze(-1)" not in d.fix


def test_meta_device_is_explained_as_meta(raised):
    def meta_model():
        with torch.device("meta"):
            layer = nn.Linear(2, 2)
        layer(torch.ones(1, 2))

    for fn in (meta_model, lambda: torch.ones(2, device="meta") + torch.ones(2)):
        d = explain(raised(fn))
        assert d.id == "meta-device" and "to_empty" in d.fix


@pytest.mark.parametrize("message", [
    "Expected all tensors to be on the same device, but found at least two devices, mps:0 and cpu!",
    "Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on "
    "cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
    "Tensor on device mps:0 is not on the expected device cpu!",
    "Tensor on device cuda:0 is not on the expected device cpu!",
])
def test_genuine_device_mismatches_are_not_meta(message):
    d = explain(f"RuntimeError: {message}")
    assert d.id == "device-mismatch"
    assert "meta" not in d.fix and "to_empty" not in d.fix


def test_genuine_device_mismatch_from_the_prims_device_check_is_not_meta(raised):
    """PyTorch's own check (used by decompositions and torch.compile) on a fake CUDA tensor: no GPU needed."""
    from torch._prims_common import check_same_device
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        on_cuda = torch.empty(2, device="cuda")
    exc = raised(lambda: check_same_device(on_cuda, torch.ones(2), allow_cpu_scalar_tensors=False))
    assert str(exc) == "Tensor on device cpu is not on the expected device cuda:0!"
    assert explain(exc).id == "device-mismatch"


@pytest.mark.cuda
def test_genuine_device_mismatches_raised_on_cuda_are_not_meta(raised):
    from torch._prims_common import check_same_device

    for fn in (lambda: torch.ones(2, device="cuda") + torch.ones(2, 2),
               lambda: nn.Linear(2, 2).cuda()(torch.ones(1, 2)),
               lambda: check_same_device(torch.ones(2, device="cuda"), torch.ones(2), allow_cpu_scalar_tensors=False)):
        exc = raised(fn)
        assert explain(exc).id == "device-mismatch", f"{type(exc).__name__}: {exc}"


def test_no_grad_fn_blames_the_parameters_not_the_inputs(raised):
    def hand_written_model():
        w = torch.randn(3, 1)  # forgot requires_grad=True
        x = torch.randn(4, 3, requires_grad=True)  # grad on the inputs does not make w trainable
        ((x.detach() @ w) ** 2).mean().backward()

    d = explain(raised(hand_written_model))
    assert d.id == "no-grad-fn"
    assert "parameters" in d.cause and "inputs and labels never need requires_grad" in d.cause
    assert "requires_grad=True on hand-written weights" in d.fix


def test_mat1_mat2_after_a_squeeze_leads_with_the_shape_not_in_features(raised):
    class SqueezeMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 64)

        def forward(self, x):
            x = x.squeeze()
            return self.fc(x.view(x.size(0), -1))

    d = explain(raised(lambda: SqueezeMLP()(torch.randn(1, 1, 28, 28))))  # (28x28 and 784x64)
    assert d.id == "mat1-mat2-shapes"
    assert "flatten(x, 1)" in d.fix and "squeeze()" in d.fix and "view(x.size(0), -1)" not in d.fix
    assert not d.fix.startswith("Set in_features") and d.fix.index("x.shape") < d.fix.index("in_features=28")
    generic = get_entry("mat1-mat2-shapes").fix
    assert generic.startswith("Print x.shape") and "view(x.size(0), -1)" not in generic


def test_no_entry_recommends_view_with_the_batch_size():
    from torchdoctor.catalog import CATALOG

    for e in CATALOG:
        assert "view(x.size(0), -1)" not in e.fix + e.cause, e.id


@pytest.mark.parametrize("load", [
    torch.load,
    lambda p: torch.load(p, weights_only=False),
    lambda p: pickle.load(open(p, "rb")),
], ids=["torch.load", "weights_only=False", "pickle.load"])
def test_ran_out_of_input_matches_every_empty_file_error(tmp_path, load, raised):
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    assert os.path.getsize(path) == 0
    exc = raised(lambda: load(path))
    assert type(exc) is EOFError
    assert explain(exc).id == "ran-out-of-input"
    assert explain(f"EOFError: {exc}".rstrip(": ")).id == "ran-out-of-input"
