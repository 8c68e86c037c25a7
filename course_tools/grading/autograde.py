"""Autograde every submission of the given assignments in parallel, with nbgrader's own ``autograde``.

Per assignment:

1. hash every submitted file (they must be byte-identical after grading);
2. split the students over ``--workers`` plain ``nbgrader autograde`` processes (each excludes the others'
   students), so every row of the gradebook is written by exactly one process and SQLite serialises the
   writes; each worker forks its kernels from its own pre-warmed zygote, and the first to need them
   computes the hidden tests' references (``references``) for all;
3. check that every submission has a score for every graded cell (a worker that lost one, e.g. to a
   locked database, is retried serially), and that no submitted file changed;
4. write ``results/<assignment>.json`` (per-test results, tampering per student, the protections in force).

Then ``nbgrader export`` writes grades.csv. Exit status 1 when a submission stays ungraded or a submitted
file changed.

Usage: python -m course_tools.grading.autograde [ASSIGNMENT ...] [--workers N] [--force] [--course DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from course_tools.grading import results
from course_tools.grading.references import REFERENCES_ENV
from course_tools.grading.sandbox import Protections
from course_tools.grading.zygote import PREWARM_ENV, REPO, machine_protections

COURSE = REPO / "autograder"


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
                logs: Path, label: str = "worker") -> None:
    everyone = [s for group in groups for s in group]
    threads = max(1, (os.cpu_count() or 1) // len(groups))
    procs = []
    for i, group in enumerate(groups):
        others = ",".join(s for s in everyone if s not in group)
        cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, *(["--force"] if force else []),
               f"--SandboxedKernelManager.torch_threads={threads}"]
        if others:
            cmd.append(f"--CourseDirectory.student_id_exclude={others}")
        log = open(logs / f"{assignment}-{label}{i}.log", "w")  # noqa: SIM115 -- closed below
        procs.append((subprocess.Popen(cmd, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    for proc, log in procs:
        proc.wait()
        log.close()


def grade_assignment(course: Path, assignment: str, workers: int, force: bool, scratch: Path) -> bool:
    students = sorted(p.parent.name for p in course.glob(f"submitted/*/{assignment}") if p.is_dir())
    if not students:
        print(f"{assignment}: no submissions in {course / 'submitted'}")
        return True
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            print(f"{assignment}: not in the gradebook; run `nbgrader generate_assignment {assignment}` first")
            return False
    started = time.monotonic()
    before = submitted_hashes(course, assignment, students)
    references = scratch / f"{assignment}-references.json"
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(REPO),
               **{REFERENCES_ENV: str(references), PREWARM_ENV: "1"})
    groups = [g for g in (students[i::workers] for i in range(workers)) if g]
    run_workers(course, assignment, groups, env, force, scratch)
    retry = ungraded(course, assignment, students)
    if retry:
        print(f"{assignment}: retrying {len(retry)} submission(s) serially: {', '.join(retry)}")
        run_workers(course, assignment, [retry], env, True, scratch, label="retry")
    lost = ungraded(course, assignment, students)
    changed = sorted(k for k, v in submitted_hashes(course, assignment, students).items() if before.get(k) != v)
    computed = json.loads(references.read_text()) if references.is_file() else {}
    # No kernel started when every submission was graded before: then report what kernels would get here.
    protections = Protections(**computed["protections"]) if "protections" in computed else machine_protections()
    target = results.write(course, assignment, students, {
        "protections": protections.to_dict(), "ungraded": lost, "submitted_files_changed": changed})
    elapsed = time.monotonic() - started
    print(f"{assignment}: graded {len(students) - len(lost)} of {len(students)} submissions in {elapsed:.1f} s "
          f"with {len(groups)} workers; results in {target.relative_to(course)}")
    print(protections.summary())
    for student in lost:
        print(f"  UNGRADED {student}")
    for path in changed:
        print(f"  CHANGED submitted file {path}")
    return not lost and not changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every assignment in source/")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--force", action="store_true", help="regrade submissions already graded")
    parser.add_argument("--course", type=Path, default=COURSE)
    args = parser.parse_args(argv)
    course = args.course.resolve()
    names = args.assignments or sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    ok = True
    with tempfile.TemporaryDirectory(prefix="autograde-") as scratch:
        for assignment in names:
            ok = grade_assignment(course, assignment, max(1, args.workers), args.force, Path(scratch)) and ok
        if not ok:
            for log in sorted(Path(scratch).glob("*.log")):
                print(f"--- {log.name} (last lines)\n" + "\n".join(log.read_text().splitlines()[-15:]))
    export = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course, capture_output=True, text=True,
                            env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    if export.returncode != 0:
        print(export.stdout + export.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
