"""The bug clinic for students: draw a validated case, run it, diagnose it from a closed list, fix it, check the fix.

    >>> from torchdoctor.clinic.practice import draw, Case
    >>> case = draw(chapter="gradients", kind="silent")   # a new case per call
    >>> case.code                                          # share it: Case.from_code(case.code) is the same case
    >>> print(case.script)                                 # the buggy training script
    >>> case.run()                                         # what it printed, and what the clinic measured
    >>> case.choices()                                     # the closed list of diagnoses
    >>> case.check_diagnosis(2)                            # an index into choices(), or the text of a choice
    >>> case.check_fix("my_fix.py")                        # a path or the source text of the edited script

Only cases that passed the clinic's gate (``python -m torchdoctor.clinic validate``: on three seeds the clean
script passes every oracle, the buggy one fires its own, the reverted one passes) are offered; they are listed in
``cases.json`` beside this module, written from the gate's matrix by ``python -m torchdoctor.clinic cases``. A case
is a template, a bug operator and a run seed (the seed of the script's weights and batch order), so the stream of
cases has no end. Its code, such as ``C-7Q2M-0K4D``, hides which bug it is: it encodes the template and operator
(by a 16-bit hash of their names) and the seed, shuffled so that two codes of one bug look unrelated, and a check
character that catches most typos. ``draw(kind="two")`` serves a pair of bugs in one script, each needing its own
fix (``pair_case.py``; its code starts with ``P-``).

Scripts run in a separate process (the clinic's runner, forked from a process that has imported torch once) with a
time limit; nothing a script prints is trusted: the runner measures the losses, the parameters that never changed,
memory, the error raised, and the score of the saved model on data of its own. A fix passes when every oracle is
quiet and the protected regions of the template (the data split, the number of epochs, the evaluation) are as in
the working script: lowering the bar does not pass.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import hashlib
import json
import math
import os
import random
import signal
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from torchdoctor.clinic.codes import MAX_SEED, decode, encode, key_hash
from torchdoctor.clinic.operators import OPERATORS, ClinicError, Operator, apply_operator, case_templates, get_operator
from torchdoctor.clinic.oracles import missing_lines, symptoms
from torchdoctor.clinic.pointers import chapter_pointer, course_manifest, error_pointer
from torchdoctor.clinic.regions import EVALUATION, bound_names, normalised, protected_regions
from torchdoctor.clinic.surface import base_template
from torchdoctor.clinic.templates import TEMPLATES, template_source

__all__ = ["CASES_PATH", "KINDS", "Case", "Feedback", "Run", "available", "cases_data", "draw", "write_cases"]

CASES_PATH = Path(__file__).with_name("cases.json")
KINDS = {"error": "one bug that raises an error", "silent": "one bug that raises nothing but shows a symptom",
         "two": "two bugs, each needing its own fix"}
DEFAULT_TIMEOUT = 120.0

# Where the course teaches each symptom: (chapter slug, how the section's heading starts).
SYMPTOM_SECTIONS = {
    "frozen": ("gradients", "1."),
    "nonfinite": ("convergence", "5."),
    "initial-loss": ("convergence", "2."),
    "memory": ("memory", "4."),
    "accuracy": ("accuracy", "5."),
}
SYMPTOM_TEXT = {
    "frozen": "some parameters never changed during training",
    "nonfinite": "a loss passed to backward() was NaN or infinite",
    "initial-loss": "the first loss is far from ln C, the loss of a model that has learnt nothing yet",
    "memory": "memory grew with every training step",
    "accuracy": "the grader's score on its own held-out data is below the working script's",
}


# --- cases.json: the gate's validated cases ---------------------------------------------------------------------


def _fingerprint(source: str) -> str:
    """The code of a script without its comments and layout (a marker comment added later changes nothing)."""
    return hashlib.sha256(_syntax(ast.parse(source)).encode()).hexdigest()[:16]


def _syntax(node: object) -> str:
    """``ast.dump`` without empty fields, the same on every Python: ast.dump's text is not (3.12 adds
    ``type_params=[]`` to every function and class, 3.13 leaves empty fields out), which made every case of
    cases.json, written on 3.11, "not offered" on 3.12 (issue 38)."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_syntax(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != []]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(_syntax(item) for item in node)}]"
    return repr(node)


