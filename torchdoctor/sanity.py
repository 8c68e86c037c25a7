"""Sanity checks to run before a long training: each returns a result with ``ok`` and a readable summary."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor.explain_i18n import translator

__all__ = [
    "InitLossCheck",
    "OverfitCheck",
    "IndependenceCheck",
    "UpdateCheck",
    "check_initial_loss",
    "overfit_one_batch",
    "check_batch_independence",
    "check_all_parameters_update",
]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
tr = translator("sanity")  # the verdicts in the learner's language (torchdoctor/explain_i18n.py)


@dataclass
class InitLossCheck:
    """The loss of a fresh classifier against ln C, and what its outputs look like.

    ``output_min``, ``output_max`` and ``row_sum_error`` (the largest ``|sum over classes - 1|`` of a row) describe
    the outputs the loss was given. Outputs that all lie in [0, 1] are probabilities (or sigmoids), not logits:
    ``F.cross_entropy`` would apply its own softmax on top of them. The loss alone cannot show that bug: on
    probabilities it always lies between ``ln(C - 1 + e) - 1`` and ``ln(C - 1 + e)`` (1.46 to 2.46 for C = 10),
    close to ln C, so the check looks at the outputs themselves.
    """

    loss: float
    expected: float
    tolerance: float
    output_min: float = math.nan
    output_max: float = math.nan
    row_sum_error: float = math.nan

    @property
    def squashed(self) -> bool:
        """Every output lies in [0, 1] (and they are not all one constant, as from a zero-initialised head): a
        softmax or a sigmoid before a loss that expects logits."""
        in_unit = self.output_min >= 0.0 and self.output_max <= 1.0
        return in_unit and (self.output_max > self.output_min or self.row_sum_error <= 1e-3)

    @property
    def probabilities(self) -> bool:
        """The outputs are in [0, 1] and each row sums to 1: a softmax before the loss."""
        return self.output_min >= 0.0 and self.output_max <= 1.0 and self.row_sum_error <= 1e-3

    @property
    def loss_near_ln_c(self) -> bool:
        return abs(self.loss - self.expected) <= self.tolerance * self.expected

    @property
    def ok(self) -> bool:
        return self.loss_near_ln_c and not self.squashed

    def __str__(self) -> str:
        head = tr("initial loss {loss}, expected about ln C = {expected}: ", loss=f"{self.loss:.4f}",
                  expected=f"{self.expected:.4f}")
        if self.squashed:
            what = tr("each row sums to 1: a softmax") if self.probabilities else tr(
                "a sigmoid or another squashing layer")
            return head + tr(
                "FAILED: every output lies in [{low}, {high}], so the model returns probabilities, not logits "
                "({what} before the loss). CrossEntropyLoss applies log_softmax itself; return the raw scores. (The "
                "loss value alone cannot show this: on probabilities it stays close to ln C.)",
                low=f"{self.output_min:.3g}", high=f"{self.output_max:.3g}", what=what,
            )
        if self.loss_near_ln_c:
            return head + tr("ok")
        if self.loss > self.expected:
            return head + tr("too high: the initial outputs are confidently wrong (large init scale, unnormalised "
                             "inputs)")
        return head + tr("too low: the model already knows the answer (leakage?) or the loss is not what you think")


def check_initial_loss(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, num_classes: int, tolerance: float = 0.25
) -> InitLossCheck:
    """Cross-entropy of a freshly built classifier should be close to ln(num_classes): it guesses uniformly.

    The check also fails when every output lies in [0, 1] (a softmax or a sigmoid before the loss), which the loss
    value cannot reveal. It does not see bugs that leave a fresh model's loss at ln C: labels misaligned with their
    inputs, a detached graph, parameters missing from the optimiser. Overfitting one batch
    (``overfit_one_batch``) and ``check_all_parameters_update`` catch those.
    """
    if num_classes < 2:
        raise ValueError(f"num_classes must be at least 2, got {num_classes}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
            loss = F.cross_entropy(out, y).item()
    finally:
        model.train(was_training)
    out = out.detach().float()
    row_sum_error = (out.sum(dim=1) - 1).abs().max().item() if out.dim() >= 2 else math.nan
    return InitLossCheck(loss, math.log(num_classes), tolerance, out.min().item(), out.max().item(), row_sum_error)


@dataclass
class OverfitCheck:
    losses: list[float]
    target: float

    @property
    def ok(self) -> bool:
        return bool(self.losses) and self.losses[-1] <= self.target

    def __str__(self) -> str:
        verdict = tr("ok: model, loss and optimiser can learn") if self.ok else tr(
            "FAILED: a model that cannot memorise one batch has a bug (labels, loss/output pairing, learning rate, a "
            "detached graph, zero_grad/step order)"
        )
        return tr("one-batch loss {first} -> {last} in {steps} steps: {verdict}", first=f"{self.losses[0]:.4f}",
                  last=f"{self.losses[-1]:.4f}", steps=len(self.losses), verdict=verdict)


def overfit_one_batch(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: LossFn = F.cross_entropy,
    steps: int = 200,
    lr: float = 1e-2,
    target: float = 0.05,
) -> OverfitCheck:
    """Train a copy of the model (Adam) on one small batch; the loss should fall below ``target``.

    The model passed in is not changed.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("the model has no trainable parameters, so there is nothing to overfit with")
    trial = copy.deepcopy(model).train()
    optimizer = torch.optim.Adam(trial.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(trial(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if losses[-1] <= target:
            break
    return OverfitCheck(losses, target)


@dataclass
class IndependenceCheck:
    sample: int
    leaking_samples: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.leaking_samples

    def __str__(self) -> str:
        if self.ok:
            return tr("ok: the output of sample {sample} depends only on input {sample}", sample=self.sample)
        return tr(
            "FAILED: the output of sample {sample} has a gradient with respect to inputs {inputs}: some operation "
            "mixes samples across the batch (a view/reshape or transpose that moves the batch dimension, a reduction "
            "over dim 0)", sample=self.sample, inputs=self.leaking_samples[:10],
        )


def check_batch_independence(model: nn.Module, x: torch.Tensor, sample: int = 0) -> IndependenceCheck:
    """The gradient of sample ``sample``'s output must reach only sample ``sample``'s input.

    Runs in eval mode, where BatchNorm legitimately stops mixing samples.
    """
    if x.dim() == 0 or x.size(0) < 2:
        raise ValueError(f"need a batch of at least 2 samples in dimension 0, got shape {list(x.shape)}")
    if not 0 <= sample < x.size(0):
        raise ValueError(f"sample must be in 0..{x.size(0) - 1}, got {sample}")
    if not x.is_floating_point():
        raise TypeError(f"x must be floating point to carry a gradient, got {x.dtype}")
    if x.is_meta:
        raise ValueError("x is on the meta device, which holds no values; use a real batch (e.g. on cpu)")
    was_training = model.training
    model.eval()
    try:
        inputs = x.detach().clone().requires_grad_(True)
        out = model(inputs)
        if not out.requires_grad:
            raise ValueError("the model's output does not depend on its input (no gradient reaches x), so "
                             "batch independence cannot be checked; is the input used in forward?")
        out[sample].sum().backward()
    finally:
        model.train(was_training)
        model.zero_grad(set_to_none=True)
    assert inputs.grad is not None
    per_sample = inputs.grad.reshape(inputs.size(0), -1).abs().sum(dim=1)
    leaking = [i for i in range(inputs.size(0)) if i != sample and per_sample[i].item() != 0]
    return IndependenceCheck(sample, leaking)


@dataclass
class UpdateCheck:
    unchanged: list[str]
    total: int

    @property
    def ok(self) -> bool:
        return not self.unchanged

    def __str__(self) -> str:
        if self.ok:
            return tr("ok: all {total} trainable parameters changed", total=self.total)
        return tr(
            "FAILED: {count} of {total} trainable parameters did not change: {names}. Are they in the optimizer, used "
            "in forward, reached by the loss?", count=len(self.unchanged), total=self.total, names=self.unchanged[:10],
        )


def check_all_parameters_update(model: nn.Module, step: Callable[[], object]) -> UpdateCheck:
    """Run one training ``step()`` (forward, backward, optimizer.step) and list trainable parameters
    that did not change."""
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    step()
    params = dict(model.named_parameters())
    unchanged = [n for n, old in before.items() if torch.equal(params[n].detach(), old)]
    return UpdateCheck(unchanged, len(before))
