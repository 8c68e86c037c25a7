"""The texts torchdoctor prints besides explain()'s, for the gettext domain ``torchdoctor`` (issue 37): every
``tr("...")`` call of a module that binds ``tr = translator("<context>")`` (torchdoctor/explain_i18n.py), found in
the module's source, and the chapters' titles of course.toml (context ``chapter``).

A call whose text is not a literal string cannot be extracted, so it is an error here rather than a text that
``make i18n-update`` would silently leave untranslated.
"""

from __future__ import annotations

import ast
import importlib
import string
from pathlib import Path

import polib

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "torchdoctor"


def _translators(module_name: str) -> dict[str, str]:
    """The module-level names of a module bound to a translator, with their contexts."""
    module = importlib.import_module(module_name)
    return {name: value.context for name, value in vars(module).items()
            if callable(value) and isinstance(getattr(value, "context", None), str)
            and getattr(value, "__qualname__", "").startswith("translator.")}


def _calls(path: Path, names: dict[str, str]) -> list[tuple[str, str, int]]:
    """(context, text, line) of each call of a translator in the file, in source order."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
            continue
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            raise ValueError(f"{path.relative_to(REPO)}:{node.lineno}: {node.func.id}() needs a literal string as its "
                             "first argument, or `make i18n-update` cannot extract it")
        found.append((names[node.func.id], first.value, node.lineno))
    return sorted(found, key=lambda item: item[2])


def _has_placeholders(text: str) -> bool:
    return any(field is not None for _, field, _, _ in string.Formatter().parse(text))


def library_entries(package: Path = PACKAGE) -> list[polib.POEntry]:
    """One entry per (context, text), with the places that print it as its comment."""
    places: dict[tuple[str, str], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        if "translator(" not in path.read_text(encoding="utf-8"):
            continue
        module_name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        names = _translators(module_name)
        for context, text, _line in _calls(path, names):
            where = places.setdefault((context, text), [])
            if str(path.relative_to(REPO)) not in where:
                where.append(str(path.relative_to(REPO)))
    entries = [polib.POEntry(msgctxt=context, msgid=text, comment="printed by " + ", ".join(where),
                             flags=["python-brace-format"] if _has_placeholders(text) else [])
               for (context, text), where in places.items()]
    return entries + chapter_entries()


def chapter_entries() -> list[polib.POEntry]:
    """The chapters' titles: the cheat sheet, the summary tables and explain() name a chapter by its number and
    title."""
    from torchdoctor.explain_i18n import CHAPTER
    from torchdoctor.manifest import load_manifest

    return [polib.POEntry(msgctxt=CHAPTER, msgid=chapter.title,
                          comment=f"the title of chapter {chapter.number} ({chapter.slug}) in course.toml")
            for chapter in load_manifest().chapters]
