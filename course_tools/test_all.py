"""Everything CI checks (``make test``): lint, the Chinese edition's catalogues (``make i18n-check``), the
notebooks, nbgrader's own test suite through the course's grading settings (``course_tools.nbgrader_suite``), the
grading corpora, distributed grading, the bug clinic's whole gate (``make clinic-gate``), the other grading and
bug-clinic tests and the rest of pytest, run side by side, with the wall time and the CPU time of each part and the
slowest tests of each part.

Before the parts start it times a fixed pure-Python workload (``reference_seconds``): runs on different machines
compare by it. Each part's output is kept in build/test-logs/<part>.log and printed whole when the part ends;
pytest's comes last, then the slowest tests of each part (their ``--durations`` sections), the time per part, the
last lines of each failed part's output again and which parts failed: a CI log cut to its tail still says what
failed. The exit status is non-zero when any part failed.

The parts start longest first: in the order of the wall times the last run recorded in build/test-logs/times.json,
else in ``parts``' order (the longest measured on the 2-core machine first). The machine has 2 cores, so the total CPU
work bounds the run as much as the longest part: a part's CPU time is user + system time of the part and of every
process it waited for (``os.wait4``). Processes nobody waits for are not in it: the kernels a grading zygote forks
(it ignores SIGCHLD, so the system reaps them), and daemons (PostgreSQL, Slurm).

The parts run with one intra-op thread per process (``ONE_THREAD``, unless the caller set those variables): they
load the 2 cores ten processes deep, where a torch process with its default two threads spends 2.5-3 times the CPU
on the same work, its threads spinning while they wait for each other (a conv net's training steps measured under
make test's load: 7.5-8.0 s of CPU with two threads against 2.7-3.1 s with one). Grading kernels set their own
threads (``torch_threads``), and the notebooks' default configuration runs in the matrix job
(``make test-notebooks-matrix``) as students run them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import typing as t
from pathlib import Path

from course_tools.release import REPO

LOGS = REPO / "build" / "test-logs"
TIMES = LOGS / "times.json"

# Distributed grading (a private PostgreSQL, a Dask cluster, a one-node Slurm): slow, a part of its own.
DISTRIBUTED = ["tests/test_grading_distributed.py", "tests/test_grading_slurm.py"]
# Every submission of every assignment's corpus graded: the longest part, started first.
CORPUS = ["tests/test_grading_corpus.py"]
# The other tests that grade or validate (the attack corpus, the autograde command, the bug clinic's cases and its
# exam): a part of their own beside the rest of pytest. In one part with the rest, pytest ran 2055 s, its last 580 s
# alone on a machine that stood idle 424 s of the run (2026-12-02).
GRADING = ["tests/test_grading_security.py", "tests/test_autograde_cli.py", "tests/test_grading_dropin.py",
           "tests/test_grading_limits.py", "tests/test_grading_install.py", "tests/test_grading_helpers.py",
           "tests/test_clinic.py", "tests/test_clinic_practice.py", "tests/test_clinic_exam.py",
           "tests/test_i18n_grading.py"]
FAILED_TAIL = 60  # lines of each failed part's output printed again at the very end
LAST = "pytest"  # printed last: the run ends with its summary line
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
REFERENCE_SQUARES = 5_000_000  # the machine's reference workload (``reference_seconds``)


def parts(device: str) -> dict[str, list[str]]:
    """Each part's command, longest first (as measured in make test on the 2-core machine)."""
    py = sys.executable
    return {
        "grading-corpus": [py, "-m", "pytest", "--durations=15", *CORPUS],
        "nbgrader-suite": [py, "-m", "course_tools.nbgrader_suite", "--durations=15"],
        "distributed": [py, "-m", "pytest", "--durations=15", *DISTRIBUTED],
        "grading": [py, "-m", "pytest", "--durations=15", *GRADING],
        "pytest": [py, "-m", "pytest", "--durations=15",
                   *(f"--ignore={path}" for path in [*DISTRIBUTED, *CORPUS, *GRADING])],
        "notebooks": [py, "-m", "course_tools.run_notebooks", "--device", device],
        "clinic-gate": [py, "-m", "torchdoctor.clinic", "gate", "--quiet"],
        "i18n-check": [py, "-m", "course_tools.i18n", "check"],
        "lint": [str(Path(py).with_name("ruff")), "check", "."],
    }


def part_environment() -> dict[str, str]:
    """The parts' environment: this one, with one intra-op thread per process where the caller set no number."""
    return {**ONE_THREAD, **os.environ}