def write_cases(matrix_path: Path | str = "build/clinic/matrix.json", out: Path | str = CASES_PATH,
                pairs_path: Path | str | None = None) -> dict:
    """Write ``cases.json`` from the gate's matrix (``validate --json``): its validated cases only, each with its
    kind and the fingerprints of the clean and buggy scripts it was validated on, and each template's clean scores
    and accuracy threshold; and the pairs validated in ``pairs_path`` (``validate --pairs --json``) whose two bugs
    are validated cases. Returns what it wrote."""
    matrix = json.loads(Path(matrix_path).read_text())
    cases = []
    for c in matrix["cases"]:
        if not c["validated"]:
            continue
        template, op = c["template"], get_operator(c["operator"])
        cases.append({"template": template, "operator": op.id, "chapter": op.chapter, "label": op.label,
                      "oracle": op.oracle, "kind": "error" if op.oracle == "error" else "silent",
                      "mutant": _fingerprint(apply_operator(op, template))})
    used = sorted({c["template"] for c in cases})
    data = {"seeds": matrix["seeds"],
            "templates": {t: {"scores": matrix["clean"][t]["scores"], "threshold": matrix["clean"][t]["threshold"],
                              "clean": _fingerprint(template_source(t)), "printed": matrix["clean"][t]["printed"],
                              "loads": matrix["clean"][t]["loads"]} for t in used},
            "cases": sorted(cases, key=lambda c: (c["chapter"], c["operator"], c["template"]))}
    if pairs_path is not None:
        from torchdoctor.clinic.pair_case import pair_entries

        data["pairs"] = pair_entries(json.loads(Path(pairs_path).read_text()), cases)
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    return data


_cases_override: list[dict] = []


@contextlib.contextmanager
def cases_data(data: dict):
    """Cases built inside read ``data`` (what the gate validated today) instead of cases.json."""
    _cases_override.append(data)
    try:
        yield
    finally:
        _cases_override.pop()


def _cases_file() -> dict:
    return _cases_override[-1] if _cases_override else _committed_cases()


@functools.cache
def _committed_cases() -> dict:
    if not CASES_PATH.exists():
        raise ClinicError(f"{CASES_PATH} is missing: run `python -m torchdoctor.clinic cases` after the gate")
    return json.loads(CASES_PATH.read_text())


def available(chapter: str | None = None, kind: str | None = None) -> list[dict]:
    """The validated cases (template or variant x operator), filtered by chapter slug and kind; a clear error for an
    unknown chapter or kind, or a filter that leaves nothing. Pairs of bugs only with ``kind="two"`` (a pair belongs
    to the chapters of both its bugs)."""
    entries = _cases_file()["cases"]
    pairs = _cases_file().get("pairs", [])
    if kind is not None and kind not in KINDS:
        raise ClinicError(f"unknown kind {kind!r}; valid: {', '.join(f'{k!r} ({v})' for k, v in KINDS.items())}.")
    slugs = sorted({e["chapter"] for e in entries}, key=_chapter_position)
    if chapter is not None and chapter not in slugs:
        raise ClinicError(f"no chapter {chapter!r} in the clinic; valid chapter slugs: {', '.join(slugs)}")
    if kind == "two":
        chosen = [e for e in pairs if chapter is None or chapter in e["chapters"]]
    else:
        chosen = [e for e in entries if chapter in (None, e["chapter"]) and kind in (None, e["kind"])]
    if not chosen:
        kinds = sorted({e["kind"] for e in entries if e["chapter"] == chapter}
                       | ({"two"} if any(chapter in e["chapters"] for e in pairs) else set()))
        raise ClinicError(f"chapter {chapter!r} has no case of kind {kind!r}; it has: {', '.join(kinds)}")
    return chosen


def _chapter_position(slug: str) -> int:
    try:
        return [c.slug for c in course_manifest().chapters].index(slug)
    except (ValueError, AttributeError):
        return 99


# --- case codes (codes.py) -------------------------------------------------------------------------------------


@functools.cache
def _keys_by_hash(prefix: str) -> dict[int, str]:
    """Every key a code of this prefix may name: each operator on each of its templates, or each validated pair."""
    if prefix == "C":
        keys = [f"{t}/{op.id}" for op in OPERATORS for t in case_templates(op)]
    else:
        keys = [f"{e['template']}/{'+'.join(e['operators'])}" for e in _cases_file().get("pairs", [])]
    found: dict[int, str] = {}
    for key in keys:
        h = key_hash(key)
        if h in found:  # tests/test_clinic_practice.py keeps this from happening
            raise ClinicError(f"case codes collide: {found[h]} and {key}")
        found[h] = key
    return found


