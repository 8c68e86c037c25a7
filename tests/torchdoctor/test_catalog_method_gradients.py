"""The entries chapters 00 (method) and 02 (gradients) added: each is recognised from the real error, from its
pasted text, and gives advice that fits the message. (test_catalog.py already raises every reproducer.)"""

import pytest
import torch
from torch import nn

from torchdoctor import explain, find_nonfinite
from torchdoctor.catalog import get_entry


class _Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def test_nonfinite_forward_names_the_module_that_made_the_nan():
    model = nn.Sequential(nn.Identity(), _Log())

    def run():
        with find_nonfinite(model):
            model(torch.tensor([[1.0, -3.0]]))

    err = _raised(run)
    diagnosis = explain(err)
    assert diagnosis is not None and diagnosis.id == "nonfinite-forward"
    assert "1 (_Log)" in diagnosis.fix and "finite input" in diagnosis.fix
    # pasted as text, the type name alone must be enough (no class hierarchy to look at)
    assert explain(f"NonFiniteError: {err}").id == "nonfinite-forward"


def test_nonfinite_forward_blames_the_data_when_the_input_was_already_bad():
    model = nn.Sequential(nn.Linear(2, 2))

    def run():
        with find_nonfinite(model):
            model(torch.tensor([[float("nan"), 1.0]]))

    diagnosis = explain(_raised(run))
    assert diagnosis.id == "nonfinite-forward"
    assert "check the data" in diagnosis.fix


def test_own_assert_is_recognised_only_for_expected_got_messages():
    def check(x):
        assert x.dtype == torch.float32, f"x: expected dtype float32, got {x.dtype}"

    err = _raised(lambda: check(torch.zeros(2, dtype=torch.float64)))
    assert explain(err).id == "own-assert-failed"
    assert explain("AssertionError: batch: Expected 4 dimensions, got 3").id == "own-assert-failed"
    assert explain("AssertionError") is None
    assert explain("AssertionError: something is off") is None
    # PyTorch's own AssertionErrors keep their entries (the method chapter's entries are matched first)
    assert explain("AssertionError: Torch not compiled with CUDA enabled").id == "cuda-not-compiled"
    # other exception types with "expected ... got" in the message are not taken for an assert
    other = explain("ValueError: expected 3 channels, got 4")
    assert other is None or other.id != "own-assert-failed"
    # a PyTorch message pasted without its type keeps its own entry
    conv = ("Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 28, 28] to have 3 channels, "
            "but got 1 channels instead")
    assert explain(conv).id == "conv-channels"


def test_gradcheck_mismatch_from_a_wrong_custom_backward():
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return grad_out * 3 * x  # wrong: 3 x^2

    x = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    err = _raised(lambda: torch.autograd.gradcheck(Cube.apply, (x,)))
    assert type(err).__name__ == "GradcheckError" and isinstance(err, RuntimeError)
    diagnosis = explain(err)
    assert diagnosis.id == "gradcheck-mismatch" and diagnosis.chapter == "gradients"
    assert "output 0 with respect to input 0" in diagnosis.fix
    assert explain(f"GradcheckError: {err}").id == "gradcheck-mismatch"
    assert explain(f"RuntimeError: {err}").id == "gradcheck-mismatch"


def test_a_correct_backward_passes_gradcheck():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return grad_out * 2 * x

    x = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Square.apply, (x,))


@pytest.mark.parametrize("entry_id", ["nonfinite-forward", "own-assert-failed", "anomaly-nan"])
def test_method_entries_belong_to_chapter_00(entry_id):
    assert get_entry(entry_id).chapter == "method"


def test_retain_graph_in_a_training_loop_is_the_in_place_error():
    """Chapter 02 shows that retain_graph=True turns backward-twice into this error after optimizer.step()."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = net(torch.randn(8, 4)).pow(2).mean()

    def loop():
        for _ in range(3):
            optimizer.zero_grad()
            loss.backward(retain_graph=True)
            optimizer.step()

    assert explain(_raised(loop)).id == "inplace-saved-tensor"


def test_grad_none_after_zero_grad_is_recognised():
    layer = nn.Linear(3, 1)
    layer(torch.randn(2, 3)).sum().backward()
    torch.optim.SGD(layer.parameters(), lr=0.1).zero_grad()
    err = _raised(lambda: layer.weight.grad.norm())
    assert isinstance(err, AttributeError)
    diagnosis = explain(err)
    assert diagnosis.id == "grad-none" and diagnosis.chapter == "gradients"
    assert explain("AttributeError: 'NoneType' object has no attribute 'zero_'").id == "grad-none"
    # other exception types, and other None messages, keep their own entries (or none)
    assert explain("TypeError: object of type 'NoneType' has no len()").id != "grad-none"
