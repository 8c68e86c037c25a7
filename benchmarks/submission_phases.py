"""Where one submission's grading time goes, phase by phase (issue 27 item 2: the overhead above the notebook).

Grades N submissions of an assignment (its corpus, cycled) one after the other in this process, as a grading worker
does (``engine.grade_submission``, the hardened autograde, a kernel forked from a warm zygote), after one submission
that pays the reference run, and prints for each phase its median over the submissions:

- before the kernel: nbgrader's set-up (the private course, the gradebook, the sanitising pass);
- kernel start to first cell: the request to the zygote, the jail, IPython's start, the client's handshake;
- cells: the notebook itself, from the first cell's start to the last cell's reply (the kernel's own timestamps);
- last cell to kernel end: the kernel's kill and clean-up;
- after the kernel: the verdicts, nbgrader's gradebook writes, the bundle.

No Dask, no second worker: what a worker adds to the notebook, not what the machine's cores allow. Run it on a quiet
machine (the load average is printed). Asserts nothing.

Usage: python benchmarks/submission_phases.py [--assignment hw1_dimensions] [--submissions 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nbformat  # noqa: E402
from autograde_speed import COURSE, load, make_course  # noqa: E402

from course_tools.grading.engine import grade_submission, make_template, submission_files  # noqa: E402
from course_tools.grading.zygote import notebook_imports, shared_zygote  # noqa: E402

PHASES = ("before the kernel", "kernel start to first cell", "cells", "last cell to kernel end", "after the kernel")


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def phases(started: float, ended: float, bundle, assignment: str) -> list[float]:
    """The five phases of one graded submission, in seconds."""
    nb = nbformat.reads(bundle.files[f"{assignment}.ipynb"].decode(), as_version=4)
    timed = [c.metadata["execution"] for c in nb.cells
             if c.cell_type == "code" and "iopub.execute_input" in c.metadata.get("execution", {})]
    kernel = bundle.events[0]
    first, last = _stamp(timed[0]["iopub.execute_input"]), _stamp(timed[-1]["shell.execute_reply"])
    return [kernel["start"] - started, first - kernel["start"], last - first, kernel["end"] - last,
            ended - kernel["end"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="hw1_dimensions")
    parser.add_argument("--submissions", type=int, default=8)
    args = parser.parse_args(argv)
    print(f"load average {load()} before")
    with tempfile.TemporaryDirectory(prefix="phases-") as scratch:
        course = make_course(Path(scratch), args.assignment, (COURSE / "nbgrader_config.py").read_text(),
                             args.submissions + 1)
        template = make_template(course, args.assignment, f"sqlite:///{course}/gradebook.db", "torchdoctor",
                                 Path(scratch))
        shared_zygote(notebook_imports(sorted((course / "source" / args.assignment).glob("*.ipynb")))).protections  # noqa: B018
        students = sorted(p.name for p in (course / "submitted").iterdir())
        jobs = [{"student": s, "files": submission_files(course / "submitted" / s / args.assignment), "run": "bench"}
                for s in students]
        grade_submission(template, jobs[0])  # pays the reference run
        rows = []
        for job in jobs[1:]:
            started = time.time()
            bundle = grade_submission(template, job)
            rows.append(phases(started, time.time(), bundle, args.assignment))
        shared_zygote().close()
    medians = [statistics.median(column) for column in zip(*rows, strict=True)]
    total = sum(medians)
    print(f"{args.assignment}, {len(rows)} submissions graded one after the other in one process (medians):")
    for name, seconds in zip(PHASES, medians, strict=True):
        print(f"  {name:<28} {seconds:6.3f} s")
    print(f"  {'total':<28} {total:6.3f} s, of which {total - medians[2]:.3f} s above the notebook's cells")
    print(f"load average {load()} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
