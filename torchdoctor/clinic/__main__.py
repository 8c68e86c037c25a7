"""``python -m torchdoctor.clinic validate|gate|list|show|cases``: the clinic's matrix (``validate --pairs``: the pairs
of bugs), the whole gate compared with what students are offered, its operators, one mutant's source, and the
students' list of validated cases and pairs (torchdoctor/clinic/cases.json) written from the matrices."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchdoctor.clinic.operators import OPERATORS, ClinicError, apply_operator
from torchdoctor.clinic.pairs import PER_TEMPLATE, validate_pairs
from torchdoctor.clinic.validate import DEFAULT_WORKDIR, validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchdoctor.clinic", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="run the gate on every case (or some) and print the matrix")
    v.add_argument("--template", action="append", help="only this template (repeatable)")
    v.add_argument("--operator", action="append", help="only this operator (repeatable)")
    v.add_argument("--seeds", type=int, default=3, help="seeds per run (default 3)")
    v.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2)")
    v.add_argument("--timeout", type=float, default=180, help="seconds per run (default 180)")
    v.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="where runs write (default build/clinic)")
    v.add_argument("--json", type=Path, help="also write the matrix as JSON here")
    v.add_argument("--quiet", action="store_true", help="no line per run")
    v.add_argument("--pairs", action="store_true",
                   help="the pair gate instead: pairs of bugs validated singly in --matrix, on --seeds seeds")
    v.add_argument("--matrix", type=Path, default=DEFAULT_WORKDIR / "matrix.json",
                   help="with --pairs: the single cases' matrix (default build/clinic/matrix.json)")
    v.add_argument("--per-template", type=int, default=PER_TEMPLATE,
                   help=f"with --pairs: pairs tried per template (default {PER_TEMPLATE})")
    g = sub.add_parser("gate", help="every case and pair on every seed, then fail if a case cases.json offers is lost")
    g.add_argument("--seeds", type=int, default=3, help="seeds per run (default 3)")
    g.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2)")
    g.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR / "gate",
                   help="where runs and the matrices go (default build/clinic/gate)")
    g.add_argument("--quiet", action="store_true", help="no line per run")
    sub.add_parser("list", help="the operators, by chapter")
    s = sub.add_parser("show", help="print a mutant's source")
    s.add_argument("operator")
    s.add_argument("template")
    c = sub.add_parser("cases", help="write the validated cases students draw from (cases.json) from the matrix")
    c.add_argument("--matrix", type=Path, default=DEFAULT_WORKDIR / "matrix.json",
                   help="the gate's JSON (default build/clinic/matrix.json, from `make clinic-validate`)")
    c.add_argument("--pairs", type=Path, default=DEFAULT_WORKDIR / "pairs.json",
                   help="the pair gate's JSON (default build/clinic/pairs.json, from `make clinic-validate-pairs`)")
    c.add_argument("--out", type=Path, help="where to write (default torchdoctor/clinic/cases.json)")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for op in OPERATORS:
                print(f"{op.chapter:<13} {op.id:<24} {op.label:<27} {op.oracle:<12} {', '.join(op.templates)}")
            return 0
        if args.command == "cases":
            from torchdoctor.clinic.practice import CASES_PATH, write_cases

            pairs = args.pairs if args.pairs.exists() else None
            if pairs is None:
                print(f"no pair matrix at {args.pairs}: no pairs written (run `make clinic-validate-pairs` first)")
            data = write_cases(args.matrix, args.out or CASES_PATH, pairs)
            kinds = {k: sum(c["kind"] == k for c in data["cases"]) for k in ("error", "silent")}
            print(f"{len(data['cases'])} validated cases ({kinds['error']} errors, {kinds['silent']} silent) and "
                  f"{len(data.get('pairs', []))} pairs written to {args.out or CASES_PATH}")
            return 0
        if args.command == "show":
            print(apply_operator(args.operator, args.template), end="")
            return 0
        progress = None if args.quiet else lambda m: print(m, flush=True)
        if args.command == "gate":
            from torchdoctor.clinic.gate import run_gate

            return run_gate(seeds=args.seeds, jobs=args.jobs, workdir=args.workdir, progress=progress)
        if args.pairs:
            if args.template or args.operator:
                raise ClinicError("--pairs chooses its own pairs: leave out --template and --operator")
            matrix = validate_pairs(args.matrix, seeds=args.seeds, jobs=args.jobs, timeout=args.timeout,
                                    workdir=args.workdir / "pairs", per_template=args.per_template,
                                    progress=progress)
        else:
            matrix = validate(args.template, args.operator, seeds=args.seeds, jobs=args.jobs,
                              timeout=args.timeout, workdir=args.workdir, progress=progress)
    except ClinicError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(matrix.table())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(matrix.to_json())
    if args.pairs:
        return 0
    problems = [p for info in matrix.clean.values() for p in info["problems"]]
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
