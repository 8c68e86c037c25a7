"""Stock ``nbgrader autograde`` against the course's hardened parallel autograde, side by side, same submissions.

Builds two scratch copies of the course with the same ``--submissions`` (the assignment's grading corpus, cycled
through until there are that many): one configured as stock nbgrader (no confinement, verdicts inside the
student's kernel), one with the course's configuration (confined kernels from a zygote, verdicts outside,
``--workers`` in parallel). Times ``autograde`` + ``export`` in each, and prints, beside the speed-up:

- what one submission costs a hardened worker, against the notebook's own execution time in a warm kernel (the
  source notebook run in a kernel forked from a zygote that preloaded what the notebook imports);
- the fixed cost of a hardened run, part by part: the workers' start-up (nbgrader and the zygote, side by side),
  the reference run, the checks after grading, and ``nbgrader export``.

Then the hardened run's throughput with 1 worker and with ``--workers`` (the engine's scaling: one Dask task per
submission, each worker with its own zygote), and their ratio. Both runs give each kernel ``--torch-threads`` threads
(default 1): with torch's automatic choice (cores / workers) a lone worker's kernels would use every core, and the
ratio would measure torch's threading instead of the engine.

Timings on a shared machine are noisy: the load average before and after is printed too. Asserts nothing.

Each hardened run pays its reference run (the kept ones are removed first); ``--second-run`` grades once more with
``--workers``, the reference runs kept: what a second ``make autograde`` of the same assignment costs.

Usage: python benchmarks/autograde_speed.py [--assignment hw1_dimensions] [--submissions 32] [--workers N]
       [--no-stock] [--second-run] [--torch-threads 1] [--engine local|dask --scheduler tcp://...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402
from traitlets.config import Config  # noqa: E402

from course_tools.grading import autograde, references  # noqa: E402
from course_tools.grading.execute import SandboxedExecute  # noqa: E402
from course_tools.grading.zygote import notebook_imports, shared_zygote  # noqa: E402
from course_tools.grading_corpus import build_notebook, load_corpus  # noqa: E402
from course_tools.release import COURSE, nbgrader, solution_notebook  # noqa: E402

STOCK_CONFIG = '''
from pathlib import Path
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "torch-doctor"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ExecutePreprocessor.timeout = 300
'''

IMPORT_TORCH = "import time; start = time.perf_counter(); import torch; print(time.perf_counter() - start)"


def make_course(root: Path, assignment: str, config: str, submissions: int) -> Path:
    course = root / "course"
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
    nbgrader("generate_assignment", assignment, "--force", course=course)
    name = f"{assignment}.ipynb"
    bases = {"release": nbformat.read(course / "release" / assignment / name, as_version=4),
             "solution": solution_notebook(assignment)}
    corpus = itertools.cycle(load_corpus(assignment))
    for i in range(submissions):
        submission = next(corpus)
        folder = course / "submitted" / f"{submission.name}-{i}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(build_notebook(submission, bases), folder / name)
    return course


def cell_seconds(cell: nbformat.NotebookNode) -> float:
    """How long a cell ran in its kernel, from nbclient's timing metadata."""
    timing = cell.metadata.get("execution", {})
    if "iopub.execute_input" not in timing or "shell.execute_reply" not in timing:
        return 0.0
    started, ended = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                      for k in ("iopub.execute_input", "shell.execute_reply"))
    return (ended - started).total_seconds()


def warm_kernel_run(source: Path, assignment: str, scratch: Path) -> tuple[float, float, float]:
    """Start a zygote, then run the source notebook twice in kernels forked from it: the zygote's start-up, and the
    faster run's execution time (its cells' time in the kernel) and slowest cell."""
    started = time.perf_counter()
    shared_zygote(notebook_imports([source])).protections  # noqa: B018 -- waits until it has preloaded them
    zygote_s = time.perf_counter() - started
    runs = []
    for _ in range(2):
        nb = nbformat.read(source, as_version=4)
        SandboxedExecute(config=Config()).preprocess(nb, {"metadata": {"path": str(scratch)},
                                                          "nbgrader": {"assignment": assignment}})
        seconds = [cell_seconds(c) for c in nb.cells if c.cell_type == "code"]
        runs.append((sum(seconds), max(seconds)))
    try:
        shared_zygote().close()
    except subprocess.TimeoutExpired:  # a loaded machine: the zygote took longer than close waits to exit
        shared_zygote()._proc.kill()
    return zygote_s, *min(runs)


