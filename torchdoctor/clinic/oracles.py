"""Oracles: what a run's report shows (torchdoctor/clinic/runner.py writes it), and whether a run is clean."""

from __future__ import annotations

import math
import re

from torchdoctor.clinic.surface import base_template
from torchdoctor.clinic.templates import TEMPLATES

__all__ = ["INITIAL_LOSS_TOLERANCE", "MEMORY_GROWTH_BYTES", "accuracy_threshold", "clean_problems", "missing_lines",
           "printed_lines", "symptoms"]

INITIAL_LOSS_TOLERANCE = 0.25  # as torchdoctor.sanity.check_initial_loss: |loss - ln C| <= 25% of ln C
MEMORY_GROWTH_BYTES = 2**19  # in use: clean templates grow by at most 0.1 MB, the leaks by 1.3-1.5 MB (measured)
MIN_MARGIN = 0.02  # the accuracy oracle fires below min(clean) - max(MIN_MARGIN, 2 x the clean spread)


def accuracy_threshold(clean_scores: list[float]) -> float:
    """The score under which a mutant's run is worse than the clean runs: their lowest score less a margin of twice
    their spread over seeds (at least MIN_MARGIN)."""
    spread = max(clean_scores) - min(clean_scores)
    return min(clean_scores) - max(MIN_MARGIN, 2 * spread)


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\bnan\b|\binf\b")


def printed_lines(output: str, run_dir: str) -> list[str]:
    """What a run printed, line by line, with its folder written <run> and every decimal number # (a loss differs
    from seed to seed), except a zero, which stays 0: a mean loss of 0.0000 is a sum that was never made. Whole
    numbers stay: how many epochs, batches and predictions the script reports are the same on every seed."""
    def number(match: re.Match) -> str:
        try:
            return "0" if float(match.group()) == 0 else "#"
        except ValueError:
            return "#"

    return [_NUMBER.sub(number, line.replace(run_dir, "<run>")).rstrip() for line in output.splitlines()
            if line.strip()]


def missing_lines(expected: list[str], printed: list[str]) -> list[str]:
    """The working script's lines (``printed_lines``) a run did not print, as many times as it printed them."""
    left = list(printed)
    missing = []
    for line in expected:
        if line in left:
            left.remove(line)
        else:
            missing.append(line)
    return missing


def _memory_growth(report: dict) -> int:
    memory = report.get("memory") or []
    if len(memory) < 8:
        return 0
    return memory[-1] - memory[len(memory) // 4]


def symptoms(report: dict, threshold: float | None) -> dict[str, object]:
    """Each oracle's finding on one run: a catalog id (or 'unknown error') for `error`, True/False for the others
    (False where the run did not get far enough to show it)."""
    if report.get("timeout"):
        return {"error": "timeout"}
    found: dict[str, object] = {}
    if report["error"] is not None:
        # A worker's error quoted by the parent's (torch.multiprocessing.spawn): the catalog's advice is to explain
        # the quoted error on its own, so that is the error the case is about.
        found["error"] = report.get("root_error_id") or report["error_id"] or "unknown error"
    losses = report["losses"]
    found["nonfinite"] = any(isinstance(x, str) for x in losses)
    num_classes = TEMPLATES[base_template(report["template"])][1]
    if num_classes and losses and not isinstance(losses[0], str):
        ln_c = math.log(num_classes)
        found["initial-loss"] = abs(losses[0] - ln_c) > INITIAL_LOSS_TOLERANCE * ln_c
    found["frozen"] = bool(report["frozen"] or report.get("untrained")) and report["error"] is None
    found["memory"] = report["error"] is None and _memory_growth(report) > MEMORY_GROWTH_BYTES
    if report["error"] is None:
        score = report["score"]
        found["accuracy"] = score is None or (threshold is not None and score < threshold)
    return found


def clean_problems(report: dict) -> list[str]:
    """Why a run of a clean template fails an oracle (empty when it passes them all)."""
    if report.get("timeout"):
        return [f"timed out after {report['timeout']} s"]
    problems = []
    if report["error"] is not None:
        last_line = report["error"].strip().splitlines()[-1]
        problems.append(f"raised {report['error_id'] or 'an unknown error'}: {last_line}")
    found = symptoms(report, None)
    for oracle in ("nonfinite", "initial-loss", "frozen", "memory"):
        if found.get(oracle):
            problems.append(f"oracle {oracle} fires")
    steps = report.get("steps", 0)
    if report["error"] is None and steps and (report.get("backward_calls") != steps or report.get("uncleared")
                                              or report.get("grads_changed")):
        problems.append(f"its steps are not made as a fix must make them ({report.get('backward_calls')} backward "
                        f"calls, {steps} steps, {report.get('uncleared')} on uncleared gradients, "
                        f"{report.get('grads_changed')} given changed gradients)")
    floor = TEMPLATES[base_template(report["template"])][2]
    if report["error"] is None and (report["score"] is None or report["score"] < floor):
        problems.append(f"score {report['score']} below the template's floor {floor} ({report['score_note']})")
    return problems


def fired(oracle: str, label: str, found: dict[str, object]) -> bool:
    """Whether a mutant's run shows the operator's own oracle."""
    if oracle == "error":
        return found.get("error") == label
    return "error" not in found and bool(found.get(oracle))
