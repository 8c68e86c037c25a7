"""Autograde every submission of the given assignments in parallel, with nbgrader's own ``autograde``.

Per assignment:

1. hash every submitted file (they must be byte-identical after grading);
2. split the students over ``--workers`` plain ``nbgrader autograde`` processes (each excludes the others'
   students), so every row of the gradebook is written by exactly one process and SQLite serialises the
   writes; each worker forks its kernels from its own pre-warmed zygote, and the first to need them
   computes the hidden tests' references (``references``) for all;
3. check that every submission has a score for every graded cell (a worker that lost one, e.g. to a
   locked database, is retried serially), and that no submitted file changed;
4. write ``results/<assignment>.json`` (per-test results, tampering per student, the protections in force), and
   print where the time went (start-up, references, per submission, checks).

Then ``nbgrader export`` writes grades.csv (in this process: a new one would import nbgrader again). Exit status 1
when a submission stays ungraded or a submitted file changed; 2, before anything runs, for an unknown assignment.

Usage: python -m course_tools.grading.autograde [ASSIGNMENT ...] [--workers N] [--force] [--course DIR]
"""

from __future__ import annotations

import sys

# jsonschema, which nbgrader imports, imports rfc3987_syntax (when installed) for its "iri" format checks, and that
# module builds a parser when imported: 1.2 s of CPU in every grading process, the workers' included. Nothing
# grading validates has that format; without the module, jsonschema leaves the check out.
SKIPPED_MODULES = ("rfc3987_syntax",)
for _name in SKIPPED_MODULES:
    sys.modules.setdefault(_name, None)  # type: ignore[assignment]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

from nbgrader.api import Gradebook, MissingEntry  # noqa: E402
from nbgrader.apps.exportapp import ExportApp  # noqa: E402

from course_tools.grading import compat, results  # noqa: E402
from course_tools.grading.execute import TIMINGS_ENV  # noqa: E402
from course_tools.grading.references import REFERENCES_ENV  # noqa: E402
from course_tools.grading.sandbox import Protections  # noqa: E402
from course_tools.grading.zygote import PREWARM_ENV, REPO, machine_protections  # noqa: E402

COURSE = REPO / "autograder"
# A worker: `nbgrader autograde ...` without the modules above.
WORKER = (f"import sys; sys.modules.update(dict.fromkeys({SKIPPED_MODULES!r})); "
          "from nbgrader.apps.nbgraderapp import main; main()")


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


def ungraded(course: Path, assignment: str, students: list[str]) -> list[str]:
    """Students whose submission lacks a score for some graded cell, or whose grading nbgrader gave up on (it then
    removes the autograded notebook and leaves the grades waiting for a manual score: 0 in grades.csv)."""
    missing = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
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


