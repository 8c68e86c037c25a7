"""The course manifest's assignments, for the Makefile and the course tools (course.toml is their one source).

``python -m course_tools.manifest_cli assignments`` prints the ready assignments, one a line; given names, it
prints them back when each is a ready assignment, else one line on stderr that lists the known ones, and exits 2.

Usage: python -m course_tools.manifest_cli assignments [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torchdoctor.manifest import ManifestError, load_manifest


class UnknownAssignment(ValueError):
    """A name that is not a ready assignment of the manifest; the message lists the ready ones."""


def ready_assignments() -> list[str]:
    """The assignments course.toml marks ready, in its order."""
    return load_manifest().assignment_names("ready")


def select_assignments(names: Sequence[str]) -> list[str]:
    """``names`` when each is a ready assignment (every ready one when empty); UnknownAssignment otherwise."""
    manifest = load_manifest()
    ready = manifest.assignment_names("ready")
    if not names:
        return ready
    planned = set(manifest.assignment_names("planned"))
    known = ", ".join(ready) or "none"
    for name in names:
        if name in planned:
            raise UnknownAssignment(f"assignment {name!r} is planned in course.toml, not ready; "
                                    f"the ready assignments are: {known}")
        if name not in ready:
            raise UnknownAssignment(f"unknown assignment {name!r}; the course's assignments are: {known}")
    return list(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("assignments", help="ready assignments, or check the names given")
    listing.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    try:
        names = select_assignments(args.names)
    except (UnknownAssignment, ManifestError) as exc:
        print(exc, file=sys.stderr)
        return 2
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