def start_order(names: list[str]) -> list[str]:
    """Longest first by the last run's wall times where recorded; parts it did not time keep their place first."""
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return names
    return sorted(names, key=lambda n: -float(last.get(n, {}).get("wall", float("inf"))))


def slowest(log: str) -> list[str]:
    """The ``--durations`` lines of a pytest log (``12.34s call  test...``); nothing for other logs."""
    head = re.search(r"=+ slowest (?:\d+ )?durations =+\n", log)
    lines: list[str] = []
    for line in log[head.end():].splitlines() if head else []:
        if not re.match(r"\d+\.\d+s ", line):
            break
        lines.append(line)
    return lines


def machine_cpu() -> tuple[float, float] | None:
    """(busy, idle) CPU seconds of the whole machine since boot (Linux's /proc/stat), or None elsewhere: the run's
    share of the machine, kernels and daemons included, which the parts' own CPU times leave out."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / tick, idle / tick


def reference_seconds() -> float:
    """The CPU seconds of a fixed pure-Python workload, measured before the parts start: how fast this machine's cores
    are, so that runs on different machines compare (the same make test took 16 minutes on one 2-core machine and
    33 on another)."""
    started = time.process_time()
    sum(i * i for i in range(REFERENCE_SQUARES))
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    commands = parts(args.device)
    order = start_order(list(commands))
    env = part_environment()
    print("threads per process: " + ", ".join(f"{k}={env[k]}" for k in ONE_THREAD), flush=True)
    reference = reference_seconds()
    print(f"this machine: {REFERENCE_SQUARES:,} squares summed in Python took {reference:.2f} s of CPU", flush=True)
    started, cpu_before = time.monotonic(), machine_cpu()
    running: dict[int, tuple[str, subprocess.Popen, t.IO]] = {}
    for name in order:
        log = open(LOGS / f"{name}.log", "w")  # closed when the part ends
        proc = subprocess.Popen(commands[name], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        running[proc.pid] = (name, proc, log)
        print(f"started {name}: {' '.join(commands[name])}", flush=True)
    results: dict[str, dict[str, float]] = {}
    while running:
        pid, status, usage = os.wait4(-1, 0)  # any child: the parts are this process's only children
        if pid not in running:
            continue
        name, proc, log = running.pop(pid)
        log.close()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, with its rusage: Popen must not wait
        results[name] = {"code": proc.returncode, "wall": time.monotonic() - started,
                         "cpu": usage.ru_utime + usage.ru_stime}
        if name != LAST:
            r = results[name]
            print(f"\n===== {name} (exit {r['code']}, {r['wall']:.0f} s, CPU {r['cpu']:.0f} s) =====", flush=True)
            print((LOGS / f"{name}.log").read_text(), flush=True)
    total = time.monotonic() - started
    TIMES.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\n===== {LAST} (exit {results[LAST]['code']:.0f}) =====", flush=True)
    print((LOGS / f"{LAST}.log").read_text(), flush=True)
    print("===== slowest tests of each part =====")
    for name in order:
        lines = slowest((LOGS / f"{name}.log").read_text(errors="replace"))
        if lines:
            print(f"--- {name}")
            print("\n".join(lines[:10]))
    print("\n===== time per part (run side by side; CPU: user+sys of the part and the processes it waited for) =====")
    for name in order:
        r = results[name]
        state = "ok" if r["code"] == 0 else f"FAILED (exit {r['code']:.0f})"
        print(f"{name:15} {r['wall']:7.0f} s wall {r['cpu']:7.0f} s CPU  {state}")
    cpu = sum(r["cpu"] for r in results.values())
    print(f"{'total':15} {total:7.0f} s wall {cpu:7.0f} s CPU (the machine has {os.cpu_count()} cores; its reference "
          f"workload took {reference:.2f} s of CPU before the run)", flush=True)
    cpu_after = machine_cpu()
    if cpu_before and cpu_after:
        busy, idle = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
        print(f"{'machine':15} {busy:7.0f} s of CPU busy, {idle:.0f} s idle, during the run (everything: the kernels "
              f"the parts' own times leave out, daemons, and anything else running)", flush=True)
    failed = [name for name in order if results[name]["code"] != 0]
    for name in failed:  # again, last: what a log cut to its tail must still show
        tail = (LOGS / f"{name}.log").read_text(errors="replace").splitlines()[-FAILED_TAIL:]
        print(f"\n===== {name} FAILED: the last {len(tail)} lines of its output =====\n" + "\n".join(tail), flush=True)
    print(f"\nFAILED: {', '.join(failed)} (each part's whole output is above, and in build/test-logs/<part>.log)"
          if failed else f"\nall {len(order)} parts passed", flush=True)
    return 0 if all(r["code"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
