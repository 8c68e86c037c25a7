import math

import pytest
import torch
from torch import nn

from torchdoctor import find_nonfinite, global_grad_norm, grad_norms
from torchdoctor.gradients import NonFiniteError


def test_norms_match_clip_grad_norm():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1), nn.Linear(1, 1))
    model[:3](torch.randn(16, 4)).pow(2).mean().backward()  # the last layer gets no gradient
    norms = grad_norms(model)
    assert list(norms) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert norms["0.weight"] == pytest.approx(model[0].weight.grad.norm().item())
    total = global_grad_norm(model)
    assert total == pytest.approx(math.sqrt(sum(v * v for v in norms.values())))
    assert total == pytest.approx(nn.utils.clip_grad_norm_(model.parameters(), 1e9).item(), rel=1e-5)
    assert global_grad_norm(model, norm_type=math.inf) == pytest.approx(
        max(p.grad.abs().max().item() for p in model.parameters() if p.grad is not None))
    assert global_grad_norm(nn.Linear(2, 2)) == 0.0


class LogLayer(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


def test_names_the_first_module_with_nan():
    model = nn.Sequential(nn.Linear(3, 3), LogLayer(), nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight.fill_(-1.0)
        model[0].bias.zero_()
    with pytest.raises(NonFiniteError, match=r"first NaN in the output of 1 \(LogLayer\): its input was finite"):
        with find_nonfinite(model):
            model(torch.ones(2, 3))
    with find_nonfinite(model, raise_error=False) as report:
        model(torch.ones(2, 3))
    assert report.module == "1 (LogLayer)" and report.kind == "NaN"
    assert all(not m._forward_hooks for m in model.modules())


def test_blames_the_data_when_the_input_is_not_finite():
    model = nn.Sequential(nn.Linear(2, 2))
    with find_nonfinite(model, raise_error=False) as report:
        model(torch.tensor([[float("inf"), 1.0]]))
    assert report.module == "0 (Linear)" and not report.input_was_finite and "data" in str(report)
    with find_nonfinite(model, raise_error=False) as clean:
        model(torch.ones(1, 2))
    assert clean.module is None and "no NaN" in str(clean)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf, -math.inf])
def test_global_norm_is_what_clipping_uses(norm_type):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    model(torch.randn(16, 4)).pow(2).mean().backward()
    expected = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9, norm_type=norm_type).item()
    assert global_grad_norm(model, norm_type) == pytest.approx(expected)
    assert global_grad_norm(model[0].weight) == pytest.approx(model[0].weight.grad.norm().item())


def test_bad_input_and_meta_tensors():
    with pytest.raises(TypeError, match="needs an nn.Module"):
        grad_norms([torch.zeros(1)])
    with pytest.raises(TypeError, match="needs an nn.Module"):
        find_nonfinite(lambda x: x).__enter__()
    model = nn.Linear(2, 2, device="meta")
    with find_nonfinite(model) as report:
        model(torch.zeros(1, 2, device="meta"))
    assert report.module is None
