"""The one gradebook writer of a distributed batch: the driver records each result bundle through nbgrader's own code.

A grading host runs student code, so it must hold no gradebook credentials and write no gradebook row. It gets
instead a *template* (``assignment_template``): the source folder, the course's configuration and a private SQLite
gradebook holding the assignment's definition only (notebooks, grade, solution, task and source cells, due date;
no student, no score), copied through nbgrader's API from the course's gradebook, SQLite or PostgreSQL. There it runs
nbgrader's autograde on a private copy of one submission, and sends back a ``Bundle``: the autograded folder and
where the time went.

The driver, alone, records a bundle with nbgrader's own ``Autograde`` converter (``GradebookWriter.record``), its
input folder being the bundle's autograded folder: the sanitize step runs no preprocessor (the grading host did it)
and the autograde step runs nbgrader's ``SaveAutoGrades``, ``AssignLatePenalties`` and ``CheckCellMetadata``, so
the rows written are those nbgrader writes (student, submission with its timestamp, grades, comments), and the
files under ``autograded/`` those it copies. The submission's ``timestamp.txt`` is the one in ``submitted/``,
never the bundle's.

A bundle is recorded once: a second bundle for the same submission (Dask runs a task again when the worker that
held its result is lost), one of another run (``run`` token) or one arriving after the batch gave up on it, is
dropped and said so. A bundle is recorded only from executed notebooks: every notebook of the assignment present,
executed by a kernel (its ``language_info`` set); else the submission is reported ungraded with the reason.
"""

from __future__ import annotations

import sys

# What autograde.SKIPPED_MODULES says, for the workers, which import this module and not autograde: jsonschema's
# rfc3987_syntax costs 1.2 s of CPU per process when nbgrader is imported, for a check grading never makes.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import logging  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import typing as t  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path, PurePosixPath  # noqa: E402

import nbformat  # noqa: E402
from nbgrader import api as nbgrader_api  # noqa: E402
from nbgrader.api import Gradebook  # noqa: E402
from nbgrader.converters import Autograde  # noqa: E402
from nbgrader.converters.base import NbGraderException  # noqa: E402
from nbgrader.coursedir import CourseDirectory  # noqa: E402
from traitlets.config import Config, PyFileConfigLoader  # noqa: E402

RECORD_PREPROCESSORS = [
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]


@dataclass
class Bundle:
    """What a grading host sends back for one submission. ``files``: the autograded folder, relative path -> bytes
    (plain files only); ``status``: "graded" or "failed" (nbgrader gave up: ``reason`` says why, a grade of
    nothing, never retried); ``protections``: those in force on that host; ``events``: the timings lines
    (``execute.TIMINGS_ENV``) of its notebooks; ``reference_problems``: what the reference run of its notebooks
    found wrong with the hidden tests (the instructor's to fix); ``references``: those reference runs (the driver keeps
the clean ones for the next run)."""

    assignment: str
    student: str
    run: str
    status: str
    host: str = ""
    worker: str = ""
    reason: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    protections: dict[str, t.Any] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    reference_problems: list[str] = field(default_factory=list)
    log: str = ""
    references: dict[str, dict] = field(default_factory=dict)  # the source notebooks' reference runs, by digest


def load_config(course: Path) -> Config:
    """The course's nbgrader configuration (its nbgrader_config.py), as nbgrader loads it."""
    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def alembic_head() -> str:
    """The gradebook schema's version that nbgrader stamps a new gradebook with, read in this process: nbgrader's own
    ``get_alembic_version`` runs ``alembic heads`` in a new Python process (seconds on a loaded machine) each time it
    creates a gradebook. nbgrader's answer where its migrations do not have exactly one head."""
    global _alembic_head
    if _alembic_head is None:
        import nbgrader
        from alembic.script import ScriptDirectory

        heads = ScriptDirectory(os.path.join(os.path.dirname(nbgrader.__file__), "alembic")).get_heads()
        _alembic_head = heads[0] if len(heads) == 1 else nbgrader_api.get_alembic_version()
    return _alembic_head


_alembic_head: str | None = None


def assignment_template(db_url: str, course_id: str, assignment: str, target: Path) -> None:
    """Write at ``target`` a new SQLite gradebook with the assignment's definition from the course's gradebook."""
    stock = nbgrader_api.get_alembic_version
    nbgrader_api.get_alembic_version = alembic_head  # Gradebook() of a new file stamps it: no `alembic` process
    try:
        _copy_assignment(db_url, course_id, assignment, target)
    finally:
        nbgrader_api.get_alembic_version = stock


