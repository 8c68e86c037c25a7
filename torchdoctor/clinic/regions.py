"""Protected regions: the parts of a template a fix must leave as they are (the data split, the number of epochs, the
evaluation), marked ``# --- protected: what (why) ---`` ... ``# --- end protected ---``, so that lowering the bar
does not pass. Shared by the practice checks (``practice.Case.protected_changes``) and the exam's static check."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["EVALUATION", "Region", "bound_names", "normalised", "protected_regions"]

EVALUATION = "evaluation"  # the region that defines predict(): an edit of it is judged by what it predicts

_START = re.compile(r"^# --- protected: (?P<what>.+?) ---\s*$")
_END = re.compile(r"^# --- end protected ---\s*$")


@dataclass(frozen=True)
class Region:
    name: str  # "the data split", "the number of epochs", "evaluation"
    why: str  # the rest of the marker's text
    start: int  # line number (1-based) of the start marker
    end: int  # line number of the end marker
    text: str  # the lines between the markers


def protected_regions(source: str) -> list[Region]:
    """The regions a template marks ``# --- protected: what (why) ---`` ... ``# --- end protected ---``."""
    regions, current = [], None
    lines = source.splitlines()
    for number, line in enumerate(lines, 1):
        m = _START.match(line)
        if m and current is None:
            current = (m.group("what"), number)
        elif _END.match(line) and current is not None:
            what, start = current
            name, _, why = what.partition(" (")
            regions.append(Region(name, why.rstrip(")"), start, number, "\n".join(lines[start:number - 1])))
            current = None
    return regions


def normalised(text: str) -> str:
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:
        return "\n".join(line.split("#")[0].rstrip() for line in text.splitlines() if line.strip())


def bound_names(text: str) -> set[str]:
    """The names a protected region defines (assigned, or defined as functions)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        for sub in ast.walk(node) if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) else ():
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
    return names
