"""Run the course's notebooks with papermill and check every declared error (``make test-notebooks``).

The notebooks are those the course manifest (course.toml) says exist: its ready chapters and its reference
notebooks, then the solutions/ and exercises/ notebooks of its ready assignments. Chapters, references and
homework solutions must run clean apart from their declared errors. Homework starters in exercises/ must fail only
where the student has work to do. Executed copies go to
build/notebooks/; a table of per-notebook times is printed at the end. Exit status 1 on any problem.

Usage: python -m course_tools.run_notebooks [--device auto|cpu|cuda|mps] [--full] [--seed N] [--build DIR] [PATH ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import nbformat

from course_tools.notebook_check import check_executed, fill_reference_answers, skip_for_device
from course_tools.progress_text import progress_bars_as_text
from torchdoctor.explain_i18n import NOTEBOOK_ENV
from torchdoctor.manifest import load_manifest
from torchdoctor.quiz import STRICT

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build" / "notebooks"
CELL_TIMEOUT_S = 600  # a cell that hangs fails the run instead of stalling CI


@dataclass
class RunResult:
    """What running one notebook showed."""

    path: str
    seconds: float
    skipped_cells: int = 0
    problems: list[str] = field(default_factory=list)


@contextlib.contextmanager
def kernel_environment(variables: dict[str, str]) -> Iterator[None]:
    """Set ``variables`` for the kernels started inside, and give the runner's process back its own values after:
    a process that runs a notebook and then starts JupyterLab (the test suite) must not hand the lab strict checks."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def homework_notebook(folder: str, assignment: str) -> Path:
    """An assignment's generated notebook: ``folder`` is "solutions" or "exercises"."""
    return REPO / folder / assignment / f"{assignment}.ipynb"


def default_notebooks() -> list[Path]:
    """The notebooks course.toml says exist, in its order: ready chapters and references, then the solutions and
    the starters of ready assignments. tests/test_manifest.py checks that no other notebook is left out."""
    manifest = load_manifest()
    homework = manifest.assignment_names("ready")
    return ([REPO / notebook for notebook in manifest.notebooks("ready")]
            + [homework_notebook("solutions", a) for a in homework]
            + [homework_notebook("exercises", a) for a in homework])


def is_starter(path: Path) -> bool:
    """Homework as students get it (exercises/<a>/<a>.ipynb of a manifest assignment): unsolved, so its tests are
    meant to fail."""
    resolved = path.resolve()
    return any(resolved == homework_notebook("exercises", a) for a in load_manifest().assignment_names(None))


def resolve_device(choice: str) -> str:
    """Turn DEVICE=auto into the device the notebooks will really use; refuse an unavailable explicit one."""
    import torch

    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }
    if choice == "auto":
        return next(name for name in ("cuda", "mps", "cpu") if available[name])
    if choice not in available:
        raise SystemExit(f"DEVICE={choice!r} is not one of auto, cpu, cuda, mps.")
    if not available[choice]:
        raise SystemExit(f"DEVICE={choice!r} was asked for, but torch reports it unavailable on this machine.")
    return choice


def run_one(path: Path, parameters: dict, build: Path = BUILD, starter: bool | None = None) -> RunResult:
    """Execute one notebook with papermill in a fresh working folder under ``build`` and check it.

    The executed copy lands in ``build`` at the notebook's place in the repository (or by its name, for a
    notebook from elsewhere). ``starter`` defaults to whether the notebook lies in exercises/.
    """
    import papermill
    from papermill.execute import remove_error_markers

    started = time.perf_counter()
    resolved = path.resolve()
    relative = resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else Path(resolved.name)
    out = build / relative
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = build / "work" / relative.with_suffix("")
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)

    nb = nbformat.read(path, as_version=4)
    skipped = skip_for_device(nb, parameters["DEVICE"])
    fill_reference_answers(nb)
    starter = is_starter(path) if starter is None else starter
    problems: list[str] = []
    # The kernel inherits both: strict checks (a check that rejects the reference answer raises), and its notebook
    # as JupyterLab tells it, so torchdoctor speaks the notebook's language (a Chinese notebook's metadata says zh_CN).
    with kernel_environment({STRICT: "1", NOTEBOOK_ENV: str(resolved)}):
        try:
            papermill.execute_notebook(
                nb,
                str(out),
                parameters=parameters,
                cwd=str(workdir),
                progress_bar=False,
                execution_timeout=CELL_TIMEOUT_S,
                allow_errors=starter,
            )
        except papermill.PapermillExecutionError:
            pass  # papermill reports declared errors too; check_executed below tells them apart
        except Exception as exc:  # a dead kernel or a timeout: report it, then check what did run
            problems.append(f"execution stopped: {type(exc).__name__}: {exc}")

    executed = remove_error_markers(nbformat.read(out, as_version=4)) if out.exists() else nb
    progress_bars_as_text(executed)
    nbformat.write(executed, out)
    problems += check_executed(executed, starter=starter)
    return RunResult(str(relative), time.perf_counter() - started, len(skipped), problems)


def print_table(results: list[RunResult], device: str) -> None:
    width = max(len(r.path) for r in results)
    print(f"\nNotebooks on DEVICE={device}")
    print(f"{'notebook':<{width}}  {'seconds':>8}  {'skipped':>7}  result")
    for r in results:
        verdict = "ok" if not r.problems else f"{len(r.problems)} problem(s)"
        print(f"{r.path:<{width}}  {r.seconds:8.1f}  {r.skipped_cells:7d}  {verdict}")
    print(f"{'total':<{width}}  {sum(r.seconds for r in results):8.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--device", default=os.environ.get("DEVICE", "auto"))
    parser.add_argument("--full", action="store_true", help="run with FAST=False (CI uses FAST=True)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--build", type=Path, default=BUILD, help=f"where executed copies go (default {BUILD})")
    args = parser.parse_args(argv)

    paths = args.paths or default_notebooks()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        listed = "" if args.paths else " (course.toml says they exist; homework notebooks come from `make release`)"
        print(f"No such notebook: {', '.join(missing)}{listed}", file=sys.stderr)
        return 2
    device = resolve_device(args.device)
    parameters = {"DEVICE": device, "FAST": not args.full, "SEED": args.seed}

    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(paths)))) as pool:
        results = list(pool.map(partial(run_one, build=args.build.resolve()), paths, [parameters] * len(paths)))

    for r in results:
        for problem in r.problems:
            print(f"FAIL {r.path}: {problem}")
    print_table(results, device)
    failed = [r for r in results if r.problems]
    print(f"\n{len(results) - len(failed)} of {len(results)} notebooks passed their checks.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
