"""Observation records for hidden tests: observe in the kernel, decide in the grader.

A hidden test runs the student's code on inputs the student never saw, turns what comes back into plain JSON
data with the helpers below, and displays one record. The grader compares that record with the reference
solution's, outside the student's process (docs/authors.md, "Hidden tests"). Nothing here decides pass or fail: the
functions only describe values, so a student who patches them gains nothing but a wrong record.

    from torchdoctor.observe import Record, tensor, shape
    rec = Record()
    for n in (1, 5):
        rec.check(f"n={n}: shape", lambda: shape(flatten_batch(data(n, 4, 3, seed=n))))
    rec.show()
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

__all__ = [
    "MIME", "Record", "canonical", "data", "describe", "error", "integer", "number", "numbers", "parameter_shapes",
    "plain", "shape", "tensor",
]

MIME = "application/vnd.torchdoctor.observed+json"
MAX_TEXT = 300


def error(exc: BaseException) -> str:
    """An exception as data: the grader shows it to the student as what their code did."""
    return f"raised {type(exc).__name__}: {exc}"[:MAX_TEXT]


def _not(kind: str, value: Any) -> str:
    return f"not {kind}: {type(value).__name__}"


def _json_floats(value: Any) -> Any:
    """NaN and infinities as 'nan', 'inf', '-inf': JSON has none, and the kernel would otherwise warn on stderr."""
    if type(value) is list:
        return [_json_floats(v) for v in value]
    return str(value) if type(value) is float and not math.isfinite(value) else value


def tensor(value: Any) -> list | float | int | bool | str:
    """The values of an exact ``torch.Tensor`` (no subclasses, which could fake them), as nested lists (a number for
    a 0-d tensor); NaN and infinities as :func:`number` gives them."""
    return _json_floats(value.detach().cpu().tolist()) if type(value) is torch.Tensor else _not("a tensor", value)


def shape(value: Any) -> list[int] | str:
    return list(value.shape) if type(value) is torch.Tensor else _not("a tensor", value)


def integer(value: Any) -> int | str:
    """An int (or anything with ``__index__`` other than bool, such as a 0-d integer tensor's ``.item()``)."""
    if type(value) is bool:
        return f"a bool: {value!r}"
    try:
        return int(operator.index(value))
    except TypeError:
        return _not("an int", value)


def number(value: Any) -> float | str:
    """A real number as a float; NaN and infinities as the strings 'nan', 'inf', '-inf' (JSON has none)."""
    if type(value) is bool or type(value) not in (int, float):
        return _not("a Python number", value)
    value = float(value)
    return value if math.isfinite(value) else str(value)


def numbers(values: Any) -> list | str:
    """A list or tuple of Python numbers, each as :func:`number` gives it."""
    if type(values) not in (list, tuple):
        return _not("a list", values)
    return [number(v) for v in values]


def plain(value: Any) -> Any:
    """The value if JSON can carry it, else a note of its type: a value the record cannot hold (a tensor left in a
    list, say) costs its own check, not the whole record."""
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"not plain data: {exc}"[:MAX_TEXT]
    return value


def describe(value: Any, depth: int = 0) -> Any:
    """Any value as plain data the grader can compare: exact tensors (and NumPy arrays) as their dtype, shape and
    values, Python numbers as :func:`number`, lists, tuples and dicts element by element; anything else by its
    type's name only (its repr could be made to lie). Used by ``course_tools.grading.observe_asserts``."""
    if depth > 20:
        return "nested too deep"
    if value is None or type(value) in (bool, str):
        return value
    if type(value) in (int, float):
        return number(value)
    if type(value) is torch.Tensor:
        return {"dtype": str(value.dtype), "shape": shape(value), "values": tensor(value)}
    if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":
        return describe(torch.from_numpy(value.copy()), depth + 1)
    if type(value) in (list, tuple):
        return [describe(v, depth + 1) for v in value]
    if type(value) is dict:
        return {str(k): describe(v, depth + 1) for k, v in value.items()}
    return f"a {type(value).__name__}"


def data(*size: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A seeded random tensor: the reference run and the student's run see the same input."""
    return torch.randn(size, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def canonical(model: nn.Module, scale: float = 0.3) -> nn.Module:
    """Give every parameter values that depend only on its shape, in place, and return the model.

    Equal architectures then compute equal outputs whatever order their layers were defined or registered in,
    and whether they were built eagerly or by lazy layers (materialise those with one forward pass first).
    """
    with torch.no_grad():
        for p in model.parameters():
            seed = sum((i + 1) * 7919 * s for i, s in enumerate(p.shape)) % 100_003
            p.copy_(scale * torch.randn(tuple(p.shape), generator=torch.Generator().manual_seed(seed)))
    return model


def parameter_shapes(model: Any) -> list[list[int]] | str:
    """The shapes of a module's parameters, sorted: the same for any order of definition."""
    if not isinstance(model, nn.Module):
        return _not("an nn.Module", model)
    return sorted(list(p.shape) for p in model.parameters())


class Record:
    """The one record a hidden test displays: named checks, optional alternatives, optional partial credit.

    Partial credit (``partial=True``) is the weighted share of checks passed: ``weight`` says what a check is worth
    (1 by default; the check that carries the part's lesson is worth the most). ``requirements`` names the ids of
    the requirement sentences of the student text that a check tests (the requirement table). :meth:`choice`
    records a set of names picked from a closed list, scored so that listing every option earns nothing: each right
    name earns its share, each wrong name costs as much. Only the reference run's weights, requirements and
    choices count: the grader ignores those a student's kernel displays.
    """

    def __init__(self, partial: bool = False) -> None:
        self.checks: dict[str, Any] = {}
        self.alternatives: dict[str, list[Any]] = {}
        self.weights: dict[str, float] = {}
        self.requirements: dict[str, list[str]] = {}
        self.choices: list[str] = []
        self.partial = partial
        self._shown = False

    def _declare(self, name: str, weight: float, requirements: Iterable[str]) -> None:
        if not (isinstance(weight, int | float) and not isinstance(weight, bool) and weight > 0):
            raise ValueError(f"the weight of check {name!r} must be a positive number, got {weight!r}")
        if weight != 1:
            self.weights[name] = float(weight)
        if requirements:
            self.requirements[name] = sorted(requirements)

    def check(self, name: str, observe: Callable[[], Any], weight: float = 1, requirements: Iterable[str] = ()
              ) -> Any:
        """Record what ``observe()`` returns, or the exception it raised (one failure costs one check)."""
        self._declare(name, weight, tuple(requirements))
        try:
            value = observe()
        except Exception as exc:  # the student's error is an observation like any other
            value = error(exc)
        self.checks[name] = plain(value)
        return value

    def value(self, name: str, value: Any, weight: float = 1, requirements: Iterable[str] = ()) -> None:
        self._declare(name, weight, tuple(requirements))
        self.checks[name] = plain(value)

    def choice(self, name: str, observe: Callable[[], Any], weight: float = 1, requirements: Iterable[str] = ()
               ) -> Any:
        """Record the names ``observe()`` returns (a set, list or tuple of strings) as a sorted list, scored as a
        choice from a closed list (see the class docstring)."""
        self.choices.append(name)

        def names() -> Any:
            picked = observe()
            if type(picked) not in (set, frozenset, list, tuple) or any(type(n) is not str for n in picked):
                return _not("a set of names", picked)
            return sorted(set(picked))

        return self.check(name, names, weight, requirements)

    def accept(self, name: str, values: Iterable[Any]) -> None:
        """Other values the grader accepts for ``name`` (read from the reference run only)."""
        self.alternatives[name] = list(values)

    def as_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"checks": self.checks}
        for key in ("alternatives", "weights", "requirements", "choices"):
            if getattr(self, key):
                record[key] = getattr(self, key)
        if self.partial:
            record["partial"] = True
        return record

    def show(self) -> None:
        """Display the record (once: a second record in one cell fails the cell)."""
        from IPython.display import display

        if self._shown:
            raise RuntimeError("this record was already displayed; a test cell displays exactly one")
        self._shown = True
        display({MIME: self.as_json()}, raw=True)