def _decode(code: str) -> tuple[str, str, int]:
    """The prefix ('C' or 'P'), the key ('template/operator' or 'template/a+b') and the seed a code names."""
    prefix, hashed, seed = decode(code)
    key = _keys_by_hash(prefix).get(hashed)
    if key is None:
        raise ClinicError(f"{code!r} names no case of this version of the clinic")
    return prefix, key, seed


# --- runs -------------------------------------------------------------------------------------------------------

_zygote_lock = threading.Lock()
_zygote = None


def _run(template: str, source: str, workdir: Path, seed: int, timeout: float) -> dict:
    """validate.run_script's run, in a runner process kept across calls (importing torch once per session)."""
    global _zygote
    from torchdoctor.clinic.validate import Zygote

    with _zygote_lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = _start(Zygote)
            atexit.register(_zygote.close)
        try:
            return _zygote.run(template, source, workdir, seed, timeout)
        except BaseException:  # an interrupted wait would leave its answer in the pipe for the next run to read
            _stop_runs(_zygote.proc.pid)  # and the run itself would go on without its time limit
            _zygote.proc.kill()
            _zygote = None
            raise


def _stop_runs(parent: int) -> None:
    """Kill the process groups of the runs a runner has forked (each run leads a group of its own)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent:
                os.killpg(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


def _start(zygote_class):
    """A runner that ignores Ctrl-C and a kernel's shutdown signal (it ends when its stdin closes)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return zygote_class()
    try:
        return zygote_class()
    finally:
        signal.signal(signal.SIGINT, previous)


def _workdir(code: str, what: str) -> Path:
    root = Path(os.environ.get("TORCHDOCTOR_CLINIC_DIR") or Path(tempfile.gettempdir()) / "torchdoctor-clinic")
    return root / code / what


