"""Cases with two bugs (kind ``"two"``): one template, two bugs whose edits are independent, a run seed. The pair
gate (``torchdoctor/clinic/pairs.py``) offers a pair only when each bug needs its own fix. The diagnosis names both
bugs from six choices (a wrong name costs what a right one earns), and a fix passes only when both are fixed."""

from __future__ import annotations

import random

from torchdoctor.clinic import practice
from torchdoctor.clinic.codes import MAX_SEED, encode
from torchdoctor.clinic.operators import ClinicError, get_operator
from torchdoctor.clinic.pairs import pair_sources
from torchdoctor.clinic.practice import (
    Case,
    Feedback,
    Run,
    _fingerprint,
    _option_text,
    _same_symptom,
    _silent_symptoms,
    _symptom_problems,
)
from torchdoctor.clinic.templates import template_source

__all__ = ["PairCase", "pair_entries"]


def pair_entries(pair_matrix: dict, cases: list[dict]) -> list[dict]:
    """The entries of cases.json's ``pairs``: the pair gate's validated pairs (``validate --pairs --json``) whose
    two bugs are validated single cases, each with the fingerprint of the script with both bugs."""
    single = {(c["template"], c["operator"]): c for c in cases}
    entries = []
    for p in pair_matrix["pairs"]:
        t, ops = p["template"], p["operators"]
        if not p["validated"] or any((t, o) not in single for o in ops):
            continue
        both = pair_sources(t, *(get_operator(o) for o in ops))[0]
        entries.append({"template": t, "operators": ops, "chapters": [single[(t, o)]["chapter"] for o in ops],
                        "kinds": [single[(t, o)]["kind"] for o in ops], "kind": "two", "mutant": _fingerprint(both)})
    return sorted(entries, key=lambda e: (e["template"], e["operators"]))


class PairCase(Case):
    """Two bugs in one script, each needing its own fix. Build it with ``draw(kind="two")`` or from its code."""

    def __init__(self, template: str, operators: tuple[str, str], seed: int) -> None:
        if not (isinstance(seed, int) and 0 <= seed <= MAX_SEED):
            raise ClinicError(f"a case's seed is a whole number from 0 to {MAX_SEED}, not {seed!r}")
        data = practice._cases_file()
        entry = next((e for e in data.get("pairs", []) if e["template"] == template
                      and tuple(e["operators"]) == tuple(operators)), None)
        if entry is None:
            raise ClinicError(f"operators {operators!r} on template {template!r} are not a validated pair")
        self.template, self.seed = template, seed
        self._ops = tuple(get_operator(o) for o in operators)
        self.kind, self.chapters = "two", tuple(entry["chapters"])
        self.code = encode(f"{template}/{'+'.join(operators)}", seed, "P")
        self.script, *self._halves = pair_sources(template, *self._ops)
        clean = data["templates"][template]
        self._threshold, self._clean_scores = clean["threshold"], [s for s in clean["scores"] if s is not None]
        if _fingerprint(self.script) != entry["mutant"] or _fingerprint(template_source(template)) != clean["clean"]:
            raise ClinicError(f"case {self.code}: the script changed since the gate validated it; run the gates "
                              "and `python -m torchdoctor.clinic cases`")

    def _buggy_versions(self) -> list[str]:
        return [self.script, *self._halves]

    def choices(self) -> list[str]:
        """Six diagnoses, shuffled by the case code: both true bugs, and for each two others with its symptom."""
        rng = random.Random(self.code)
        options = [op.description for op in self._ops]
        for op in self._ops:
            options += [other.description for other in _same_symptom(op, self.template, 2, rng, set(options))]
        rng.shuffle(options)
        return options

    def check_diagnosis(self, answer: list[int | str] | tuple[int | str, ...] | set[int | str]) -> Feedback:
        """How many of the two bugs ``answer`` names (indices into ``choices()`` or choices' texts). Each right name
        earns half the credit and each wrong one costs as much, so naming every choice earns nothing."""
        if not isinstance(answer, list | tuple | set):
            raise ClinicError(f"this case has two bugs: answer with a list of choices (indices or texts), e.g. "
                              f"[1, 4], not {answer!r}")
        options = self.choices()
        named = {_option_text(options, a) for a in answer}
        truths = {op.description for op in self._ops}
        right, wrong = named & truths, named - truths
        credit = max(0, len(right) - len(wrong)) / len(truths)
        if credit == 1:
            return Feedback(True, "both bugs named, and nothing else: fix them both and check the script with "
                                  "case.check_fix(...).")
        problems = [f"“{text}” is not what is wrong in this script." for text in sorted(wrong)]
        if len(right) < len(truths):
            problems.append(self._hint())
        return Feedback(False, f"{len(right)} of the 2 bugs named, and {len(wrong)} wrong "
                               f"{'choice' if len(wrong) == 1 else 'choices'}: {credit:.0%} of the credit (a wrong "
                               "name costs what a right one earns)", problems)

    def _hint(self) -> str:
        if any(op.oracle == "error" for op in self._ops):
            return ("an error stops the script before the other bug can show: fix the error, then check the script "
                    "with case.check_fix(...), which runs it and shows the other bug's symptom")
        return "each bug shows its own symptom: read every line marked <-- symptom in case.run()"

    def _problems(self, run: Run) -> list[str]:
        problems = _symptom_problems(run)
        if not problems:
            return []
        labels = {op.label for op in self._ops if op.oracle == "error"}
        if run.report.get("error") and run.found.get("error") in labels:
            lead = ("one of this case's two bugs still raises its error; fix it and check again: the other bug may "
                    "be hiding behind it")
        else:
            still = [op for op in self._ops if op.oracle in _silent_symptoms(run)]
            lead = ("both of this case's bugs still show their symptoms" if len(still) == 2
                    else "one of this case's two bugs still shows its symptom" if still
                    else "these are not the symptoms of this case's bugs: did your edit add a problem?")
        return [lead, *problems]