def run_workers(course: Path, assignment: str, groups: list[list[str]], env: dict[str, str], force: bool,
                logs: Path, label: str = "worker") -> dict[int, float]:
    """Run one nbgrader worker per group of students, side by side; when each ended (time.time()), by pid."""
    everyone = [s for group in groups for s in group]
    threads = max(1, (os.cpu_count() or 1) // len(groups))
    procs = []
    for i, group in enumerate(groups):
        others = ",".join(s for s in everyone if s not in group)
        cmd = [sys.executable, "-c", WORKER, "autograde", assignment, *(["--force"] if force else []),
               f"--SandboxedKernelManager.torch_threads={threads}"]
        if others:
            cmd.append(f"--CourseDirectory.student_id_exclude={others}")
        log = open(logs / f"{assignment}-{label}{i}.log", "w")  # noqa: SIM115 -- closed below
        procs.append((subprocess.Popen(cmd, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    ended: dict[int, float] = {}
    while len(ended) < len(procs):
        for proc, log in procs:
            if proc.pid not in ended and proc.poll() is not None:
                ended[proc.pid] = time.time()
                log.close()
        time.sleep(0.02)
    return ended


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

    def summary(self) -> str:
        return (f"start-up {self.startup:.1f} s (of it waiting for the zygote {self.zygote_wait:.1f} s), references "
                f"{self.references:.1f} s, {self.per_submission:.2f} s per submission per worker, checks "
                f"{self.checks:.1f} s")


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


def grade_assignment(course: Path, assignment: str, workers: int, force: bool, scratch: Path
                     ) -> tuple[bool, Timings | None]:
    students = sorted(p.parent.name for p in course.glob(f"submitted/*/{assignment}") if p.is_dir())
    if not students:
        print(f"{assignment}: no submissions in {course / 'submitted'}")
        return True, None
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            print(f"{assignment}: not in the gradebook; run `nbgrader generate_assignment {assignment}` first")
            return False, None
    started = time.time()
    before = submitted_hashes(course, assignment, students)
    references = scratch / f"{assignment}-references.json"
    timings = scratch / f"{assignment}-timings.jsonl"
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(REPO),
               **{REFERENCES_ENV: str(references), PREWARM_ENV: "1", TIMINGS_ENV: str(timings)})
    groups = [g for g in (students[i::workers] for i in range(workers)) if g]
    ended = run_workers(course, assignment, groups, env, force, scratch)
    retry = ungraded(course, assignment, students)
    if retry:
        print(f"{assignment}: retrying {len(retry)} submission(s) serially: {', '.join(retry)}")
        ended.update(run_workers(course, assignment, [retry], env, True, scratch, label="retry"))
    lost = ungraded(course, assignment, students)
    changed = sorted(k for k, v in submitted_hashes(course, assignment, students).items() if before.get(k) != v)
    computed = json.loads(references.read_text()) if references.is_file() else {}
    # No kernel started when every submission was graded before: then report what kernels would get here.
    protections = Protections(**computed["protections"]) if "protections" in computed else machine_protections()
    # Test cells the reference run could not judge (they kept nbgrader's verdict) or that display no record: the
    # instructor's to fix, said again at the end of the batch and kept in the results.
    problems = sorted({p for r in computed.get("references", {}).values() for p in r.get("problems", [])})
    target = results.write(course, assignment, students, {
        "protections": protections.to_dict(), "ungraded": lost, "submitted_files_changed": changed,
        "reference_problems": problems})
    events = [json.loads(line) for line in timings.read_text().splitlines()] if timings.is_file() else []
    spent = batch_timings(events, started, ended, time.time(), len(students))
    print(f"{assignment}: graded {len(students) - len(lost)} of {len(students)} submissions in "
          f"{time.time() - started:.1f} s with {len(groups)} workers; results in {target.relative_to(course)}")
    if spent:
        print(f"{assignment}: {spent.summary()}")
    print(protections.summary())
    for problem in problems:
        print(f"  REFERENCE PROBLEM {problem}")
    for student in lost:
        print(f"  UNGRADED {student}")
    for path in changed:
        print(f"  CHANGED submitted file {path}")
    return not lost and not changed, spent


def export(course: Path) -> str | None:
    """``nbgrader export`` (grades.csv, or what the course configures), run in this process; its error, or None."""
    path = list(sys.path)
    try:
        with contextlib.chdir(course):  # where nbgrader looks for the course's configuration
            app = ExportApp(log_level=logging.WARNING)
            app.initialize([])
            app.start()
    except (Exception, SystemExit) as exc:  # nbgrader's apps exit on their errors
        return f"nbgrader export failed: {type(exc).__name__}: {exc}"
    finally:
        sys.path[:] = path  # nbgrader's apps put the working directory first on sys.path
    return None


@dataclass
class Batch:
    status: int
    timings: dict[str, Timings]
    export_seconds: float = 0.0


def run(argv: list[str] | None = None) -> Batch:
    """``main``, with where the time went."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every assignment of the course")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--force", action="store_true", help="regrade submissions already graded")
    parser.add_argument("--course", type=Path, default=COURSE)
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
    with tempfile.TemporaryDirectory(prefix="autograde-") as scratch:
        for assignment in args.assignments or known:
            graded, spent = grade_assignment(course, assignment, max(1, args.workers), args.force, Path(scratch))
            ok = graded and ok
            if spent:
                timings[assignment] = spent
        if not ok:
            for log in sorted(Path(scratch).glob("*.log")):
                print(f"--- {log.name} (last lines)\n" + "\n".join(log.read_text().splitlines()[-15:]))
    started = time.monotonic()
    failed = export(course)
    if failed:
        print(failed)
        return Batch(1, timings)
    return Batch(0 if ok else 1, timings, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    return run(argv).status


if __name__ == "__main__":
    sys.exit(main())
