"""nbgrader's own test suite, run through this course's hardened grading settings (``make test``'s part
"nbgrader-suite"; docs/instructors.md "A drop-in for nbgrader").

nbgrader ships its tests inside the installed package (``nbgrader/tests/apps/``). They run each nbgrader command in
a fresh temporary course folder whose own ``nbgrader_config.py`` sets only the course root. This runner writes a
``nbgrader_config.py`` into a folder of its own that loads ``autograder/nbgrader_config.py`` minus what belongs to
this course only (its root and id), and names that folder in ``JUPYTER_CONFIG_PATH``: every command of the suite then
grades as this course does (sandboxed kernels from the zygote, references, verdicts, restored cells, safe collect).

The tests that show an intended difference from stock nbgrader are deselected by name (``DIFFERENCES``), each with
the one-line reason printed at the end of the run; docs/instructors.md lists the same differences. Anything else failing
is a bug of the drop-in.

Every test of the suite creates a gradebook, and nbgrader's ``Gradebook`` stamps a new database with the migration
head it gets from a subprocess (``nbgrader.api.get_alembic_version``: ``alembic heads``, a Python start-up and
nbgrader's migrations imported, 2.8 s of CPU and 9-13 s of wall time on the loaded 2-core machine): about half of the
suite's wall time. The head is a property of the installed nbgrader, the same for every test, so this plugin asks
alembic once per run and reuses the answer (``pytest_configure``); the stamped version is the one alembic gives.

Usage: python -m course_tools.nbgrader_suite [pytest arguments ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import typing as t
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COURSE_CONFIG = REPO / "autograder" / "nbgrader_config.py"
FILES = ("test_nbgrader_autograde.py", "test_nbgrader_generate_feedback.py", "test_nbgrader_collect.py",
         "test_nbgrader_zip_collect.py")

# test name (class::function, or function) -> why the hardened grader differs from stock nbgrader there, on purpose.
UNKNOWN_CELLS = ("a submitted cell with nbgrader metadata the gradebook does not know runs as a plain cell "
                 "(reported as tampering) and the submission is graded; stock nbgrader fails the whole submission, "
                 "which a student could do on purpose")
DIFFERENCES: dict[str, str] = {
    "TestNbGraderAutograde::test_handle_failure": UNKNOWN_CELLS,
    "TestNbGraderAutograde::test_handle_failure_single_notebook": UNKNOWN_CELLS,
}

INJECTED = '''\
# Written by course_tools.nbgrader_suite: the course's grading settings, without the course's own root and id.
c = get_config()  # noqa: F821
load_subconfig({config!r})  # noqa: F821
for _name in ("root", "course_id"):
    c.CourseDirectory.pop(_name, None)
'''


def apps_folder() -> Path:
    import nbgrader.tests.apps

    return Path(nbgrader.tests.apps.__file__).parent


def pytest_configure(config: t.Any) -> None:
    """nbgrader's ``get_alembic_version`` asked once per run (the module docstring says why)."""
    import functools

    import nbgrader.api

    nbgrader.api.get_alembic_version = functools.cache(nbgrader.api.get_alembic_version)


def pytest_collection_modifyitems(config: t.Any, items: list[t.Any]) -> None:
    """Deselect the intended differences by name."""
    kept, dropped = [], []
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        base = name.split("[", 1)[0]
        (dropped if name in DIFFERENCES or base in DIFFERENCES else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter: t.Any) -> None:
    terminalreporter.section("intended differences from stock nbgrader (deselected)")
    for name, reason in DIFFERENCES.items():
        terminalreporter.write_line(f"{name}: {reason}")


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="td-nbgrader-suite-") as folder:
        Path(folder, "nbgrader_config.py").write_text(INJECTED.format(config=str(COURSE_CONFIG)))
        env = {**os.environ, "JUPYTER_CONFIG_PATH": os.pathsep.join(
            filter(None, [folder, os.environ.get("JUPYTER_CONFIG_PATH")]))}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # alembic
        apps = apps_folder()
        command = [sys.executable, "-m", "pytest", "-p", "course_tools.nbgrader_suite", "-p", "no:cacheprovider",
                   "--rootdir", str(apps), *[str(apps / name) for name in FILES], *(argv or [])]
        return subprocess.run(command, cwd=folder, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
