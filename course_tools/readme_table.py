"""The README's chapter table, generated from the course manifest (course.toml).

The table and the sentence below it sit between two marker comments in README.md's "Chapters" section;
tests/test_manifest.py fails when they differ from what the manifest generates.

Usage: python -m course_tools.readme_table [--write]   (without --write: print the generated text)
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from torchdoctor.manifest import Chapter, Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BEGIN = "<!-- chapters: generated from course.toml by `python -m course_tools.readme_table --write`; do not edit -->"
END = "<!-- end of the generated chapters -->"


def _code_list(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _notebook_cell(notebook: str, exists: bool) -> str:
    return f"[`{notebook}`]({notebook})" if exists else f"`{notebook}`"


def _homework_cell(chapter: Chapter, manifest: Manifest) -> str:
    """A ready assignment links to the students' starter; a planned one beside a ready chapter says so."""
    name = chapter.homework
    if not name:
        return ""
    if name in manifest.assignment_names("ready"):
        return f"[`{name}`](exercises/{name}/{name}.ipynb)"
    return f"`{name}` (planned)" if chapter.status == "ready" else f"`{name}`"


def generated(manifest: Manifest) -> str:
    """The table (chapters, then reference notebooks) and a sentence on what exists and what is planned."""
    table = [("chapter", "notebook", "what it covers", "homework", "status"), ("---",) * 5]
    for ch in manifest.chapters:
        table.append((ch.label, _notebook_cell(ch.notebook, ch.status == "ready"), ch.covers,
                      _homework_cell(ch, manifest), ch.status))
    for ref in manifest.references:
        table.append((ref.title, _notebook_cell(ref.notebook, True), ref.covers, "", "ready"))
    rows = ["| " + " | ".join(cells) + " |" for cells in table]

    ready_chapters = [c for c in manifest.chapters if c.status == "ready"]
    ready_homework = manifest.assignment_names("ready")
    planned_homework = manifest.assignment_names("planned")
    verb = "is" if len(ready_chapters) == 1 else "are"
    sentence = (f"The course is written chapter by chapter: {len(ready_chapters)} of its {len(manifest.chapters)} "
                f"chapters {verb} ready; *planned* chapters follow the design and do not exist yet.")
    if ready_homework:
        verb = "is" if len(ready_homework) == 1 else "are"
        sentence += f" Homework {_code_list(ready_homework)} {verb} ready and autograded"
        sentence += f"; {_code_list(planned_homework)} come with their chapters." if planned_homework else "."
    elif planned_homework:
        sentence += f" No homework is ready yet; {_code_list(planned_homework)} come with their chapters."
    return "\n".join([*rows, "", textwrap.fill(sentence, width=115)])


def split(text: str) -> tuple[str, str, str]:
    """README text before the generated part (through the first marker), the part, and the rest."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"README.md must hold the marker lines {BEGIN!r} and then {END!r}, once each")
    head, rest = text.split(BEGIN)
    part, tail = rest.split(END)
    return head + BEGIN, part.strip("\n"), END + tail


def rewritten(text: str, manifest: Manifest) -> str:
    head, _, tail = split(text)
    return f"{head}\n\n{generated(manifest)}\n\n{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the table in README.md")
    args = parser.parse_args(argv)
    manifest = load_manifest()
    if not args.write:
        print(generated(manifest))
        return 0
    try:
        text = rewritten(README.read_text(encoding="utf-8"), manifest)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    README.write_text(text, encoding="utf-8")
    print(f"wrote the chapter table in {README.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
