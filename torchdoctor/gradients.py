"""Gradients: per-parameter and global norms, and hooks that find the first NaN or Inf in a forward pass."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from torchdoctor.explain_i18n import english, translator

__all__ = ["NonFiniteError", "NonFiniteReport", "grad_norms", "global_grad_norm", "find_nonfinite"]

tr = translator("gradients")  # the report in the learner's language (torchdoctor/explain_i18n.py)


def grad_norms(model: nn.Module, norm_type: float = 2.0) -> dict[str, float]:
    """The gradient norm of every parameter that has a gradient, by name (in model order)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"grad_norms needs an nn.Module (for the parameter names), got {type(model).__name__}")
    return {
        name: torch.linalg.vector_norm(p.grad.detach(), norm_type).item()
        for name, p in model.named_parameters()
        if p.grad is not None
    }


def global_grad_norm(
    parameters: nn.Module | torch.Tensor | Iterable[torch.Tensor], norm_type: float = 2.0
) -> float:
    """The norm of all gradients taken together, the number ``clip_grad_norm_`` compares with max_norm.

    Parameters without a gradient are skipped; 0.0 when none has one.
    """
    if isinstance(parameters, nn.Module):
        params: Iterable[torch.Tensor] = parameters.parameters()
    elif isinstance(parameters, torch.Tensor):
        params = [parameters]
    else:
        params = parameters
    grads = [p.grad for p in params if p.grad is not None]
    return torch.nn.utils.get_total_norm(grads, norm_type).item()


class NonFiniteError(RuntimeError):
    """Raised by :func:`find_nonfinite` at the first module whose output holds NaN or Inf. Its message is the
    report in English in every language, as PyTorch's messages are: explain() reads it."""


@dataclass
class NonFiniteReport:
    """Where the first non-finite value appeared (``module`` is None while none has)."""

    module: str | None = None
    kind: str | None = None
    input_was_finite: bool = True

    def __str__(self) -> str:
        if self.module is None:
            return tr("no NaN or Inf in any module output")
        where = tr("its input was finite, so this module created it") if self.input_was_finite else tr(
            "its input already held NaN/Inf, so the data (or something outside a module) is the source"
        )
        return tr("first {kind} in the output of {module}: {where}", kind=self.kind, module=self.module, where=where)


def _nonfinite_kind(obj: Any) -> str | None:
    for t in tree_leaves(obj):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not t.is_meta:  # meta tensors hold no values
            if torch.isnan(t).any():
                return "NaN"
            if torch.isinf(t).any():
                return "Inf"
    return None


@contextmanager
def find_nonfinite(model: nn.Module, raise_error: bool = True) -> Iterator[NonFiniteReport]:
    """Watch every module's forward output inside the block and report the first one holding NaN or Inf.

    With ``raise_error`` a :class:`NonFiniteError` naming the module stops the forward pass there; otherwise
    the report is filled in and the pass continues. Checking every output synchronises the GPU: debug only.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"find_nonfinite needs an nn.Module to hook, got {type(model).__name__}")
    report = NonFiniteReport()
    names = {m: (n or type(model).__name__) for n, m in model.named_modules()}

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if report.module is not None:
            return
        kind = _nonfinite_kind(output)
        if kind is None:
            return
        report.module = f"{names[module]} ({type(module).__name__})"
        report.kind = kind
        report.input_was_finite = _nonfinite_kind(args) is None
        if raise_error:
            with english():
                message = str(report)
            raise NonFiniteError(message)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        yield report
    finally:
        for h in handles:
            h.remove()
