"""Where the course teaches something: a chapter and its section, found from the manifest (course.toml) and the
chapter notebook's headings and declared errors, for the clinic's hints."""

from __future__ import annotations

import functools
import json

__all__ = ["chapter_pointer", "course_manifest", "error_pointer"]


@functools.cache
def course_manifest():
    try:
        from torchdoctor.manifest import load_manifest

        return load_manifest()
    except Exception:  # a graded kernel may run without the repository's course.toml
        return None


@functools.cache
def _headings(notebook: str) -> list[tuple[str, list[str]]]:
    """A notebook's '## ' headings, each with the catalog ids its cells declare to raise below it."""
    manifest = course_manifest()
    if manifest is None:
        return []
    from torchdoctor.manifest import manifest_path

    path = manifest_path().parent / notebook
    if not path.exists():
        return []
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found: list[tuple[str, list[str]]] = []
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            found += [(line[3:].strip(), []) for line in source.splitlines() if line.startswith("## ")]
        raises = cell.get("metadata", {}).get("torchdoctor", {}).get("raises")
        if raises and found:
            found[-1][1].append(raises.get("id"))
    return found


def chapter_pointer(slug: str, heading_start: str | None = None, error_id: str | None = None) -> str:
    """'course/02_gradients.ipynb, § 1. No `grad_fn`...' : where the course teaches something."""
    manifest = course_manifest()
    if manifest is None:
        return f"chapter {slug!r}"
    try:
        chapter = manifest.chapter(slug)
    except KeyError:
        return f"chapter {slug!r}"
    where = f"chapter {chapter.number} ({chapter.notebook})"
    for heading, ids in _headings(chapter.notebook):
        if (error_id and error_id in ids) or (heading_start and heading.startswith(heading_start)):
            return f"{where}, section “{heading}”"
    return where


def error_pointer(error_id: str | None) -> str:
    if not error_id:
        return "chapter 0 (course/00_method.ipynb): read the traceback from the bottom up"
    from torchdoctor import get_entry

    try:
        entry = get_entry(error_id)
    except Exception:
        return chapter_pointer("method", "2.")
    return chapter_pointer(entry.chapter, error_id=error_id)
