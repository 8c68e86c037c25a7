import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor.sanity import (
    check_all_parameters_update,
    check_batch_independence,
    check_initial_loss,
    overfit_one_batch,
)


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))


def data(n: int = 16):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 20, generator=g), torch.randint(0, 10, (n,), generator=g)


def test_initial_loss_near_ln_c_and_too_confident_init():
    x, y = data(256)
    ok = check_initial_loss(mlp(), x, y, num_classes=10)
    assert ok.ok and ok.expected == pytest.approx(math.log(10)) and "ok" in str(ok)
    hot = mlp()
    with torch.no_grad():
        hot[2].weight.mul_(50)
    bad = check_initial_loss(hot, x, y, num_classes=10)
    assert not bad.ok and "too high" in str(bad)


def test_initial_loss_flags_probabilities_that_the_loss_value_hides():
    x, y = data(256)
    softmax_model = nn.Sequential(mlp(), nn.Softmax(dim=1))
    result = check_initial_loss(softmax_model, x, y, num_classes=10)
    # the loss itself looks healthy: on probabilities it lies in [ln(C-1+e) - 1, ln(C-1+e)], around ln C ...
    low, high = math.log(9 + math.e) - 1, math.log(9 + math.e)
    assert low <= result.loss <= high and result.loss_near_ln_c
    # ... so the check reads the outputs instead
    assert result.probabilities and result.squashed and not result.ok
    assert "FAILED" in str(result) and "softmax" in str(result) and "logits" in str(result)
    sigmoid = check_initial_loss(nn.Sequential(mlp(), nn.Sigmoid()), x, y, num_classes=10)
    assert sigmoid.squashed and not sigmoid.probabilities and not sigmoid.ok and "sigmoid" in str(sigmoid)
    # log_softmax before CrossEntropyLoss is harmless (log_softmax is idempotent) and passes
    assert check_initial_loss(nn.Sequential(mlp(), nn.LogSoftmax(dim=1)), x, y, num_classes=10).ok


def test_initial_loss_accepts_a_zero_initialised_head():
    x, y = data(64)
    model = mlp()
    with torch.no_grad():
        model[2].weight.zero_()
        model[2].bias.zero_()
    result = check_initial_loss(model, x, y, num_classes=10)
    assert result.ok and result.loss == pytest.approx(math.log(10)) and not result.squashed


def test_overfit_one_batch_succeeds_and_fails_as_it_should():
    x, y = data(8)
    model = mlp()
    before = model[0].weight.clone()
    good = overfit_one_batch(model, x, y)
    assert good.ok and good.losses[-1] < good.losses[0]
    assert torch.equal(model[0].weight, before)  # the caller's model is untouched
    frozen = mlp()
    frozen.requires_grad_(False)
    frozen[2].bias.requires_grad_(True)  # only a bias can learn: cannot memorise 8 random labels
    bad = overfit_one_batch(frozen, x, y, steps=50)
    assert not bad.ok and "FAILED" in str(bad)


class MixesBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(20, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).t().reshape(x.size(0), -1)  # transposing before a reshape scrambles samples


def test_batch_independence():
    x, _ = data(4)
    assert check_batch_independence(mlp(), x).ok
    bn = nn.Sequential(nn.Linear(20, 8), nn.BatchNorm1d(8))
    assert check_batch_independence(bn, x, sample=2).ok and bn.training
    bad = check_batch_independence(MixesBatch(), x)
    assert not bad.ok and bad.leaking_samples and "mixes samples" in str(bad)
    with pytest.raises(ValueError, match="at least 2 samples"):
        check_batch_independence(mlp(), x[:1])


def test_every_parameter_changes_after_a_step():
    x, y = data()
    model = nn.ModuleDict({"used": nn.Linear(20, 10), "unused": nn.Linear(20, 10)})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model["used"](x), y).backward()
        opt.step()

    result = check_all_parameters_update(model, step)
    assert result.unchanged == ["unused.weight", "unused.bias"] and "2 of 4" in str(result)
    full = mlp()
    opt2 = torch.optim.SGD(full.parameters(), lr=0.1)

    def step2() -> None:
        F.cross_entropy(full(x), y).backward()
        opt2.step()

    assert check_all_parameters_update(full, step2).ok


class _IgnoresInput(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], 2)


def test_bad_input_gets_a_clear_error():
    x, y = torch.randn(4, 3), torch.randint(0, 2, (4,))
    with pytest.raises(ValueError, match="steps must be at least 1"):
        overfit_one_batch(nn.Linear(3, 2), x, y, steps=0)
    with pytest.raises(ValueError, match="no trainable parameters"):
        overfit_one_batch(nn.Identity(), x, y)
    with pytest.raises(ValueError, match="meta device"):
        check_batch_independence(nn.Linear(3, 2, device="meta"), torch.randn(4, 3, device="meta"))
    with pytest.raises(ValueError, match="does not depend on its input"):
        check_batch_independence(_IgnoresInput(), x)
