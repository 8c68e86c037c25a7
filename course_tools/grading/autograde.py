"""Autograde every submission of the given assignments on a Dask cluster, with nbgrader's own ``autograde``.

Per assignment:

1. hash every submitted file (they must be byte-identical after grading);
2. send one task per submission to the cluster (``engine``: a local one by default, an existing Dask cluster, or
   Slurm): each worker grades with nbgrader's hardened autograde in a private copy of the course, its kernels
   forked from the worker's pre-warmed zygote, and returns a result bundle; this process, the only gradebook
   writer, records each bundle as it arrives through nbgrader's own code (``writer``), into SQLite or PostgreSQL;
3. check that every submission has a score for every graded cell, and that no submitted file changed;
4. write ``results/<assignment>.json`` (per-test results, tampering per student, the protections in force, the
   submissions left ungraded and why), and print where the time went (start-up, references, per submission,
   checks).

The reference runs of the source notebooks are kept in the course root's build/references/ (``references.keep``):
a second run of the same assignment, with nothing they depend on changed, runs none ("references: cached").

Then ``nbgrader export`` writes grades.csv (in this process: a new one would import nbgrader again). Exit status 1
when a submission stays ungraded or a submitted file changed; 2, before anything runs, for an unknown assignment.

Usage: python -m course_tools.grading.autograde [ASSIGNMENT ...] [--workers N] [--force] [--course DIR]
       [--engine local|dask|slurm] [--scheduler tcp://host:port] [--db-url URL] [Slurm: --queue --cores --memory
       --walltime --gpus]
"""

from __future__ import annotations

import sys

# jsonschema, which nbgrader imports, imports rfc3987_syntax (when installed) for its "iri" format checks, and that
# module builds a parser when imported: 0.8-1.2 s of CPU in every grading process, the workers' included. Nothing
# grading validates has that format; without the module, jsonschema leaves the check out. `make setup` uninstalls it
# (requirements.txt); this keeps it out of grading processes in environments built otherwise (environment.yml).
SKIPPED_MODULES = ("rfc3987_syntax",)
for _name in SKIPPED_MODULES:
    sys.modules.setdefault(_name, None)  # type: ignore[assignment]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import secrets  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import typing as t  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

from nbgrader.api import Gradebook, MissingEntry  # noqa: E402
from nbgrader.apps.exportapp import ExportApp  # noqa: E402
from traitlets.config import Config  # noqa: E402

from course_tools.grading import compat, engine, references, results  # noqa: E402
from course_tools.grading.references import REFERENCES_ENV  # noqa: E402
from course_tools.grading.sandbox import Protections  # noqa: E402
from course_tools.grading.writer import GradebookWriter, load_config  # noqa: E402
from course_tools.grading.zygote import REPO, MachineZygote, machine_protections, notebook_imports  # noqa: E402

COURSE = REPO / "autograder"


def known_assignments(course: Path) -> list[str]:
    """The assignments of the repository's course manifest (course.toml) when ``course`` is this repository's
    course root, else those with a folder in the course root's source/ (a copied course root)."""
    if course.resolve() == COURSE.resolve():
        from torchdoctor.manifest import load_manifest

        return load_manifest().assignment_names()
    source = course / "source"
    return sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []


