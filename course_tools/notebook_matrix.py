"""Run the whole notebook set in every configuration a student meets (``make test-notebooks-matrix``).

``make test`` runs one configuration (FAST mode, SEED 0). A student runs the notebooks' defaults (full mode) and may
change the seed, so every claim must also hold there: this runs the runner once per configuration, each into its
own folder build/matrix/<configuration>/, and prints a table of results and times. ``--config`` picks some (the
GitHub Actions workflow runs one configuration per job).

Usage: python -m course_tools.notebook_matrix [--device D] [--config NAME ...] [--jobs N] [PATH ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from course_tools import run_notebooks
from course_tools.release import REPO

MATRIX = REPO / "build" / "matrix"

# name -> the runner's arguments. fast-seed0 is also what `make test` runs.
CONFIGURATIONS: dict[str, list[str]] = {
    "fast-seed0": ["--seed", "0"],
    "fast-seed1": ["--seed", "1"],
    "fast-seed2": ["--seed", "2"],
    "full-seed0": ["--full", "--seed", "0"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="notebooks to run (default: all the runner runs)")
    parser.add_argument("--device", default=os.environ.get("DEVICE", "auto"))
    parser.add_argument("--config", action="append", choices=sorted(CONFIGURATIONS),
                        help="a configuration to run (repeatable; default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    outcomes = []
    for name in args.config or list(CONFIGURATIONS):
        print(f"\n===== configuration {name} =====", flush=True)
        started = time.monotonic()
        code = run_notebooks.main([*CONFIGURATIONS[name], "--device", args.device, "--jobs", str(args.jobs),
                                   "--build", str(MATRIX / name), *args.paths])
        outcomes.append((name, code, time.monotonic() - started))

    print("\n===== notebook matrix =====")
    for name, code, seconds in outcomes:
        print(f"{name:12} {seconds:7.0f} s  {'ok' if code == 0 else f'FAILED (exit {code})'}")
    return 0 if all(code == 0 for _, code, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
