"""Each assignment's source notebook (solution and hidden tests) in a warm grading kernel: the floor every grader
pays per submission, for the README's table (issue 27: "report every assignment's warm-kernel time").

A warm kernel is one forked from a zygote that preloaded what the notebook imports, as grading kernels are
(``autograde_speed.warm_kernel_run``: the faster of two runs, its cells' own time in the kernel). Run it on a quiet
machine: the load average is printed. Asserts nothing.

Usage: python benchmarks/warm_kernel_times.py [ASSIGNMENT ...]   (default: every ready assignment)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from autograde_speed import COURSE, load, warm_kernel_run  # noqa: E402

from course_tools.manifest_cli import select_assignments  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: every ready assignment of course.toml")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # one assignment, in a process (and zygote) of its own
    args = parser.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory(prefix="warm-") as scratch:
            _, execution_s, slowest_s = warm_kernel_run(COURSE / "source" / args.one / f"{args.one}.ipynb",
                                                        args.one, Path(scratch))
        print(f"| `{args.one}` | {execution_s:.2f} s | {slowest_s:.2f} s |", flush=True)
        return 0
    print(f"{os.cpu_count()} cores, load average {load()} before")
    print("| assignment | warm kernel | slowest cell |")
    print("| --- | ---: | ---: |", flush=True)
    for assignment in select_assignments(args.assignments):
        subprocess.run([sys.executable, __file__, "--one", assignment], check=True)
    print(f"load average {load()} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