def submitted_hashes(course: Path, assignment: str, students: list[str]) -> dict[str, str]:
    hashes = {}
    for student in students:
        folder = course / "submitted" / student / assignment
        for path in sorted(folder.rglob("*")):  # a symbolic link counts by where it points, never followed
            if path.is_symlink():
                hashes[str(path.relative_to(course))] = f"symlink to {os.readlink(path)}"
            elif path.is_file():
                hashes[str(path.relative_to(course))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def course_config(course: Path) -> Config:
    """The course root's nbgrader configuration (empty without a nbgrader_config.py)."""
    return load_config(course) if (course / "nbgrader_config.py").is_file() else Config()


def gradebook_url(course: Path, db_url: str | None = None) -> tuple[str, str]:
    """The gradebook's URL (``db_url``, else the course configuration's, else nbgrader's default: SQLite in the
    course root) and the course id (nbgrader on PostgreSQL needs one: its rows refer to the course)."""
    coursedir = course_config(course).get("CourseDirectory", {})
    url = db_url or coursedir.get("db_url") or f"sqlite:///{course / 'gradebook.db'}"
    course_id = coursedir.get("course_id") or "default_course"
    return url, course_id


def ungraded(course: Path, assignment: str, students: list[str], db_url: str | None = None) -> list[str]:
    """Students whose submission lacks a score for some graded cell, or whose grading nbgrader gave up on (it then
    removes the autograded notebook and leaves the grades waiting for a manual score: 0 in grades.csv)."""
    missing = []
    url, course_id = gradebook_url(course, db_url)
    with Gradebook(url, course_id) as gb:
        notebooks = [n.name for n in gb.find_assignment(assignment).notebooks]
        for student in students:
            if not all((course / "autograded" / student / assignment / f"{n}.ipynb").is_file() for n in notebooks):
                missing.append(student)
                continue
            try:
                grades = [g for n in notebooks for g in gb.find_submission_notebook(n, assignment, student).grades]
            except MissingEntry:
                missing.append(student)
                continue
            if any(g.auto_score is None and g.manual_score is None and not g.needs_manual_grade for g in grades):
                missing.append(student)
    return missing


@dataclass
class Timings:
    """Where one assignment's batch spent its time, in seconds. ``per_submission`` is the time a worker spends on
    one submission (kernel, notebook, nbgrader's own steps); the rest is fixed: the workers' start-up (nbgrader and
    the zygote, side by side; ``zygote_wait`` of it waiting for the zygote alone), the reference run, and the
    checks after the workers (gradebook, hashes, results)."""

    submissions: int
    workers: int
    total: float
    startup: float
    zygote_wait: float
    references: float
    per_submission: float
    checks: float
    references_cached: bool = False  # every reference run came from an earlier run (``references.cached``)

    def summary(self) -> str:
        spent = "references: cached" if self.references_cached else f"references {self.references:.1f} s"
        return (f"start-up {self.startup:.1f} s (of it waiting for the zygote {self.zygote_wait:.1f} s), {spent}, "
                f"{self.per_submission:.2f} s per submission per worker, checks {self.checks:.1f} s")


def batch_timings(events: list[dict], launched: float, ended: dict[int, float], finished: float,
                  submissions: int) -> Timings | None:
    """Timings from the notebooks' events (``execute.TIMINGS_ENV``) and the workers' end times; None when no
    notebook ran (everything was graded before)."""
    by_worker = {pid: [e for e in events if e["pid"] == pid] for pid in ended}
    by_worker = {pid: sorted(runs, key=lambda e: e["start"]) for pid, runs in by_worker.items() if runs}
    if not by_worker:
        return None
    reference = [e["end"] - e["start"] for e in events if e["student"] is None]
    references = sum(reference)
    busy = sum(ended[pid] - runs[0]["start"] for pid, runs in by_worker.items()) - references
    n = len(by_worker)
    return Timings(
        submissions=submissions, workers=n, total=finished - launched,
        startup=sum(runs[0]["start"] - launched for runs in by_worker.values()) / n,
        zygote_wait=max(e["zygote_wait"] for e in events), references=references,
        per_submission=busy / max(1, submissions), checks=finished - max(ended.values()))


def needs_grading(course: Path, assignment: str, student: str, notebooks: list[str]) -> bool:
    """nbgrader's rule for skipping (``init_destination``): graded before, every notebook there, and not submitted
    again since."""
    dest = course / "autograded" / student / assignment
    if not all((dest / f"{n}.ipynb").is_file() for n in notebooks):
        return True
    stamps = [folder / "timestamp.txt" for folder in (course / "submitted" / student / assignment, dest)]
    if all(p.is_file() for p in stamps):
        return stamps[0].read_text().strip() > stamps[1].read_text().strip()  # nbgrader's format sorts as time
    return False


def grade_assignment(course: Path, assignment: str, client: object, settings: engine.Settings, force: bool,
                     scratch: Path, db_url: str | None = None, started: float | None = None
                     ) -> tuple[bool, Timings | None]:
    students = sorted(p.parent.name for p in course.glob(f"submitted/*/{assignment}") if p.is_dir())
    if not students:
        print(f"{assignment}: no submissions in {course / 'submitted'}")
        return True, None
    url, course_id = gradebook_url(course, db_url)
    with Gradebook(url, course_id) as gb:
        try:
            notebooks = [n.name for n in gb.find_assignment(assignment).notebooks]
        except MissingEntry:
            option = f" --CourseDirectory.db_url={db_url}" if db_url else ""
            print(f"{assignment}: not in the gradebook {url}; register it first, in {course}: "
                  f"`nbgrader generate_assignment {assignment}{option}`")
            return False, None
    started = started or time.time()
    before = submitted_hashes(course, assignment, students)
    todo = students if force else [s for s in students if needs_grading(course, assignment, s, notebooks)]
    if len(todo) < len(students):
        print(f"{assignment}: skipping {len(students) - len(todo)} submission(s) graded before (FORCE=1 regrades)")
    writer = GradebookWriter(course, assignment, secrets.token_hex(4), url, course_id, scratch / "inbox")
    # Reference runs kept by an earlier run, while nothing they depend on changed (references.cache_key): none to run
    here = machine_protections().to_dict()
    kept = references.cached(course, assignment, here)
    notebooks_here = list((course / "source" / assignment).glob("*.ipynb"))
    outcome = engine.grade(client, course, assignment, todo, writer, db_url=url, course_id=course_id,
                           scratch=scratch, threads=engine.torch_threads(settings, client),
                           gpu=engine.is_gpu_assignment(course, assignment), references=kept)
    # The clean ones kept for the next run, when every kernel had this machine's protections (the key says which)
    if all(found == here for found in outcome.protections.values()):
        references.keep(course, assignment, here, outcome.references)
    lost = sorted(set(ungraded(course, assignment, students, url)) | set(outcome.ungraded))
    changed = sorted(k for k, v in submitted_hashes(course, assignment, students).items() if before.get(k) != v)
    # No kernel started when every submission was graded before: then report what kernels would get here.
    found = list(outcome.protections.values())
    protections = Protections(**found[0]) if found else machine_protections()
    # Test cells the reference run could not judge (they kept nbgrader's verdict) or that display no record: the
    # instructor's to fix, said again at the end of the batch and kept in the results.
    problems = sorted(outcome.reference_problems)
    target = results.write(course, assignment, students, {
        "protections": protections.to_dict(), "protections_by_host": outcome.protections, "ungraded": lost,
        "ungraded_why": {s: outcome.ungraded.get(s, "no score for some graded cell") for s in lost},
        "dropped_results": outcome.dropped, "graded_by": outcome.graded_by, "submitted_files_changed": changed,
        "reference_problems": problems}, db_url=url)
    spent = batch_timings(outcome.events, started, outcome.ended, time.time(), len(todo))
    if spent and notebooks_here and len(kept) == len({references.digest(p) for p in notebooks_here}):
        spent.references_cached = True
    print(f"{assignment}: graded {len(students) - len(lost)} of {len(students)} submissions in "
          f"{time.time() - started:.1f} s with {outcome.workers} {settings.engine} workers; results in "
          f"{target.relative_to(course)}")
    if spent:
        print(f"{assignment}: {spent.summary()}")
    for host, found_here in sorted(outcome.protections.items()):
        print(f"{host}: {Protections(**found_here).summary()}")
    if not outcome.protections:
        print(protections.summary())
    for problem in problems:
        print(f"  REFERENCE PROBLEM {problem}")
    for line in outcome.dropped:
        print(f"  {line}")
    for student in lost:
        print(f"  UNGRADED {student}: {outcome.ungraded.get(student, 'no score for some graded cell')}")
    for path in changed:
        print(f"  CHANGED submitted file {path}")
    return not lost and not changed, spent


def export(course: Path, db_url: str | None = None) -> str | None:
    """``nbgrader export`` (grades.csv, or what the course configures), run in this process; its error, or None."""
    path = list(sys.path)
    try:
        with contextlib.chdir(course):  # where nbgrader looks for the course's configuration
            app = ExportApp(log_level=logging.WARNING)
            app.initialize([f"--CourseDirectory.db_url={db_url}"] if db_url else [])
            app.start()
    except (Exception, SystemExit) as exc:  # nbgrader's apps exit on their errors
        return f"nbgrader export failed: {type(exc).__name__}: {exc}"
    finally:
        sys.path[:] = path  # nbgrader's apps put the working directory first on sys.path
    return None


@contextlib.contextmanager
def shared_references(settings: engine.Settings, scratch: Path) -> t.Iterator[None]:
    """On a local cluster the workers share this machine's disk: the first to need a notebook's references computes
    them into one file while the others wait (``references.REFERENCES_ENV``), once per batch. Elsewhere each worker
    computes them once."""
    if settings.engine != "local":
        yield
        return
    saved = os.environ.get(REFERENCES_ENV)
    os.environ[REFERENCES_ENV] = str(scratch / "references.json")  # the local workers inherit it
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(REFERENCES_ENV, None)
        else:
            os.environ[REFERENCES_ENV] = saved


@dataclass
class Batch:
    status: int
    timings: dict[str, Timings]
    export_seconds: float = 0.0


@contextlib.contextmanager
def machine_zygote(settings: engine.Settings, preload: list[str], scratch: Path) -> t.Iterator[None]:
    """Local workers share one zygote (``zygote.MachineZygote``), started before them: the machine imports torch
    and the notebooks' modules once, while the cluster starts, instead of once per worker after it. Other engines'
    workers each start their own, on their own machines."""
    if settings.engine != "local":
        yield
        return
    folder = scratch / "zygote"
    folder.mkdir(mode=0o700)
    engine.prepare_environment()  # the PATH the workers get, and so their kernels, set before the zygote starts
    with MachineZygote(preload, folder):
        yield


def run(argv: list[str] | None = None) -> Batch:
    """``main``, with where the time went."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every assignment of the course")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="local: at most this many worker processes, no more than an assignment's submissions")
    parser.add_argument("--force", action="store_true", help="regrade submissions already graded")
    parser.add_argument("--course", type=Path, default=COURSE)
    parser.add_argument("--engine", choices=engine.ENGINES, default="local",
                        help="local: a Dask LocalCluster of --workers processes; dask: the cluster at --scheduler; "
                        "slurm: --workers Slurm jobs through dask-jobqueue")
    parser.add_argument("--scheduler", help="the Dask scheduler's address (tcp://host:port), for --engine dask")
    parser.add_argument("--db-url", help="the gradebook (nbgrader's db_url, e.g. postgresql://user@host/course); "
                        "default: the course's configuration, else gradebook.db in the course root")
    parser.add_argument("--torch-threads", type=int, default=0, help="torch threads per kernel (0: automatic)")
    slurm = parser.add_argument_group("Slurm (--engine slurm): one job per worker")
    slurm.add_argument("--queue", help="partition (sbatch -p); default: the cluster's")
    slurm.add_argument("--cores", type=int, default=1, help="cores per job (its kernels' torch threads)")
    slurm.add_argument("--memory", default="4GiB", help="memory per job")
    slurm.add_argument("--walltime", default="01:00:00", help="time limit per job")
    slurm.add_argument("--gpus", type=int, default=0, help="GPUs per job (--gres=gpu:N; workers declare GPU=N)")
    args = parser.parse_args(argv)
    course = args.course.resolve()
    known = known_assignments(course)
    unknown = [name for name in args.assignments if name not in known]
    if unknown:
        print(f"unknown assignment {', '.join(map(repr, unknown))}; the course's assignments are: "
              f"{', '.join(known) or 'none'}", file=sys.stderr)
        return Batch(2, {})
    refused = compat.refusal()  # a changed Jupyter stack, or no sandbox route on this machine: one line, no grading
    if refused:
        print(refused, file=sys.stderr)
        return Batch(2, {})
    ok, timings = True, {}
    assignments = args.assignments or known
    workers = max(1, args.workers)
    if args.engine == "local":
        # Assignments are graded one after the other: local workers beyond an assignment's submissions would only
        # start zygotes (torch imported, 3-4 s of CPU each) that grade nothing, as in a batch of one.
        largest = max((len(list(course.glob(f"submitted/*/{a}"))) for a in assignments), default=0)
        workers = max(1, min(workers, largest))
    settings = engine.Settings(engine=args.engine, workers=workers, scheduler=args.scheduler,
                               torch_threads=args.torch_threads, queue=args.queue, cores=args.cores,
                               memory=args.memory, walltime=args.walltime, gpus=args.gpus,
                               allowed_failures=engine.GradingEngine(config=course_config(course)).allowed_failures)
    started = time.time()
    # The workers' zygotes import what the instructor's source notebooks import, while the workers start
    preload = notebook_imports(sorted(p for a in assignments for p in (course / "source" / a).glob("*.ipynb")))
    with tempfile.TemporaryDirectory(prefix="autograde-") as scratch, shared_references(settings, Path(scratch)), \
            machine_zygote(settings, preload, Path(scratch)), engine.open_client(settings) as client, \
            engine.zygotes(client, preload):
        for assignment in assignments:
            graded, spent = grade_assignment(course, assignment, client, settings, args.force, Path(scratch),
                                             args.db_url, started)
            started = 0.0  # the cluster's start-up counts for the first assignment only
            ok = graded and ok
            if spent:
                timings[assignment] = spent
    started = time.monotonic()
    failed = export(course, args.db_url)
    if failed:
        print(failed)
        return Batch(1, timings)
    return Batch(0 if ok else 1, timings, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    return run(argv).status


if __name__ == "__main__":
    sys.exit(main())