def _copy_assignment(db_url: str, course_id: str, assignment: str, target: Path) -> None:
    with Gradebook(db_url, course_id) as src, Gradebook(f"sqlite:///{target}", course_id) as dst:
        found = src.find_assignment(assignment)
        dst.update_or_create_assignment(assignment, duedate=found.duedate)
        for nb in found.notebooks:
            dst.update_or_create_notebook(nb.name, assignment)
            for c in nb.grade_cells:
                dst.update_or_create_grade_cell(c.name, nb.name, assignment, max_score=c.max_score,
                                                cell_type=c.cell_type)
            for c in nb.task_cells:
                dst.update_or_create_task_cell(c.name, nb.name, assignment, max_score=c.max_score,
                                               cell_type=c.cell_type)
            for c in nb.solution_cells:
                dst.update_or_create_solution_cell(c.name, nb.name, assignment)
            for c in nb.source_cells:
                dst.update_or_create_source_cell(c.name, nb.name, assignment, cell_type=c.cell_type, locked=c.locked,
                                                 source=c.source, checksum=c.checksum)


def notebook_names(db_url: str, course_id: str, assignment: str) -> list[str]:
    with Gradebook(db_url, course_id) as gb:
        return [n.name for n in gb.find_assignment(assignment).notebooks]


def unexecuted(bundle: Bundle, notebooks: list[str]) -> str | None:
    """Why the bundle cannot be recorded (a notebook missing, unreadable or never executed), or None."""
    for name in notebooks:
        data = bundle.files.get(f"{name}.ipynb")
        if data is None:
            return f"the result has no {name}.ipynb"
        try:
            nb = nbformat.reads(data.decode(), as_version=4)
        except Exception as exc:  # noqa: BLE001 -- any unreadable notebook is refused the same way
            return f"the result's {name}.ipynb is unreadable ({type(exc).__name__})"
        if "language_info" not in nb.metadata:
            return f"the result's {name}.ipynb was never executed by a kernel"
    return None


class GradebookWriter:
    """Records the bundles of one assignment's batch into the course's gradebook, each submission once."""

    def __init__(self, course: Path, assignment: str, run: str, db_url: str, course_id: str, inbox: Path) -> None:
        from course_tools.grading import nbgrader_costs

        nbgrader_costs.install()  # recording runs nbgrader's Autograde once per submission, as the workers do
        self.course, self.assignment, self.run = course, assignment, run
        self.db_url, self.course_id, self.inbox = db_url, course_id, inbox
        self.notebooks = notebook_names(db_url, course_id, assignment)
        self.expected: set[str] = set()
        self.recorded: set[str] = set()
        self.given_up: set[str] = set()
        self.dropped: list[str] = []
        self.log = logging.getLogger("torchdoctor.writer")

    def expect(self, students: t.Iterable[str]) -> None:
        self.expected.update(students)

    def give_up(self, student: str) -> None:
        """The batch reports this submission ungraded: a bundle that arrives later is dropped."""
        self.given_up.add(student)

    def record(self, bundle: Bundle) -> str | None:
        """Record the bundle; None when recorded, else why not (dropped, or refused: the submission is ungraded)."""
        key = f"{bundle.student}/{bundle.assignment}"
        if bundle.assignment != self.assignment or bundle.run != self.run or bundle.student not in self.expected:
            return self._drop(f"{key}: dropped a result of another run or batch")
        if bundle.student in self.recorded:
            return self._drop(f"{key}: dropped a duplicate result (recorded once already)")
        if bundle.student in self.given_up:
            return self._drop(f"{key}: dropped a late result (the batch had reported it ungraded)")
        if bundle.status != "graded":
            return f"grading failed: {bundle.reason}"
        why = unexecuted(bundle, self.notebooks)
        if why:
            return why
        folder = self.inbox / bundle.student / self.assignment
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, data in bundle.files.items():
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or path.name == "timestamp.txt":
                continue
            target = folder.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        stamp = self.course / "submitted" / bundle.student / self.assignment / "timestamp.txt"
        if stamp.is_file() and not stamp.is_symlink():
            shutil.copyfile(stamp, folder / "timestamp.txt")
        try:
            self._autograde(bundle.student)
        except (Exception, SystemExit) as exc:  # nbgrader's converter raises or exits on its errors
            return f"recording failed: {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.recorded.add(bundle.student)
        return None

    def _drop(self, line: str) -> str:
        self.dropped.append(line)
        self.log.warning(line)
        return line

    def _autograde(self, student: str) -> None:
        config = load_config(self.course)
        config.CourseDirectory.root = str(self.course)
        config.CourseDirectory.submitted_directory = str(self.inbox)  # absolute: nbgrader's paths keep it as is
        config.CourseDirectory.student_id = student
        config.CourseDirectory.assignment_id = self.assignment
        config.CourseDirectory.db_url = self.db_url
        config.CourseDirectory.course_id = self.course_id
        config.Autograde.sanitize_preprocessors = []
        config.Autograde.autograde_preprocessors = RECORD_PREPROCESSORS
        config.BaseConverter.force = True
        cwd = os.getcwd()
        try:
            with warnings.catch_warnings():  # nbgrader's own SQLAlchemy warnings, printed by every nbgrader autograde
                warnings.filterwarnings("ignore", module="nbgrader.api")
                Autograde(coursedir=CourseDirectory(config=config), config=config).start()
        except NbGraderException as exc:
            raise RuntimeError(f"nbgrader could not record the result ({exc})") from None
        finally:
            os.chdir(cwd)
