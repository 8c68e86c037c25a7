"""Validation, the gate: a case (template or surface variant x operator) is offered only when, on every seed, the
clean template passes every oracle, the mutant fires its own oracle, and reverting the edit gives back the template
byte for byte (so the fix is the clean script, whose runs passed; checked on the base template, whose edit a
variant's is, renamed). Each run is a subprocess with a time limit; runs go side by side."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchdoctor.clinic.operators import (
    OPERATORS,
    ClinicError,
    Operator,
    apply_operator,
    case_templates,
    get_operator,
    revert,
)
from torchdoctor.clinic.oracles import (
    accuracy_threshold,
    clean_problems,
    fired,
    printed_lines,
    symptoms,
)
from torchdoctor.clinic.surface import base_template, variant_of
from torchdoctor.clinic.templates import template_source

__all__ = ["CaseResult", "Matrix", "Zygote", "run_all", "run_script", "validate"]

DEFAULT_WORKDIR = Path("build/clinic")


class Zygote:
    """A runner process that has imported torch once and forks a child per run (``runner.py --serve``)."""

    def __init__(self) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", "torchdoctor.clinic.runner", "--serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, template: str, source: str, workdir: Path, seed: int, timeout: float) -> dict:
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in ("report.json", "checkpoint.pt", "output.txt"):
            (workdir / stale).unlink(missing_ok=True)
        script = workdir / "script.py"
        script.write_text(source)
        request = {"template": template, "script": str(script), "out": str(workdir), "seed": seed,
                   "timeout": timeout}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the clinic's runner process died (exit {self.proc.poll()})")
        answer = json.loads(line)
        if answer["timed_out"]:
            return {"template": template, "seed": seed, "timeout": timeout, "wall_s": answer["wall_s"]}
        report_path = workdir / "report.json"
        if not report_path.exists():
            output = (workdir / "output.txt").read_text() if (workdir / "output.txt").exists() else ""
            raise RuntimeError(f"the clinic runner itself failed in {workdir} (exit {answer['exit']}):\n"
                               f"{output[-3000:]}")
        report = json.loads(report_path.read_text())
        report["wall_s"] = answer["wall_s"]
        output = workdir / "output.txt"
        report["printed"] = printed_lines(output.read_text(errors="replace"), str(workdir)) if output.exists() else []
        return report

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_script(template: str, source: str, workdir: Path, seed: int, timeout: float = 180) -> dict:
    """Run one script (a template or a mutant) in a child process with a time limit; its report, with `wall_s`
    (`timeout` set instead when it was killed at the limit)."""
    with Zygote() as zygote:
        return zygote.run(template, source, workdir, seed, timeout)


RETRY_FACTOR = 3   # a run killed at its time limit is run again with this many times the limit


def run_all(work: list[tuple[str, str, str, int]], jobs: int, timeout: float, workdir: Path,
            stop=None, progress=None) -> dict[tuple[str, str, int], dict]:
    """Run each (key, template, source, seed) of `work` side by side (`jobs` forked runners), in order; their
    reports by (key, template, seed). Once `stop(key, report)` is true, the key's later runs are skipped. A run
    killed at `timeout` runs once more with RETRY_FACTOR times it: under a heavy load (make test runs its parts side
    by side) a clean template could pass the limit, and the gate would then lose its cases to the machine."""
    reports: dict[tuple[str, str, int], dict] = {}
    dead: set[tuple[str, str]] = set()
    lock = threading.Lock()
    zygotes: queue.Queue[Zygote] = queue.Queue()

    def job(key: str, t: str, source: str, seed: int) -> None:
        if (key, t) in dead:
            return
        try:
            zygote = zygotes.get_nowait()
        except queue.Empty:
            zygote = Zygote()
        try:
            report = zygote.run(t, source, workdir / t / key / f"seed{seed}", seed, timeout)
            if report.get("timeout"):   # once more with 3x the limit: a loaded machine is slow, a hang hangs again
                report = zygote.run(t, source, workdir / t / key / f"seed{seed}", seed, RETRY_FACTOR * timeout)
        finally:
            zygotes.put(zygote)
        with lock:
            reports[(key, t, seed)] = report
            if stop is not None and stop(key, report):
                dead.add((key, t))
        if progress:
            progress(f"{key} on {t}, seed {seed}: {report.get('wall_s', '?')} s")

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for f in [pool.submit(job, *w) for w in work]:
                f.result()
    finally:
        while not zygotes.empty():
            zygotes.get_nowait().close()
    return reports


@dataclass
class CaseResult:
    operator: str
    template: str
    chapter: str
    label: str
    oracle: str
    validated: bool = False
    reason: str = ""
    findings: list[dict] = field(default_factory=list)  # per seed: what each oracle found, and the score
    seconds: float = 0.0


@dataclass
class Matrix:
    seeds: list[int]
    clean: dict[str, dict] = field(default_factory=dict)  # template -> scores, threshold, problems
    cases: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def validated(self) -> list[CaseResult]:
        return [c for c in self.cases if c.validated]

    @property
    def rejected(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.validated]

    def to_json(self) -> str:
        return json.dumps({"seeds": self.seeds, "clean": self.clean, "cases": [asdict(c) for c in self.cases],
                           "seconds": self.seconds}, indent=1)

    def table(self) -> str:
        """The matrix as text: every case by chapter, then the counts by chapter."""
        lines = [f"{'chapter':<13} {'operator':<24} {'template':<20} {'label':<27} {'oracle':<12} verdict"]
        for c in sorted(self.cases, key=lambda c: (_chapter_order(c.chapter), c.operator, c.template)):
            verdict = "validated" if c.validated else f"REJECTED: {c.reason}"
            lines.append(f"{c.chapter:<13} {c.operator:<24} {c.template:<20} {c.label:<27} {c.oracle:<12} "
                         f"{verdict} ({c.seconds:.0f} s)")
        lines.append("")
        lines.append(f"{'chapter':<13} {'operators':>9} {'validated':>9} {'rejected':>8}  (operators; cases)")
        chapters = sorted({c.chapter for c in self.cases}, key=_chapter_order)
        for ch in chapters:
            cs = [c for c in self.cases if c.chapter == ch]
            ops = {c.operator for c in cs}
            ok = sum(c.validated for c in cs)
            lines.append(f"{ch:<13} {len(ops):>9} {ok:>9} {len(cs) - ok:>8}")
        ops_ok = {c.operator for c in self.validated}
        lines.append(f"{'total':<13} {len({c.operator for c in self.cases}):>9} {len(self.validated):>9} "
                     f"{len(self.rejected):>8}")
        lines.append("")
        for t, info in self.clean.items():
            scores = ", ".join(f"{s:.3f}" for s in info["scores"] if s is not None)
            state = "passes every oracle" if not info["problems"] else "FAILS: " + "; ".join(info["problems"])
            lines.append(f"clean {t}: scores {scores}; accuracy oracle below {info['threshold']:.3f}; {state}")
        lines.append(f"{len(self.validated)} cases validated from {len(ops_ok)} operators, {len(self.rejected)} "
                     f"rejected, seeds {self.seeds}, {self.seconds:.0f} s")
        return "\n".join(lines)


def _chapter_order(slug: str) -> int:
    order = ["method", "dimensions", "gradients", "memory", "dtype-device", "checkpoints", "data-loading",
             "convergence", "accuracy", "multi-gpu", "case-study"]
    return order.index(slug) if slug in order else len(order)


def _select(templates: list[str] | None, operators: list[str] | None) -> list[tuple[Operator, str]]:
    """(operator, template) of every case asked for: a template named selects its surface variants too."""
    for t in templates or []:
        variant_of(t)  # a clear error for an unknown template or variant
    ops = [get_operator(o) for o in operators] if operators else list(OPERATORS)
    pairs = [(op, t) for op in ops for t in case_templates(op)
             if not templates or t in templates or base_template(t) in templates]
    if not pairs:
        raise ClinicError(f"no case: operators {[o.id for o in ops]} have no edit for templates {templates}")
    return pairs


def validate(templates: list[str] | None = None, operators: list[str] | None = None, seeds: int = 3,
             jobs: int = 2, timeout: float = 180, workdir: Path = DEFAULT_WORKDIR,
             progress=None) -> Matrix:
    """Validate every case of the selection (all operators on all their templates by default) on `seeds` seeds."""
    start = time.monotonic()
    pairs = _select(templates, operators)
    mutants, unrenamed = {}, {}
    for op, t in pairs:  # every anchor checked before anything runs
        if "~" not in t:
            mutants[(op.id, t)] = apply_operator(op, t)
            if revert(op, t, mutants[(op.id, t)]) != template_source(t):
                raise ClinicError(f"operator {op.id!r} on {t!r}: reverting the edit does not give back the template")
            continue
        try:  # a variant's fix is its renamed template: reverting is checked on the base template
            mutants[(op.id, t)] = apply_operator(op, t)
        except ClinicError as e:  # the edit brings a name the variant renames to: no such case
            unrenamed[(op.id, t)] = str(e)
    pairs = [(op, t) for op, t in pairs if (op.id, t) in mutants]
    seed_list = list(range(seeds))
    needed = sorted({t for _, t in pairs})
    by_id = {op.id: op for op, _ in pairs}

    def stop(kind: str, report: dict) -> bool:
        if kind == "clean":
            return False
        op = by_id[kind]
        found = symptoms(report, None)
        return (op.oracle == "error" and found.get("error") != op.label) or (
            op.oracle not in ("error", "accuracy") and not fired(op.oracle, op.label, found))

    work = [("clean", t, template_source(t), s) for s in seed_list for t in needed]
    work += [(op.id, t, mutants[(op.id, t)], s) for s in seed_list for op, t in pairs]
    reports = run_all(work, jobs, timeout, workdir, stop, progress)

    matrix = Matrix(seeds=seed_list)
    for (op_id, t), why in unrenamed.items():
        op = get_operator(op_id)
        matrix.cases.append(CaseResult(op.id, t, op.chapter, op.label, op.oracle, reason=why))
    for t in needed:
        runs = [reports[("clean", t, s)] for s in seed_list]
        problems = [f"seed {r['seed']}: {p}" for r in runs for p in clean_problems(r)]
        scores = [r.get("score") for r in runs]
        ok_scores = [s for s in scores if s is not None]
        threshold = accuracy_threshold(ok_scores) if ok_scores else float("nan")
        printed = Counter(runs[0].get("printed", []))
        for r in runs[1:]:  # the lines every seed printed (decimals masked): what a fix must still print
            printed &= Counter(r.get("printed", []))
        matrix.clean[t] = {"scores": scores, "threshold": threshold, "problems": problems,
                           "seconds": sum(r.get("wall_s", 0) for r in runs), "printed": list(printed.elements()),
                           "loads": min(len(r.get("loads", [])) for r in runs)}
    for op, t in pairs:
        case = CaseResult(op.id, t, op.chapter, op.label, op.oracle)
        clean = matrix.clean[t]
        runs = [reports.get((op.id, t, s)) for s in seed_list]
        case.seconds = sum(r.get("wall_s", 0) for r in runs if r)
        reasons = []
        if clean["problems"]:
            reasons.append(f"the clean template fails: {clean['problems'][0]}")
        for s, r in zip(seed_list, runs, strict=True):
            if r is None:
                continue
            found = symptoms(r, clean["threshold"])
            case.findings.append({"seed": s, "found": found, "score": r.get("score")})
            if not fired(op.oracle, op.label, found):
                reasons.append(f"seed {s}: {_why_not(op, found, r, clean['threshold'])}")
        skipped = sum(r is None for r in runs)
        if skipped and not reasons:
            reasons.append(f"{skipped} seeds not run")
        case.validated = not reasons
        case.reason = reasons[0] if reasons else ""
        matrix.cases.append(case)
    matrix.seconds = time.monotonic() - start
    return matrix


def _why_not(op: Operator, found: dict, report: dict, threshold: float) -> str:
    if found.get("error") == "timeout":
        return f"timed out after {report['timeout']} s"
    if "error" in found:
        return f"raised {found['error']}" + ("" if op.oracle == "error" else f", not the silent symptom {op.oracle}")
    if op.oracle == "error":
        return "no error raised"
    if op.oracle == "accuracy":
        return f"no symptom: score {report['score']:.3f} is not below {threshold:.3f} (the clean runs' spread)"
    if op.oracle == "initial-loss":
        return f"no symptom: initial loss {report['losses'][0]:.3f} is near ln C"
    return f"no symptom: oracle {op.oracle} does not fire"
