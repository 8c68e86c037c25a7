"""Stock ``nbgrader autograde`` against the course's hardened parallel autograde, side by side, same submissions.

Builds two scratch copies of the course with the same submissions (the grading corpus of an assignment, repeated
``--copies`` times): one configured as stock nbgrader (no confinement, verdicts inside the student's kernel), one
with the course's configuration (confined kernels from a zygote, verdicts outside, ``--workers`` in parallel).
Times ``autograde`` + ``export`` in each, and the floor of one submission: ``import torch`` plus the notebook's own
compute, run in a fresh plain Python process. Prints the figures; asserts nothing.

Usage: python benchmarks/autograde_speed.py [--assignment hw1_dimensions] [--copies 1] [--workers N] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402

from course_tools.grading import autograde  # noqa: E402
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

FLOOR = '''
import sys, time
start = time.perf_counter()
import torch
from IPython.display import display
imported = time.perf_counter()
import nbformat
cells = [c.source for c in nbformat.read(sys.argv[1], as_version=4).cells
         if c.cell_type == "code" and "raises-exception" not in c.metadata.get("tags", [])]
begin = time.perf_counter()
namespace = {"display": display}
for source in cells:
    exec(compile(source, "cell", "exec"), namespace)
print(imported - start, time.perf_counter() - begin)
'''


def make_course(root: Path, assignment: str, config: str, copies: int, limit: int | None) -> tuple[Path, int]:
    course = root / "course"
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
    nbgrader("generate_assignment", assignment, "--force", course=course)
    name = f"{assignment}.ipynb"
    bases = {"release": nbformat.read(course / "release" / assignment / name, as_version=4),
             "solution": solution_notebook(assignment)}
    count = 0
    for copy in range(copies):
        for submission in load_corpus(assignment)[:limit]:
            folder = course / "submitted" / f"{submission.name}-{copy}" / assignment
            folder.mkdir(parents=True)
            nbformat.write(build_notebook(submission, bases), folder / name)
            count += 1
    return course, count


def timed(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="hw1_dimensions")
    parser.add_argument("--copies", type=int, default=1, help="times the corpus is submitted")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit", type=int, help="only the first LIMIT submissions of the corpus (a smoke test)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        stock, n = make_course(Path(scratch, "stock"), args.assignment, STOCK_CONFIG, args.copies, args.limit)
        ours, _ = make_course(Path(scratch, "ours"), args.assignment, (COURSE / "nbgrader_config.py").read_text(),
                              args.copies, args.limit)
        source = COURSE / "source" / args.assignment / f"{args.assignment}.ipynb"
        floor = subprocess.run([sys.executable, "-c", FLOOR, str(source)], capture_output=True, text=True,
                               check=True, cwd=scratch).stdout.split()
        import_s, compute_s = float(floor[-2]), float(floor[-1])

        def run_stock() -> None:
            nbgrader("autograde", args.assignment, "--force", course=stock)
            nbgrader("export", course=stock)

        stock_s = timed(run_stock)
        ours_s = timed(lambda: autograde.main([args.assignment, "--course", str(ours), "--force",
                                               "--workers", str(args.workers)]))
    per_stock, per_ours = stock_s / n, ours_s / n
    floor_s = import_s + compute_s
    print(f"\n{n} submissions of {args.assignment}, {os.cpu_count()} cores")
    print(f"floor per submission (import torch {import_s:.2f} s + notebook compute {compute_s:.2f} s): {floor_s:.2f} s")
    print(f"stock nbgrader autograde + export:    {stock_s:6.1f} s  {per_stock:.2f} s per submission "
          f"({n / stock_s * 60:.0f} per minute)")
    print(f"hardened autograde, {args.workers} workers, isolated: {ours_s:6.1f} s  {per_ours:.2f} s per submission "
          f"({n / ours_s * 60:.0f} per minute)")
    print(f"speed-up: {stock_s / ours_s:.1f}x")
    print(f"hardened, per submission per worker: {per_ours * args.workers:.2f} s "
          f"({per_ours * args.workers - floor_s:+.2f} s against the floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