def capacity(per_submission: float, overhead: float, fixed: float, students: int = 2000,
             workers: tuple[int, ...] = (2, 16, 64, 256)) -> str:
    """A capacity table for docs/instructors.md "Grading a big class": ``students`` submissions at the measured time per
    submission per worker, and for an assignment whose notebook runs 30 s (a ResNet-50 trained on one core, the
    issue's estimate) plus the measured ``overhead`` per submission, by worker count."""
    lines = [f"capacity for {students} submissions (measured {per_submission:.2f} s per submission per worker, fixed "
             f"{fixed:.1f} s per run):", "| workers | this assignment | a 30 s-per-submission assignment |",
             "| ---: | ---: | ---: |"]
    for n in workers:
        this = fixed + students * per_submission / n
        heavy = fixed + students * (30 + max(0.0, overhead)) / n
        lines.append(f"| {n} | {this / 60:.1f} min | {heavy / 60:.1f} min |")
    return "\n".join(lines)


def cpu_seconds() -> float:
    """CPU time the whole machine has spent busy so far (user, nice, system; /proc/stat), NaN where unreadable."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:4]
    except OSError:
        return float("nan")
    return sum(int(f) for f in fields) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def scaling_limits(scaling: dict[int, tuple[float, autograde.Timings, float]]) -> str:
    """Once started, how much faster the most workers grade than one, and what holds them back, measured: the
    cores that the one-worker run already kept busy (its kernel, the worker, the driver's writer and the zygote)."""
    most = max(scaling)
    rate = {workers: workers / timing.per_submission for workers, (_, timing, _) in scaling.items()}
    busy_with_one = scaling[1][2]
    return (f"after start-up, {most} workers grade {rate[most] / rate[1]:.2f}x as many submissions per second as 1 "
            f"({rate[1]:.1f} against {rate[most]:.1f}); what holds them back: the run with 1 worker already kept "
            f"{busy_with_one:.2f} of this machine's {os.cpu_count()} cores busy, which leaves the other workers "
            f"{os.cpu_count() - busy_with_one:.2f} cores, and the start-up grows with the workers "
            f"({scaling[1][1].startup:.1f} s with 1, {scaling[most][1].startup:.1f} s with {most})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="hw1_dimensions")
    parser.add_argument("--submissions", type=int, default=32, help="how many (the corpus, cycled)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-stock", action="store_true", help="leave out stock nbgrader (the slow part)")
    parser.add_argument("--engine", default="local", help="the scaling runs' engine (local, dask)")
    parser.add_argument("--scheduler", help="the Dask scheduler, for --engine dask")
    parser.add_argument("--second-run", action="store_true", help="grade once more with --workers: the fixed cost "
                        "with the reference runs kept by the first run")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads per kernel in the scaling runs "
                        "(0: the engine's automatic choice)")
    args = parser.parse_args(argv)
    load_before = load()
    source = COURSE / "source" / args.assignment / f"{args.assignment}.ipynb"
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        n = args.submissions
        stock = make_course(Path(scratch, "stock"), args.assignment, STOCK_CONFIG, n)
        ours = make_course(Path(scratch, "ours"), args.assignment, (COURSE / "nbgrader_config.py").read_text(), n)
        import_s = float(subprocess.run([sys.executable, "-c", IMPORT_TORCH], capture_output=True, text=True,
                                        check=True, cwd=scratch).stdout)
        zygote_s, execution_s, slowest_s = warm_kernel_run(source, args.assignment, Path(scratch))

        stock_s = float("nan")
        if not args.no_stock:
            started = time.perf_counter()
            nbgrader("autograde", args.assignment, "--force", course=stock)
            nbgrader("export", course=stock)
            stock_s = time.perf_counter() - started

        engine = ["--engine", args.engine, *(["--scheduler", args.scheduler] if args.scheduler else [])]
        scaling = {}
        for workers in sorted({1, args.workers}):
            # each run pays its reference run, as the first run of an assignment does (the runs compare alike)
            shutil.rmtree(ours / references.CACHE_FOLDER, ignore_errors=True)
            started, busy = time.perf_counter(), cpu_seconds()
            batch = autograde.run([args.assignment, "--course", str(ours), "--force", "--workers", str(workers),
                                   "--torch-threads", str(args.torch_threads), *engine])
            ours_s = time.perf_counter() - started
            if batch.status != 0 or args.assignment not in batch.timings:
                break
            scaling[workers] = (ours_s, batch.timings[args.assignment], (cpu_seconds() - busy) / ours_s)
        again = None
        if args.second_run and batch.status == 0:  # the same assignment again: its reference runs kept
            started = time.perf_counter()
            second = autograde.run([args.assignment, "--course", str(ours), "--force", "--workers", str(args.workers),
                                    "--torch-threads", str(args.torch_threads), *engine])
            if args.assignment in second.timings:
                again = (time.perf_counter() - started, second.timings[args.assignment])
    if batch.status != 0 or args.assignment not in batch.timings:
        print(f"the hardened run failed (status {batch.status})")
        return 1
    spent = batch.timings[args.assignment]
    fixed_s = spent.startup + spent.references + spent.checks + batch.export_seconds
    print(f"\n{n} submissions of {args.assignment}, {os.cpu_count()} cores, load average {load_before} before and "
          f"{load()} after")
    print(f"notebook execution in a warm kernel: {execution_s:.2f} s (slowest cell {slowest_s:.2f} s); "
          f"import torch in a new process: {import_s:.2f} s")
    if not args.no_stock:
        print(f"stock nbgrader autograde + export:    {stock_s:6.1f} s  {stock_s / n:.2f} s per submission "
              f"({n / stock_s * 60:.0f} per minute)")
    print(f"hardened autograde, {spent.workers} workers, isolated: {ours_s:6.1f} s  {ours_s / n:.2f} s per submission "
          f"({n / ours_s * 60:.0f} per minute)")
    if not args.no_stock:
        print(f"speed-up: {stock_s / ours_s:.1f}x")
    for workers, (seconds, timing, cores) in scaling.items():
        print(f"hardened, {workers} {args.engine} worker(s): {seconds:6.1f} s, {n / seconds * 60:.0f} "
              f"submissions per minute (per submission per worker {timing.per_submission:.2f} s, start-up "
              f"{timing.startup:.1f} s; this machine's cores busy: {cores:.2f} of {os.cpu_count()})")
    if len(scaling) == 2:
        (one, _, _), (many, _, _) = scaling[1], scaling[max(scaling)]
        print(f"throughput with {max(scaling)} workers against 1: {one / many:.2f}x (whole runs, start-up included; "
              f"torch threads per kernel: {args.torch_threads or 'automatic'})")
        print(scaling_limits(scaling))
    print(capacity(spent.per_submission, spent.per_submission - execution_s, fixed_s))
    print(f"fixed cost of the run: {fixed_s:.1f} s = start-up {spent.startup:.1f} s (nbgrader and the zygote side by "
          f"side; a zygote alone, with its preloads, takes {zygote_s:.1f} s) + references {spent.references:.1f} s + "
          f"checks {spent.checks:.1f} s + export {batch.export_seconds:.1f} s")
    if again:
        seconds, timing = again
        print(f"second run of the same assignment, {timing.workers} workers: {seconds:.1f} s ({timing.summary()})")
    print(f"per submission per worker: {spent.per_submission:.2f} s against {execution_s:.2f} s of notebook execution "
          f"({spent.per_submission - execution_s:+.2f} s: kernel start and stop, nbgrader's own steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
