"""The gate for pairs of bugs: a pair (one template, two operators validated singly on it) is offered only when its
two edits are independent and, on every seed, the script with both bugs fires the oracle of one of them, the
script with only the first bug fixed still fires the second's, and the one with only the second fixed still fires
the first's: so each bug needs its own fix. Fixing both gives back the template, whose runs passed already."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchdoctor.clinic.operators import ClinicError, Operator, apply_operator, get_operator, revert
from torchdoctor.clinic.oracles import fired, symptoms
from torchdoctor.clinic.surface import base_template, rename
from torchdoctor.clinic.templates import template_source
from torchdoctor.clinic.validate import DEFAULT_WORKDIR, run_all

__all__ = ["PAIR_TEMPLATES", "PER_TEMPLATE", "PairMatrix", "PairResult", "pair_reason", "pair_sources",
           "select_pairs", "validate_pairs"]

# The templates whose runs take seconds (ddp_digits starts two processes per run: never paired).
PAIR_TEMPLATES = ("digits_mlp", "digits_cnn", "linear_regression", "text_classifier")
PER_TEMPLATE = 8  # pairs tried per template, so that the gate stays a few minutes


def pair_sources(template: str, a: Operator, b: Operator) -> tuple[str, str, str]:
    """The scripts with both bugs, with only `a` (b fixed) and with only `b` (a fixed); a ClinicError when the edits
    overlap: either order of applying them must give the same script, and undoing either must leave the other's.
    A surface variant's are its base template's, renamed."""
    if "~" in template:
        return tuple(rename(s, template) for s in pair_sources(base_template(template), a, b))  # type: ignore
    only_a, only_b = apply_operator(a, template), apply_operator(b, template)
    both = apply_operator(b, template, only_a)
    independent = (apply_operator(a, template, only_b) == both and revert(b, template, both) == only_a
                   and revert(a, template, both) == only_b
                   and revert(a, template, only_a) == template_source(template) == revert(b, template, only_b))
    if not independent:
        raise ClinicError(f"operators {a.id!r} and {b.id!r} on {template!r}: their edits overlap")
    return both, only_a, only_b


def select_pairs(validated: list[tuple[str, str]], per_template: int = PER_TEMPLATE) -> list[tuple[str, str, str]]:
    """The pairs the gate tries, as (template, a, b): on the fast templates, a silent bug with an error or with a
    silent bug of another oracle, of different chapters, edits independent; at most `per_template` per template,
    taken in the order of a hash of their names (deterministic, and spread over the operators)."""
    chosen = []
    for t in PAIR_TEMPLATES:  # base templates only: pairs on surface variants would triple the gate's pair runs
        ops = sorted((get_operator(o) for tt, o in validated if tt == t), key=lambda op: op.id)
        found = []
        for a in ops:
            for b in ops:
                if a.oracle == "error" or a.chapter == b.chapter or a.oracle == b.oracle:
                    continue
                if b.oracle != "error" and b.id < a.id:
                    continue  # two silent bugs: once, in name order
                try:
                    pair_sources(t, a, b)
                except ClinicError:
                    continue
                found.append((t, a.id, b.id))
        found.sort(key=lambda p: hashlib.sha256("+".join(p).encode()).hexdigest())
        chosen += found[:per_template]
    return chosen


@dataclass
class PairResult:
    template: str
    operators: list[str]
    chapters: list[str]
    validated: bool = False
    reason: str = ""
    findings: list[dict] = field(default_factory=list)  # per seed: what the oracles found on each script
    seconds: float = 0.0


def pair_reason(a: Operator, b: Operator, runs: dict[str, list[dict | None]], threshold: float | None) -> str:
    """Why a pair is rejected ("" when it passes), from its runs per seed: `both` (the two bugs), `a` (only a's bug
    left) and `b` (only b's); a run that is None was skipped."""
    for seed, (both, only_a, only_b) in enumerate(zip(runs["both"], runs["a"], runs["b"], strict=True)):
        if both is None or only_a is None or only_b is None:
            return f"seed {seed} not run"
        found = symptoms(both, threshold)
        if found.get("error") == "timeout":
            return f"seed {seed}: the script with both bugs timed out"
        if not (fired(a.oracle, a.label, found) or fired(b.oracle, b.label, found)):
            return f"seed {seed}: with both bugs, neither bug's oracle fires ({_shown(found)})"
        for left, fixed, report in ((a, b, only_a), (b, a, only_b)):
            if not fired(left.oracle, left.label, symptoms(report, threshold)):
                return (f"seed {seed}: fixing {fixed.id} alone also hides {left.id}'s symptom "
                        f"({_shown(symptoms(report, threshold))}): one fix would do for both")
    return ""


def _shown(found: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in found.items() if v) or "no oracle fires"


@dataclass
class PairMatrix:
    seeds: list[int]
    pairs: list[PairResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def validated(self) -> list[PairResult]:
        return [p for p in self.pairs if p.validated]

    def to_json(self) -> str:
        return json.dumps({"seeds": self.seeds, "pairs": [asdict(p) for p in self.pairs], "seconds": self.seconds},
                          indent=1)

    def table(self) -> str:
        lines = [f"{'template':<20} {'bug a':<24} {'bug b':<24} verdict"]
        for p in self.pairs:
            verdict = "validated" if p.validated else f"REJECTED: {p.reason}"
            lines.append(f"{p.template:<20} {p.operators[0]:<24} {p.operators[1]:<24} {verdict} ({p.seconds:.0f} s)")
        lines.append(f"{len(self.validated)} pairs validated of {len(self.pairs)} tried, seeds {self.seeds}, "
                     f"{self.seconds:.0f} s")
        return "\n".join(lines)


def validate_pairs(matrix_path: Path = DEFAULT_WORKDIR / "matrix.json", seeds: int = 3, jobs: int = 2,
                   timeout: float = 180, workdir: Path = DEFAULT_WORKDIR / "pairs", per_template: int = PER_TEMPLATE,
                   progress=None) -> PairMatrix:
    """Run the pair gate on the pairs `select_pairs` takes from the single cases validated in the gate's matrix
    (``validate --json``), with the accuracy thresholds of its clean runs."""
    start = time.monotonic()
    if not Path(matrix_path).exists():
        raise ClinicError(f"{matrix_path} is missing: run `make clinic-validate` (the single cases' gate) first")
    matrix = json.loads(Path(matrix_path).read_text())
    if len(matrix["seeds"]) < seeds:
        raise ClinicError(f"{matrix_path} validated the single cases on {len(matrix['seeds'])} seeds, not {seeds}")
    chosen = select_pairs([(c["template"], c["operator"]) for c in matrix["cases"] if c["validated"]], per_template)
    seed_list = list(range(seeds))
    sources = {(t, a, b): pair_sources(t, get_operator(a), get_operator(b)) for t, a, b in chosen}
    work = [(f"{a}+{b}", t, sources[(t, a, b)][0], s) for s in seed_list for t, a, b in chosen]
    singles = sorted({(t, o) for t, a, b in chosen for o in (a, b)})
    work += [(o, t, apply_operator(o, t), s) for s in seed_list for t, o in singles]

    def stop(key: str, report: dict) -> bool:  # a pair stops at its first seed where both bugs show nothing
        if "+" not in key:
            return False
        found = symptoms(report, matrix["clean"][report["template"]]["threshold"])
        return not any(fired(op.oracle, op.label, found) for op in map(get_operator, key.split("+")))

    reports = run_all(work, jobs, timeout, Path(workdir), stop, progress)
    result = PairMatrix(seeds=seed_list)
    for t, a, b in chosen:
        op_a, op_b = get_operator(a), get_operator(b)
        threshold = matrix["clean"][t]["threshold"]
        # only a's bug left is the script with b's edit undone: the single mutant of a
        runs = {"both": [reports.get((f"{a}+{b}", t, s)) for s in seed_list],
                "a": [reports.get((a, t, s)) for s in seed_list], "b": [reports.get((b, t, s)) for s in seed_list]}
        pair = PairResult(t, [a, b], [op_a.chapter, op_b.chapter])
        pair.reason = pair_reason(op_a, op_b, runs, threshold)
        pair.validated = not pair.reason
        pair.seconds = sum(r.get("wall_s", 0) for r in runs["both"] if r)
        for s in seed_list:
            pair.findings.append({"seed": s, **{k: symptoms(v[s], threshold) for k, v in runs.items() if v[s]}})
        result.pairs.append(pair)
    result.seconds = time.monotonic() - start
    return result
