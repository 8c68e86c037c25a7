"""Shapes: a per-layer table of output shapes, and a readable shape check."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from torchdoctor.explain_i18n import translator

__all__ = ["LayerRow", "ShapeTable", "ShapeMismatchError", "shape_table", "expect_shape"]

tr = translator("shapes")  # the table's words in the learner's language (torchdoctor/explain_i18n.py)
FAILED = "FAILED"  # the output shape of the layer that failed (shown translated)


def _width(text: str) -> int:
    """Columns a text takes in a terminal: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _shapes(obj: Any) -> str:
    shapes = [tuple(t.shape) for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]
    if not shapes:
        return "-"
    return ", ".join(str(list(s)) for s in shapes)


@dataclass
class LayerRow:
    name: str
    kind: str
    input_shape: str
    output_shape: str
    params: int


@dataclass
class ShapeTable:
    """Rows for every leaf layer that ran; when a layer failed, ``failed_layer`` names it and ``error`` holds
    the exception (the table stops there)."""

    rows: list[LayerRow] = field(default_factory=list)
    failed_layer: str | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def _cells(self) -> list[list[str]]:
        return [[r.name, r.kind, r.input_shape, tr("FAILED") if r.output_shape == FAILED else r.output_shape,
                 f"{r.params:,}"] for r in self.rows]

    def _footer(self) -> str:
        if self.error is None:
            return ""
        from torchdoctor.explain import explain

        diagnosis = explain(self.error)
        lines = [tr("FAILED in {layer}: {error}", layer=self.failed_layer,
                    error=f"{type(self.error).__name__}: {str(self.error).splitlines()[0]}")]
        if diagnosis is not None:
            lines.append(tr("fix: {fix}", fix=diagnosis.fix))
        return "\n".join(lines)

    @staticmethod
    def _header() -> list[str]:
        return [tr("layer"), tr("type"), tr("input"), tr("output"), tr("params")]

    def __str__(self) -> str:
        header = self._header()
        cells = [header, *self._cells()]
        widths = [max(_width(row[i]) for row in cells) for i in range(len(header))]
        lines = ["  ".join(c + " " * (w - _width(c)) for c, w in zip(row, widths, strict=True)).rstrip()
                 for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        footer = self._footer()
        return "\n".join(lines + ([footer] if footer else []))

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(self._header()) + " |", "| --- | --- | --- | --- | ---: |"]
        for row in self._cells():
            lines.append("| " + " | ".join(f"`{c}`" if i < 4 else c for i, c in enumerate(row)) + " |")
        footer = self._footer()
        if footer:
            lines += ["", "**" + footer.splitlines()[0] + "**", *footer.splitlines()[1:]]
        return "\n".join(lines)


def shape_table(model: nn.Module, *example_inputs: Any, **example_kwargs: Any) -> ShapeTable:
    """Run ``model(*example_inputs)`` once without gradients and record each leaf layer's shapes.

    A failure does not raise: the table ends at the layer that failed, ``failed_layer`` names it (or the
    module whose own ``forward`` code failed between layers) and ``error`` holds the exception.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"shape_table needs an nn.Module, got {type(model).__name__}")
    table = ShapeTable()
    names = {m: (n or type(model).__name__) for n, m in model.named_modules()}
    stack: list[nn.Module] = []
    inputs: dict[int, str] = {}

    def pre(module: nn.Module, args: Any) -> None:
        stack.append(module)
        inputs[id(module)] = _shapes(args)

    def post(module: nn.Module, args: Any, output: Any) -> None:
        stack.pop()
        if not any(True for _ in module.children()):
            params = sum(p.numel() for p in module.parameters(recurse=False))
            table.rows.append(
                LayerRow(names[module], type(module).__name__, inputs[id(module)], _shapes(output), params)
            )

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    try:
        with torch.no_grad():
            model(*example_inputs, **example_kwargs)
    except Exception as exc:
        failing = stack[-1] if stack else model
        table.failed_layer = f"{names[failing]} ({type(failing).__name__})"
        params = sum(p.numel() for p in failing.parameters(recurse=False))
        table.rows.append(
            LayerRow(names[failing], type(failing).__name__, inputs.get(id(failing), "-"), FAILED, params)
        )
        table.error = exc
    finally:
        for h in handles:
            h.remove()
    return table


class ShapeMismatchError(ValueError):
    """A tensor did not have the shape the code expected."""


def expect_shape(
    tensor: torch.Tensor, expected: Sequence[int | str | None], name: str = "tensor"
) -> torch.Tensor:
    """Check ``tensor.shape`` against ``expected`` and return the tensor.

    Each expected entry is an int (exact size), None (any size) or a name such as "N": the same name must
    have the same size everywhere in the pattern. The error says which dimension differs.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: expect_shape needs a tensor, got {type(tensor).__name__}")
    if isinstance(expected, str) or not all(e is None or isinstance(e, int | str) for e in expected):
        raise TypeError(f"expected must be a sequence of ints, names or None, such as ('N', 3, None); got {expected!r}")
    shape = tuple(tensor.shape)
    pattern = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
    if len(shape) != len(expected):
        raise ShapeMismatchError(
            f"{name}: expected {len(expected)} dimensions {pattern}, got {len(shape)}: {list(shape)}. "
            f"Add or remove dimensions (unsqueeze/squeeze/reshape) before this point."
        )
    bound: dict[str, int] = {}
    for dim, (size, want) in enumerate(zip(shape, expected, strict=True)):
        if want is None:
            continue
        if isinstance(want, str):
            if bound.setdefault(want, size) != size:
                raise ShapeMismatchError(
                    f"{name}: expected shape {pattern}, got {list(shape)}: dimension {dim} is {size} but {want!r} "
                    f"was {bound[want]} in an earlier dimension."
                )
        elif size != want:
            raise ShapeMismatchError(
                f"{name}: expected shape {pattern}, got {list(shape)}: dimension {dim} is {size}, expected {want}."
            )
    return tensor