@dataclass
class Run:
    """One run of a script: what it printed, and what the clinic measured (``report``: the runner's report)."""

    code: str
    what: str  # "the buggy script" or "your script"
    output: str
    report: dict
    found: dict
    threshold: float
    clean_scores: list[float]

    @property
    def error(self) -> str | None:
        return self.report.get("error")

    def text(self, tail: int = 24) -> str:
        lines = [f"$ python script.py    # {self.what}, case {self.code}, seed {self.report.get('seed')}, "
                 f"{self.report.get('wall_s', '?')} s"]
        out = self.output.rstrip().splitlines()
        if len(out) > 20:
            out = out[:8] + [f"... ({len(out) - 16} lines) ..."] + out[-8:]
        lines += out
        if self.report.get("timeout"):
            lines.append(f"(stopped: still running after {self.report['timeout']} s)")
            return "\n".join(lines)
        if self.error:
            tb = self.error.rstrip().splitlines()
            script = next((i for i, line in enumerate(tb) if line.lstrip().startswith("File") and
                           line.rstrip().split(",")[0].endswith('script.py"')), None)
            if script is not None:  # the runner's own frames (runpy) say nothing about the script
                tb = ["Traceback (most recent call last):"] + tb[script:]
            lines += ([tb[0], "  ..."] if len(tb) > tail else []) + tb[-tail:]
        lines.append("")
        lines.append("What the clinic measured (the runner's own measurements, not the script's prints):")
        lines += [f"  {line}" for line in self.measurements()]
        return "\n".join(lines)

    def measurements(self) -> list[str]:
        r, found = self.report, self.found
        alarm = "   <-- symptom"
        out = []
        if r.get("error"):
            last = r["error"].strip().splitlines()[-1].strip()
            out.append(f"raised: {last[:150]}" + (f" (explain(): {found['error']})" if found.get("error") else ""))
        losses = r.get("losses") or []
        if losses:
            first = losses[0]
            classes = TEMPLATES[base_template(r["template"])][1]
            ref = f" (ln {classes} = {math.log(classes):.3f})" if classes else ""
            first_text = first if isinstance(first, str) else f"{first:.3f}"
            out.append(f"first loss: {first_text}{ref}" + (alarm if found.get("initial-loss") else ""))
            bad = next((i for i, x in enumerate(losses) if isinstance(x, str)), None)
            out.append(f"losses over {len(losses)} steps: " + ("all finite" if bad is None else
                                                             f"{losses[bad]} from step {bad}" + alarm))
        if r.get("parameters"):
            frozen = r.get("frozen") or []
            out.append(f"parameters that never changed: {', '.join(frozen) if frozen else 'none'} "
                       f"(of {r['parameters']})" + (alarm if found.get("frozen") and frozen else ""))
            if r.get("untrained"):
                out.append("parameters changed but never updated by an optimizer step with a gradient: "
                           f"{', '.join(r['untrained'])}" + alarm)
        memory = r.get("memory") or []
        if len(memory) >= 8 and not r.get("error"):
            growth = (memory[-1] - memory[len(memory) // 4]) / 2**20
            out.append(f"memory growth during training: {growth:.2f} MB" + (alarm if found.get("memory") else ""))
        if not r.get("error"):
            low, high = min(self.clean_scores), max(self.clean_scores)
            regression = TEMPLATES[base_template(r["template"])][1] is None
            measure = "R² on held-out data" if regression else "accuracy on held-out data"
            score = r.get("score")
            text = f"{score:.3f}" if score is not None else f"none ({r.get('score_note')})"
            out.append(f"grader's {measure}: {text} (working script: {low:.3f}-{high:.3f}, symptom below "
                       f"{self.threshold:.3f})" + (alarm if found.get("accuracy") else ""))
        return out

    def symptoms(self) -> list[str]:
        """The oracles that fire on this run ('error' included)."""
        return [k for k, v in self.found.items() if v]

    def __repr__(self) -> str:
        return self.text()


@dataclass
class Feedback:
    """A verdict: ``ok``, and what is still wrong (each problem with the section of the course that teaches it)."""

    ok: bool
    title: str
    problems: list[str] = field(default_factory=list)
    run: Run | None = None

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        lines = [("PASSED: " if self.ok else "NOT YET: ") + self.title]
        lines += [f"  - {p}" for p in self.problems]
        if self.run is not None:
            lines += ["", self.run.text()]
        return "\n".join(lines)


# --- cases ------------------------------------------------------------------------------------------------------


class Case:
    """One case: a template, a bug operator and a run seed. Build it with ``draw()`` or ``Case.from_code(code)``."""

    def __init__(self, template: str, operator: str, seed: int) -> None:
        if not (isinstance(seed, int) and 0 <= seed <= MAX_SEED):
            raise ClinicError(f"a case's seed is a whole number from 0 to {MAX_SEED}, not {seed!r}")
        data = _cases_file()
        entry = next((e for e in data["cases"] if e["template"] == template and e["operator"] == operator), None)
        if entry is None:
            raise ClinicError(f"operator {operator!r} on template {template!r} is not a validated case")
        self.template, self.seed = template, seed
        self._op: Operator = get_operator(operator)
        self._ops: tuple[Operator, ...] = (self._op,)
        self._entry = entry
        self.kind: str = entry["kind"]
        self.chapter: str = entry["chapter"]
        self.code = encode(f"{template}/{operator}", seed)
        self.script: str = apply_operator(self._op, template)
        clean = data["templates"][template]
        self._threshold, self._clean_scores = clean["threshold"], [s for s in clean["scores"] if s is not None]
        if _fingerprint(self.script) != entry["mutant"] or _fingerprint(template_source(template)) != clean["clean"]:
            raise ClinicError(f"case {self.code}: the script changed since the gate validated it; run "
                              "`make clinic-validate` and `python -m torchdoctor.clinic cases`")

    @classmethod
    def from_code(cls, code: str) -> Case:
        """The case a code names: the same script and seed as when it was drawn (a pair's code, 'P-...', names a
        pair case)."""
        prefix, key, seed = _decode(code)
        template, operators = key.split("/")
        try:
            if prefix == "P":
                from torchdoctor.clinic.pair_case import PairCase

                return PairCase(template, tuple(operators.split("+")), seed)
            return Case(template, operators, seed)
        except ClinicError:
            raise ClinicError(f"{code!r} names a case this version of the clinic does not offer") from None

    def __repr__(self) -> str:
        base = base_template(self.template)
        return (f"Case {self.code}: {TEMPLATES[base][0]} ({base}.py), seed {self.seed}, "
                f"{KINDS[self.kind]}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Case) and other.code == self.code

    def __hash__(self) -> int:
        return hash(self.code)

    # running
    def run(self, timeout: float = DEFAULT_TIMEOUT) -> Run:
        """Run the buggy script in a separate process (at most ``timeout`` s): what it printed, and what the clinic
        measured on the run."""
        return self._run(self.script, "the buggy script", timeout)

    def _run(self, source: str, what: str, timeout: float) -> Run:
        workdir = _workdir(self.code, "buggy" if what == "the buggy script" else "yours")
        report = _run(self.template, source, workdir, self.seed, timeout)
        output_file = workdir / "output.txt"
        output = output_file.read_text(errors="replace") if output_file.exists() else ""
        found = symptoms(report, self._threshold)
        return Run(self.code, what, output, report, found, self._threshold, self._clean_scores)

    # diagnosis
    def choices(self) -> list[str]:
        """The closed list of diagnoses, shuffled by the case code: the true one and three other bugs whose symptom
        is of the same kind (an error, or a silent symptom), each a case the gate validated on this template (those
        with the same symptom first), or on another where this one has too few."""
        rng = random.Random(self.code)
        options = [self._op.description] + [op.description for op in
                                            _same_symptom(self._op, self.template, 3, rng, set())]
        rng.shuffle(options)
        return options

    def _distractor_operators(self) -> list[Operator]:
        texts = set(self.choices()) - {op.description for op in self._ops}
        return [op for op in OPERATORS if op.description in texts]

    def check_diagnosis(self, answer: int | str) -> Feedback:
        """Whether ``answer`` (an index into ``choices()``, or a choice's text) is the bug in this script."""
        text = _option_text(self.choices(), answer)
        if text == self._op.description:
            return Feedback(True, f"the diagnosis is right: {text}. Now fix the script and check it with "
                                  "case.check_fix(...).")
        symptom = ("the error it raises" if self.kind == "error"
                   else f"the symptom the clinic measured ({SYMPTOM_TEXT[self._op.oracle]})")
        hint = (f"read the traceback's last lines: {error_pointer(self._op.label)}" if self.kind == "error" else
                f"how the course finds this symptom: {chapter_pointer(*SYMPTOM_SECTIONS[self._op.oracle])}")
        return Feedback(False, f"“{text}” is not what is wrong in this script.",
                        [f"Look for it in case.script: is it there? Then read {symptom} again.", hint])

    # fixing
    def reference_fix(self) -> str:
        """The working script this case was made from (the buggy edits undone, as the gate checked: the template, or
        its surface variant): for teachers, and spoils the case."""
        return template_source(self.template)

    def _buggy_versions(self) -> list[str]:
        """The scripts whose protected regions an edit may keep: the buggy one (a pair adds each half-fixed one)."""
        return [self.script]

    def edited_evaluation(self, source: str) -> bool:
        """Whether ``source``'s protected evaluation reads neither as the working script's nor as a buggy one's: such
        an edit is judged by running it (its predictions must be the working evaluation's), not refused by its text
        (issue 36: ``argmax(1)`` for ``argmax(dim=1)`` is a right fix)."""
        clean = {r.name: r.text for r in protected_regions(template_source(self.template))}
        got = {r.name: r.text for r in protected_regions(source)}
        if EVALUATION not in clean or EVALUATION not in got:
            return False
        known = [clean[EVALUATION]] + [b[EVALUATION] for b in
                                       ({r.name: r.text for r in protected_regions(s)} for s in self._buggy_versions())]
        return all(normalised(got[EVALUATION]) != normalised(text) for text in known)

    def protected_changes(self, source: str) -> list[str]:
        """Why ``source`` is refused before it runs: a protected region of the template (data split, epochs) that
        differs from the working script's, a marker removed, or a protected name redefined elsewhere. The bug's own
        region may stay buggy (the oracles then say so) or be restored exactly. The evaluation may also be written
        otherwise: the run then checks that it predicts as the working script's does (``evaluation_changes``)."""
        clean = template_source(self.template)
        ours, theirs = protected_regions(clean), {r.name: r for r in protected_regions(source)}
        buggy = [{r.name: r.text for r in protected_regions(s)} for s in self._buggy_versions()]
        problems = []
        for region in ours:
            got = theirs.get(region.name)
            if got is None:
                problems.append(f"the markers of the protected region “{region.name}” were removed or changed; "
                                "put them back as in case.script")
                continue
            if normalised(got.text) == normalised(region.text) or region.name == EVALUATION:
                continue
            if any(normalised(got.text) == normalised(b[region.name]) for b in buggy):
                continue  # the bug is in this region and is still there: the oracles will say so
            problems.append(f"the protected region “{region.name}” ({region.why or 'part of the test'}) was "
                            "changed: it must read as in the working script" +
                            (", with only the bug undone" if buggy[0][region.name] != region.text else "") +
                            ". Fix the bug elsewhere; lowering the bar does not count as a fix.")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return problems
        inside = {n for r in protected_regions(source) for n in range(r.start, r.end + 1)}
        names = set().union(*(bound_names(r.text) for r in ours)) if ours else set()
        redefined = set()
        for node in ast.walk(tree):
            line = getattr(node, "lineno", None)
            if line is None or line in inside:
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del) and node.id in names:
                redefined.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
                redefined.add(node.name)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                redefined.update(set(node.names) & names)
        if redefined:
            problems.append(f"{', '.join(sorted(redefined))} belong to a protected region and are redefined "
                            "outside it: leave them as the working script defines them")
        return problems

    def check_fix(self, source_or_path: str | os.PathLike, timeout: float = DEFAULT_TIMEOUT) -> Feedback:
        """Run the edited script (a path, or its source text) in a separate process, at most ``timeout`` s, and
        check it: protected regions unchanged, no error caught by a new ``try``, no error, and every oracle quiet
        (parameters all trained, finite losses, an initial loss near ln C, no memory growth, the grader's score within
        the working script's); the steps made as the working script makes them (one backward per step on cleared
        gradients, given to the optimizer as backward() left them, at a learning rate the case accepts), its
        checkpoint restored and its lines printed as the working script does; an edited evaluation predicting as the
        working one."""
        source = _read_source(source_or_path)
        refused = self.refusals(source)
        if refused is not None:
            return refused
        return self.verdict(source, self._run(source, "your script", timeout))

    def refusals(self, source: str) -> Feedback | None:
        """The verdict on ``source`` before it runs: not Python, a protected region changed, or a new ``try``
        (catching the error hides it); None when it is to be run."""
        try:
            compile(source, "your script", "exec")
        except SyntaxError as e:
            return Feedback(False, "your script is not valid Python",
                            [f"line {e.lineno}: {e.msg}", error_pointer(None)])
        refused = self.protected_changes(source) + _added_try(template_source(self.template), source)
        if refused:
            return Feedback(False, "this edit is refused before it runs", refused)
        return None

    def verdict(self, source: str, run: Run) -> Feedback:
        """The verdict on a run of ``source`` (which ``refusals`` let through)."""
        problems = self._problems(run)
        problems[:0] = self._mechanism_problems(run.report)
        changed = run.report.get("evaluation_changes")
        if self.edited_evaluation(source) and not run.error and (changed or (changed is None and not problems)):
            problems.insert(0, "your edit of the protected evaluation changes what predict() returns" + (
                f" for {changed} of the grader's examples" if changed else "") + ": it must predict as the working "
                "script's evaluation does (the grader's measure); fix the bug elsewhere, lowering the bar does not "
                "count as a fix")
        if not problems:
            return Feedback(True, "your script runs cleanly and every check passes: the bug is fixed.", [], run)
        return Feedback(False, "your script still shows a symptom", problems, run)

    def _mechanism_problems(self, report: dict) -> list[str]:
        """How the run's steps, restore and prints differ from the working script's, and a hyper-parameter of the
        case's bug still outside the values it accepts (issue 36: these fixes hide the symptom, not the bug)."""
        problems = [p for op in self._ops for p in _hyper_parameter_problems(op, report)]
        return problems + _mechanism_problems(report, self._entry_template())

    def _entry_template(self) -> dict:
        return _cases_file()["templates"][self.template]

    def _problems(self, run: Run) -> list[str]:
        """What is still wrong in a run of the student's script, each with where the course teaches it."""
        problems = _symptom_problems(run)
        if problems and self._op.oracle in _silent_symptoms(run):
            problems.append(f"the bug this case is about is taught in {chapter_pointer(self.chapter)}")
        return problems


def _added_try(clean: str, source: str) -> list[str]:
    """A ``try`` statement the working script does not have: catching the error hides the bug, it does not fix it."""
    def count(text: str) -> int:
        return sum(isinstance(n, ast.Try | ast.TryStar) for n in ast.walk(ast.parse(text)))

    if count(source) <= count(clean):
        return []
    return ["your edit adds a try statement: catching the error hides it, it does not fix it (the working script "
            "has no try; read the traceback of case.run() again)"]


def _hyper_parameter_problems(op: Operator, report: dict) -> list[str]:
    """A learning rate still outside the range a learning-rate bug accepts: clipping or rescaling the gradients, or
    catching the NaN, leaves the bug in place (issue 36 item 5)."""
    if op.accepts_lr is None or report.get("error") or report.get("timeout") or not report.get("lr"):
        return []
    low, high = op.accepts_lr
    used_low, used_high = report["lr"]
    if low <= used_low and used_high <= high:
        return []
    used = f"{used_high:g}" if used_low == used_high else f"{used_low:g} to {used_high:g}"
    return [f"the optimizer still steps with a learning rate of {used}: the bug is the learning rate itself, and "
            f"hiding what it does (clipping the gradients, skipping bad steps) leaves it in the script; see "
            f"{chapter_pointer(*SYMPTOM_SECTIONS['nonfinite'])}"]


def _mechanism_problems(report: dict, template: dict | None = None) -> list[str]:
    """How a run's training steps differ from every working script's: one backward() per optimizer step, on gradients
    cleared since the last step (issue 36: a second backward with retain_graph, or zero_grad() once an epoch, still
    converges on these small problems, so the outcome alone passes them). Nothing to say for a run that failed or
    made its steps in other processes (the runner counts those of its own process)."""
    steps, calls, uncleared = (report.get(k, 0) for k in ("steps", "backward_calls", "uncleared"))
    if report.get("error") or report.get("timeout") or not steps:
        return []
    problems = []
    if calls != steps:
        problems.append(f"backward() ran {calls} times for {steps} optimizer steps: the working script runs it once "
                        "per step")
    if uncleared:
        problems.append(f"{uncleared} of {calls} backward() calls found the gradients of the step before still there: "
                        "the working script clears them before every one")
    if report.get("grads_changed"):
        problems.append(f"{report['grads_changed']} of {steps} optimizer steps were given gradients other than "
                        "backward() computed (clipped or rescaled in between): the working script steps with them as "
                        "they are, and changing them hides the bug rather than fixing it")
    if template is None:
        return problems
    loads = report.get("loads") or []
    partial = [missing for missing, _ in loads if missing]
    if len(loads) < template.get("loads", 0) or partial:
        problems.append("the script no longer restores its checkpoint as the working script does" + (
            f" ({partial[0]} of the model's parameters were not loaded: strict=False hides the mismatch)"
            if partial else " (a load_state_dict() call was removed)"))
    missing = missing_lines(template.get("printed", []), report.get("printed", []))
    if missing:
        problems.append("the script no longer prints what the working script prints, such as “" + missing[-1] +
                        "” (decimals written #): deleting or emptying the lines that show the symptom hides it, "
                        "it does not fix it")
    return problems


def _option_text(options: list[str], answer: int | str) -> str:
    """The choice an answer names: an index into ``options`` or a choice's text (case and spaces ignored)."""
    if isinstance(answer, bool) or not isinstance(answer, int | str):
        raise ClinicError(f"answer with an index 0-{len(options) - 1} into case.choices() or a choice's text, "
                          f"not {answer!r}")
    if isinstance(answer, int):
        if not 0 <= answer < len(options):
            raise ClinicError(f"choice {answer} does not exist: the indices are 0 to {len(options) - 1}")
        return options[answer]
    matches = [o for o in options if o.strip().casefold() == answer.strip().casefold()]
    if not matches:
        raise ClinicError(f"{answer!r} is not one of case.choices(); answer with its index or its text")
    return matches[0]


def _same_symptom(truth: Operator, template: str, count: int, rng: random.Random, taken: set[str]) -> list[Operator]:
    """`count` bugs whose symptom is of the truth's kind (an error, or a silent symptom), none described as in
    `taken`: validated cases of the same template first (issue 36: a choice that describes another template's code is
    ruled out by reading the script, not the symptom; a bug the gate rejected shows no symptom), those with the
    truth's oracle (and error) first; where the template has too few, validated cases of that kind elsewhere."""
    kind = "error" if truth.oracle == "error" else "silent"
    entries = [e for e in _cases_file()["cases"] if e["kind"] == kind and e["operator"] != truth.id]
    here = {e["operator"] for e in entries if base_template(e["template"]) == base_template(template)}
    elsewhere = {e["operator"] for e in entries} - here
    picked: list[Operator] = []
    for ids in (here, elsewhere):
        ops = [get_operator(i) for i in sorted(ids)]
        rng.shuffle(ops)
        ops.sort(key=lambda op: (op.oracle != truth.oracle, op.label != truth.label))
        for op in ops:
            described = {o.description for o in picked} | taken | {truth.description}
            if len(picked) < count and op.description not in described:
                picked.append(op)
    return picked


def _silent_symptoms(run: Run) -> set[str]:
    """The silent oracles that fire on a run that ended normally (none when it raised or timed out)."""
    r = run.report
    return set() if r.get("error") or r.get("timeout") else {k for k, v in run.found.items() if v}


def _symptom_problems(run: Run) -> list[str]:
    """A run's timeout, error or firing oracles, each with the section of the course that teaches it."""
    r, found = run.report, run.found
    if r.get("timeout"):
        return [f"it was still running after {r['timeout']} s (an endless loop, or far more work than the original)"]
    problems = []
    if r.get("error"):
        last = r["error"].strip().splitlines()[-1]
        problems.append(f"it raises {last[:200]}: see {error_pointer(found.get('error'))}")
        return problems
    for oracle in ("nonfinite", "initial-loss", "frozen", "memory", "accuracy"):
        if found.get(oracle):
            detail = SYMPTOM_TEXT[oracle]
            if oracle == "frozen" and r["frozen"]:
                detail += f" ({', '.join(r['frozen'])})"
            elif oracle == "frozen":
                detail = ("some parameters changed without being trained: no optimizer step updated them with a "
                          f"gradient ({', '.join(r['untrained'])})")
            if oracle == "accuracy":
                score = r.get("score")
                detail += (f" ({score:.3f}, below {run.threshold:.3f})" if score is not None
                           else f" ({r.get('score_note')})")
            problems.append(f"{detail}: see {chapter_pointer(*SYMPTOM_SECTIONS[oracle])}")
    return problems


def _read_source(source_or_path: str | os.PathLike) -> str:
    if isinstance(source_or_path, os.PathLike) or (isinstance(source_or_path, str) and "\n" not in source_or_path
                                                   and source_or_path.strip().endswith(".py")):
        path = Path(source_or_path)
        if not path.exists():
            raise ClinicError(f"no file {str(path)!r}: write your script there first, or pass its source text")
        return path.read_text()
    if isinstance(source_or_path, str):
        return source_or_path
    raise ClinicError(f"check_fix takes a path or the script's source text, not {type(source_or_path).__name__}")


# --- drawing ----------------------------------------------------------------------------------------------------

_stream = random.Random()
_last: list[str] = []


def draw(chapter: str | None = None, kind: str | None = None, seed: int | None = None) -> Case:
    """A validated case, optionally of one chapter (its slug, as in course.toml) and one kind ('error', 'silent', or
    'two' for a pair of bugs; one bug of either kind by default). Without ``seed``, a new case per call (a random
    bug and run seed, never the previous case again); with ``seed``, the same case every time for the same
    arguments."""
    entries = available(chapter, kind)
    if seed is not None:
        if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED):
            raise ClinicError(f"seed must be a whole number from 0 to {MAX_SEED}, not {seed!r}")
        rng = random.Random(f"draw/{chapter}/{kind}/{seed}")
        return _case(rng.choice(entries), seed)
    while True:
        case = _case(_stream.choice(entries), _stream.randrange(MAX_SEED + 1))
        if case.code not in _last:
            _last[:] = [case.code]
            return case


def _case(entry: dict, seed: int) -> Case:
    """The case of a cases.json entry (a single case or a pair) and a run seed."""
    if "operators" in entry:
        from torchdoctor.clinic.pair_case import PairCase

        return PairCase(entry["template"], tuple(entry["operators"]), seed)
    return Case(entry["template"], entry["operator"], seed)
