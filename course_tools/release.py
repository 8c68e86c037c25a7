"""Generate exercises/ and solutions/ from the nbgrader sources (``make release``).

autograder/source/<a>/<a>.ipynb is the single source of each assignment that course.toml marks ready. From it:

- exercises/<a>/<a>.ipynb is what nbgrader's ``generate_assignment`` releases to students;
- solutions/<a>/<a>.ipynb is the source with its hidden tests and solution markers removed.

Both are generated in a scratch copy of the course, so releasing never touches the instructor's gradebook.

Usage: python -m course_tools.release [--check] [ASSIGNMENT ...]
"""

from __future__ import annotations

import argparse
import copy as copy_module
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

from course_tools.manifest_cli import UnknownAssignment, ready_assignments, select_assignments

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "autograder"
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def assignments() -> list[str]:
    """The ready assignments of the course manifest (course.toml); tests/test_manifest.py checks their sources."""
    return ready_assignments()


def nbgrader_env() -> dict[str, str]:
    """The environment for nbgrader calls: it shells out to alembic, so this venv's bin/ goes first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def nbgrader(*args: str, course: Path) -> subprocess.CompletedProcess:
    """Run an nbgrader command in ``course``; raise with its output when it fails."""
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed in {course}:\n{proc.stdout}\n{proc.stderr}")
    return proc


_released: dict[str, NotebookNode] = {}


def _source_digest(assignment: str, course: Path) -> str:
    """What a released notebook depends on: the course's configuration and every file of the assignment's source."""
    digest = hashlib.sha256((course / "nbgrader_config.py").read_bytes())
    for path in sorted((course / "source" / assignment).rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(course)).encode() + b"\0" + path.read_bytes())
    return f"{assignment}:{digest.hexdigest()}"


def student_notebook(assignment: str, course: Path = COURSE) -> NotebookNode:
    """The notebook students get, as nbgrader's generate_assignment makes it (in a scratch course copy). Kept for
    the process, keyed by what it depends on: each generation is an nbgrader process (the release tests asked for
    each assignment's twice, 12 generations of 50-95 s each under make test's load)."""
    key = _source_digest(assignment, course)
    if key not in _released:
        with tempfile.TemporaryDirectory(prefix="release-") as scratch:
            copy = Path(scratch) / "course"
            copy.mkdir()
            shutil.copy(course / "nbgrader_config.py", copy)
            shutil.copytree(course / "source" / assignment, copy / "source" / assignment)
            nbgrader("generate_assignment", assignment, "--force", course=copy)
            _released[key] = nbformat.read(copy / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    return copy_module.deepcopy(_released[key])


def solution_notebook(assignment: str, course: Path = COURSE) -> NotebookNode:
    """The solved notebook: source minus hidden tests and minus the solution marker lines."""
    nb = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    hidden = {cell.id for cell in nb.cells if "### BEGIN HIDDEN TESTS" in cell.source}
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    for cell in nb.cells:
        if cell.id in hidden:  # the blank lines around the removed block, folded as if it had never been there
            cell.source = re.sub(r"\n{3,}", "\n\n", cell.source).strip("\n")
        if any(marker in cell.source for marker in SOLUTION_MARKERS):
            lines = cell.source.splitlines()
            cell.source = "\n".join(line for line in lines if line.strip() not in SOLUTION_MARKERS)
    return nb


def generated(assignment: str, course: Path = COURSE) -> dict[Path, NotebookNode]:
    """Each generated file of an assignment, keyed by its path in the repository."""
    name = f"{assignment}.ipynb"
    return {
        REPO / "exercises" / assignment / name: student_notebook(assignment, course),
        REPO / "solutions" / assignment / name: solution_notebook(assignment, course),
    }


def stale_files(assignment: str) -> list[Path]:
    """Generated files that are missing or differ from what the source generates now."""
    stale = []
    for path, nb in generated(assignment).items():
        if not path.is_file() or nbformat.read(path, as_version=4) != nb:
            stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every ready assignment of course.toml")
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    try:
        names = select_assignments(args.assignments)
    except UnknownAssignment as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.check:
        stale = [path for name in names for path in stale_files(name)]
        for path in stale:
            print(f"out of date: {path.relative_to(REPO)} (run `make release`)")
        return 1 if stale else 0
    for name in names:
        for path, nb in generated(name).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
