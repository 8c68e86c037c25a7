"""Everything CI checks (``make test``): lint, the notebooks, nbgrader's own test suite through the course's grading
settings (``course_tools.nbgrader_suite``) and pytest, run side by side, with a time per part.

Each part's output is kept in build/test-logs/<part>.log and printed whole when the part ends; pytest's comes
last, so the run ends with its summary line. The exit status is non-zero when any part failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from course_tools.release import REPO

LOGS = REPO / "build" / "test-logs"


# Distributed grading (a private PostgreSQL, a Dask cluster, a one-node Slurm): slow, a part of its own.
DISTRIBUTED = ["tests/test_grading_distributed.py", "tests/test_grading_slurm.py"]


def parts(device: str) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "lint": [str(Path(py).with_name("ruff")), "check", "."],
        "i18n-check": [py, "-m", "course_tools.i18n", "check"],
        "notebooks": [py, "-m", "course_tools.run_notebooks", "--device", device],
        "nbgrader-suite": [py, "-m", "course_tools.nbgrader_suite"],
        "distributed": [py, "-m", "pytest", "--durations=10", *DISTRIBUTED],
        "pytest": [py, "-m", "pytest", "--durations=15", *(f"--ignore={path}" for path in DISTRIBUTED)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    running = {}
    for name, command in parts(args.device).items():
        log = open(LOGS / f"{name}.log", "w")  # closed when the part ends
        running[name] = (subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT), log, started)
        print(f"started {name}: {' '.join(command)}", flush=True)
    results = {}
    order = list(parts(args.device))
    while running:
        for name in [n for n in order if n in running]:
            proc, log, t0 = running[name]
            if proc.poll() is None:
                continue
            log.close()
            results[name] = (proc.returncode, time.monotonic() - t0)
            del running[name]
            if name != "pytest":
                print(f"\n===== {name} (exit {proc.returncode}, {results[name][1]:.0f} s) =====", flush=True)
                print((LOGS / f"{name}.log").read_text(), flush=True)
        time.sleep(1)
    print("\n===== time per part (run side by side) =====")
    for name in order:
        code, seconds = results[name]
        print(f"{name:14} {seconds:7.0f} s  {'ok' if code == 0 else f'FAILED (exit {code})'}")
    print(f"{'total':14} {time.monotonic() - started:7.0f} s\n", flush=True)
    print(f"===== pytest (exit {results['pytest'][0]}) =====", flush=True)
    print((LOGS / "pytest.log").read_text(), flush=True)
    return 0 if all(code == 0 for code, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
