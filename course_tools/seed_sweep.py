"""Run the course's notebooks at many seeds (``make test-notebooks-sweep``): a claim must hold at any seed.

CI runs the notebooks in FAST mode at SEED 0, 1 and 2 and in full mode at SEED 0 (``notebook_matrix``). A student may
change the seed, and a conclusion drawn from one noisy training run can hold at those seeds and break at another.
The sweep runs each notebook once per (mode, seed): FAST mode at SEED 0-15 and full mode at SEED 0-2 by default, one
papermill run per pair, JOBS side by side, each executed copy into build/sweep/<configuration>/. It prints a table
of notebooks against configurations and then every failure with its seed, its mode, the cell that failed and the
command that reruns it alone; build/sweep/report.json keeps the same. The workflow's scheduled ``seed-sweep`` job runs
it one seed per job.

Usage: python -m course_tools.seed_sweep [--fast-seeds 0-15] [--full-seeds 0-2] [--device D] [--jobs N] [PATH ...]
(a seed list is "0-15", "3,7,9" or "" for none; the default notebooks are the course's ready chapters and reference
notebooks, as course.toml lists them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from course_tools.run_notebooks import REPO, RunResult, resolve_device, run_one
from torchdoctor.manifest import load_manifest

SWEEP = REPO / "build" / "sweep"
FAST_SEEDS = "0-15"
FULL_SEEDS = "0-2"


@dataclass(frozen=True)
class Configuration:
    """One way a student runs a notebook: FAST or full mode, and a seed."""

    fast: bool
    seed: int

    @property
    def name(self) -> str:
        return f"{'fast' if self.fast else 'full'}-seed{self.seed}"

    def rerun(self, notebook: str) -> str:
        """The command that runs one notebook in this configuration alone."""
        full = "" if self.fast else " --full"
        return f".venv/bin/python -m course_tools.run_notebooks{full} --seed {self.seed} {notebook}"


def parse_seeds(text: str) -> list[int]:
    """'0-15' -> 0..15, '3,7' -> [3, 7], '' -> []; anything else is an error that shows the forms accepted."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.replace(" ", ",").split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a list of seeds: write a range like 0-15, a list like 3,7,9, or both (0-2,7)"
            ) from None
        if first > last or first < 0:
            raise argparse.ArgumentTypeError(f"{part!r}: a range of seeds goes from a low seed to a higher one")
        seeds += [s for s in range(first, last + 1) if s not in seeds]
    return seeds


def configurations(fast_seeds: list[int], full_seeds: list[int]) -> list[Configuration]:
    return [Configuration(True, s) for s in fast_seeds] + [Configuration(False, s) for s in full_seeds]


def default_notebooks() -> list[Path]:
    """Every ready chapter and reference notebook of course.toml (the homework has its own corpora)."""
    return [REPO / notebook for notebook in load_manifest().notebooks("ready")]


def _run(task: tuple[Configuration, Path, str, Path]) -> tuple[Configuration, RunResult]:
    config, path, device, build = task
    parameters = {"DEVICE": device, "FAST": config.fast, "SEED": config.seed}
    return config, run_one(path, parameters, build=build / config.name)


def sweep(paths: list[Path], configs: list[Configuration], device: str, jobs: int,
          build: Path = SWEEP) -> list[tuple[Configuration, RunResult]]:
    """Every notebook in every configuration, ``jobs`` runs side by side, in (configuration, notebook) order."""
    tasks = [(config, path, device, build) for config in configs for path in paths]
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(tasks)))) as pool:
        return list(pool.map(_run, tasks))


def failures(results: list[tuple[Configuration, RunResult]]) -> list[dict]:
    """One record per problem: the seed, the mode, the notebook, the cell's problem and the command to rerun it."""
    return [{"seed": config.seed, "fast": config.fast, "configuration": config.name, "notebook": result.path,
             "problem": problem, "rerun": config.rerun(result.path)}
            for config, result in results for problem in result.problems]


def print_report(results: list[tuple[Configuration, RunResult]], configs: list[Configuration]) -> None:
    notebooks = list(dict.fromkeys(result.path for _, result in results))
    by_pair = {(config.name, result.path): result for config, result in results}
    width = max(len(n) for n in notebooks)
    print(f"\n{'notebook':<{width}}  " + " ".join(f"{c.name:>12}" for c in configs))
    for notebook in notebooks:
        marks = []
        for config in configs:
            result = by_pair[(config.name, notebook)]
            marks.append(f"{'FAIL' if result.problems else 'ok'} {result.seconds:5.0f}s")
        print(f"{notebook:<{width}}  " + " ".join(f"{m:>12}" for m in marks))
    for failure in failures(results):
        mode = "FAST" if failure["fast"] else "full"
        print(f"\nFAIL at SEED {failure['seed']} in {mode} mode: {failure['notebook']}: {failure['problem']}\n"
              f"  rerun alone: {failure['rerun']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: ready chapters and references)")
    parser.add_argument("--fast-seeds", type=parse_seeds, default=parse_seeds(FAST_SEEDS),
                        help=f"seeds to run in FAST mode (default {FAST_SEEDS})")
    parser.add_argument("--full-seeds", type=parse_seeds, default=parse_seeds(FULL_SEEDS),
                        help=f"seeds to run in full mode, the notebooks' default (default {FULL_SEEDS})")
    parser.add_argument("--device", default=os.environ.get("DEVICE", "auto"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--build", type=Path, default=SWEEP, help=f"where executed copies go (default {SWEEP})")
    args = parser.parse_args(argv)

    paths = args.paths or default_notebooks()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"No such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    configs = configurations(args.fast_seeds, args.full_seeds)
    if not configs:
        print("No seed to run: give --fast-seeds or --full-seeds a seed.", file=sys.stderr)
        return 2
    device = resolve_device(args.device)
    started = time.monotonic()
    results = sweep(paths, configs, device, args.jobs, args.build.resolve())
    print_report(results, configs)
    found = failures(results)
    args.build.mkdir(parents=True, exist_ok=True)
    (args.build / "report.json").write_text(json.dumps(
        {"device": device, "configurations": [c.name for c in configs], "failures": found,
         "runs": [{"configuration": c.name, "notebook": r.path, "seconds": round(r.seconds, 1), "ok": not r.problems}
                  for c, r in results]}, indent=1))
    print(f"\n{len(results) - len({(f['configuration'], f['notebook']) for f in found})} of {len(results)} runs "
          f"passed ({len(paths)} notebooks x {len(configs)} configurations, {time.monotonic() - started:.0f} s).")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
