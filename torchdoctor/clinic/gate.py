"""The whole gate in one command (``python -m torchdoctor.clinic gate``, ``make clinic-gate``, a part of ``make
test``): every single case on every seed, then the pairs, then a comparison with what students are offered
(cases.json), then the fix corpus (wrong_fixes.py: every validated case's known-wrong fixes must fail and name what
they hide, its right ones pass). It fails when a clean template fails an oracle, when a case or pair cases.json offers
is no longer validated on the scripts it would serve today, or when a fix of the corpus is not judged as deserved;
cases validated but not offered are listed, not failed (``python -m torchdoctor.clinic cases`` adds them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from torchdoctor.clinic.pairs import validate_pairs
from torchdoctor.clinic.practice import CASES_PATH, write_cases
from torchdoctor.clinic.validate import DEFAULT_WORKDIR, validate
from torchdoctor.clinic.wrong_fixes import check_corpus

__all__ = ["compare_offered", "run_gate"]


def _keys(data: dict) -> tuple[set, set]:
    """The offered single cases and pairs, each with the fingerprint of the buggy script it serves."""
    singles = {(c["template"], c["operator"], c["mutant"]) for c in data["cases"]}
    pairs = {(p["template"], tuple(p["operators"]), p["mutant"]) for p in data.get("pairs", [])}
    return singles, pairs


def compare_offered(offered: dict, validated: dict) -> tuple[list[str], list[str]]:
    """(lost, new): what cases.json offers that today's gate did not validate, and what it validated that
    cases.json does not offer, as one line each."""
    old, now = _keys(offered), _keys(validated)
    lost = [f"{t} {o} (script {m})" for t, o, m in sorted(old[0] - now[0])]
    lost += [f"{t} {'+'.join(o)} (script {m})" for t, o, m in sorted(old[1] - now[1])]
    new = [f"{t} {o}" for t, o, _ in sorted(now[0] - old[0])]
    new += [f"{t} {'+'.join(o)}" for t, o, _ in sorted(now[1] - old[1])]
    return lost, new


def run_gate(seeds: int = 3, jobs: int = 2, workdir: Path = DEFAULT_WORKDIR / "gate", progress=None) -> int:
    """Run the gate, print both matrices and the comparison with cases.json; 0 when nothing offered was lost."""
    start = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    matrix = validate(seeds=seeds, jobs=jobs, workdir=workdir / "runs", progress=progress)
    (workdir / "matrix.json").write_text(matrix.to_json())
    print(matrix.table(), flush=True)
    pairs = validate_pairs(workdir / "matrix.json", seeds=seeds, jobs=jobs, workdir=workdir / "pairs",
                           progress=progress)
    (workdir / "pairs.json").write_text(pairs.to_json())
    print("\n" + pairs.table(), flush=True)
    validated = write_cases(workdir / "matrix.json", workdir / "cases.json", workdir / "pairs.json")
    corpus_start = time.monotonic()
    corpus = check_corpus(validated, matrix.seeds, jobs, workdir / "fixes", progress)
    corpus_seconds = time.monotonic() - corpus_start
    print("\n" + "\n".join(r.line() for r in corpus), flush=True)
    lost, new = compare_offered(json.loads(CASES_PATH.read_text()), validated)
    problems = [p for info in matrix.clean.values() for p in info["problems"]]
    errors = sum(c["kind"] == "error" for c in validated["cases"])
    print(f"\nThe gate validated {len(validated['cases'])} single cases ({errors} errors, "
          f"{len(validated['cases']) - errors} silent) and {len(validated['pairs'])} pairs on seeds {matrix.seeds} in "
          f"{time.monotonic() - start:.0f} s ({matrix.seconds:.0f} s singles, {pairs.seconds:.0f} s pairs).")
    wrong = [r for r in corpus if not r.fix.right]
    operators = {r.fix.operator for r in corpus}
    print(f"The fix corpus: {len(wrong)} known-wrong fixes ({sum(bool(r.passed) for r in wrong)} run, the others "
          f"refused before running) and {len(corpus) - len(wrong)} right ones, over {len(operators)} operators, in "
          f"{corpus_seconds:.0f} s.")
    for line in problems:
        print(f"FAILED: a clean template fails an oracle: {line}")
    for r in corpus:
        if not r.ok:
            print(f"FAILED: {'a right fix is refused' if r.fix.right else 'a known-wrong fix passes or is not named'}"
                  f": {r.line()}")
    for line in lost:
        print(f"FAILED: offered in {CASES_PATH.name} but not validated today: {line}")
    if new:
        print(f"Validated but not offered (`python -m torchdoctor.clinic cases` adds them): {'; '.join(new)}")
    failed = [r for r in corpus if not r.ok]
    if not problems and not lost:
        print(f"Every case and pair {CASES_PATH.name} offers is validated.")
    return 1 if problems or lost or failed else 0
