"""The course manifest (``course.toml`` at the repository root): chapters, reference notebooks and assignments.

It is the only place a chapter's number, slug, title, notebook, homework and status are written; the catalog's
chapter list, the notebook runner, release, autograde, the grading corpora and the README table read it here.
Read lazily: importing torchdoctor never needs the file (graded kernels run without the repository).
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Assignment", "Chapter", "Manifest", "ManifestError", "load_manifest", "manifest_path"]

Status = Literal["ready", "planned"]
STATUSES = ("ready", "planned")


class ManifestError(RuntimeError):
    """course.toml is missing or malformed."""


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    notebook: str
    covers: str
    status: Status
    homework: str | None = None

    @property
    def label(self) -> str:
        """'01 Dimensions and shapes': how the cheat sheet and explain() name the chapter."""
        return f"{self.number:02d} {self.title}"


@dataclass(frozen=True)
class Reference:
    notebook: str
    title: str
    covers: str


@dataclass(frozen=True)
class Assignment:
    name: str
    status: Status
    chapter: str | None  # slug of the chapter whose `homework` names it


@dataclass(frozen=True)
class Manifest:
    chapters: tuple[Chapter, ...]
    references: tuple[Reference, ...]
    assignments: tuple[Assignment, ...]

    def chapter(self, slug: str) -> Chapter:
        for ch in self.chapters:
            if ch.slug == slug:
                return ch
        raise KeyError(f"unknown chapter {slug!r}; the manifest has {', '.join(c.slug for c in self.chapters)}")

    def assignment_names(self, status: Status | None = "ready") -> list[str]:
        """Assignments in manifest order; ``status=None`` gives planned ones too."""
        return [a.name for a in self.assignments if status is None or a.status == status]

    def notebooks(self, status: Status | None = "ready") -> list[str]:
        """Course notebooks (chapters, then references), as paths relative to the repository."""
        chapters = [c.notebook for c in self.chapters if status is None or c.status == status]
        return chapters + [r.notebook for r in self.references]


def manifest_path() -> Path:
    """$TORCHDOCTOR_MANIFEST, else course.toml beside the torchdoctor package (the repository root)."""
    return Path(os.environ.get("TORCHDOCTOR_MANIFEST") or Path(__file__).resolve().parent.parent / "course.toml")


def _require(table: dict, key: str, kind: type, where: str) -> object:
    if not isinstance(table.get(key), kind):
        raise ManifestError(f"{where}: `{key}` must be a {kind.__name__}, got {table.get(key)!r}")
    return table[key]


def _status(table: dict, where: str) -> Status:
    status = _require(table, "status", str, where)
    if status not in STATUSES:
        raise ManifestError(f"{where}: status must be one of {STATUSES}, got {status!r}")
    return status  # type: ignore[return-value]


def _tables(data: dict, key: str, path: Path) -> list[dict]:
    tables = data.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ManifestError(f"{path.name}: `{key}` must be an array of tables, each written [[{key}]]")
    return tables


def _homework(table: dict, where: str) -> str | None:
    if "homework" in table:
        return _require(table, "homework", str, where)  # type: ignore[return-value]
    return None


@functools.cache
def _load(path: Path) -> Manifest:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"no course manifest at {path}; run from a clone of the course "
                            "or set TORCHDOCTOR_MANIFEST to its course.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    chapters = []
    for i, t in enumerate(_tables(data, "chapter", path)):
        where = f"{path.name} chapter #{i + 1}"
        chapters.append(Chapter(
            number=_require(t, "number", int, where), slug=_require(t, "slug", str, where),
            title=_require(t, "title", str, where), notebook=_require(t, "notebook", str, where),
            covers=_require(t, "covers", str, where), status=_status(t, where), homework=_homework(t, where),
        ))
    references = []
    for i, t in enumerate(_tables(data, "reference", path)):
        where = f"{path.name} reference #{i + 1}"
        references.append(Reference(notebook=_require(t, "notebook", str, where),
                                    title=_require(t, "title", str, where), covers=_require(t, "covers", str, where)))
    homework_of = {c.homework: c.slug for c in chapters if c.homework}
    assignments = []
    for i, t in enumerate(_tables(data, "assignment", path)):
        where = f"{path.name} assignment #{i + 1}"
        name = _require(t, "name", str, where)
        assignments.append(Assignment(name=name, status=_status(t, where), chapter=homework_of.get(name)))
    for field, values in (("chapter slug", [c.slug for c in chapters]),
                          ("chapter number", [c.number for c in chapters]),
                          ("assignment name", [a.name for a in assignments])):
        duplicates = sorted({str(v) for v in values if values.count(v) > 1})
        if duplicates:
            raise ManifestError(f"{path.name}: duplicate {field}: {', '.join(duplicates)}")
    unknown = sorted(set(homework_of) - {a.name for a in assignments})
    if unknown:
        raise ManifestError(f"{path.name}: chapters name homework with no [[assignment]]: {', '.join(unknown)}")
    return Manifest(tuple(chapters), tuple(references), tuple(assignments))


def load_manifest(path: Path | None = None) -> Manifest:
    return _load((path or manifest_path()).resolve())
