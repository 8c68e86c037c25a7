"""Known-wrong fixes of each bug operator, and known-right ones, checked by the gate (issue 36 item 1).

A wrong fix hides the symptom instead of fixing the bug: a second backward() with retain_graph, zero_grad() once an
epoch, the line that shows the symptom deleted, a try around the failing code, more epochs, clipping instead of a
lower learning rate, parameters nudged by hand. Each is written as edits of the buggy script of a base template (as
``Edit``s: anchor found exactly once); the gate judges it with ``Case.check_fix``'s own verdict on every seed and
fails when one passes, or when its feedback does not name what it hides (``says``). The right fixes (``RIGHT``: the
evaluation written otherwise, a lazy layer, learning rates at each end of the range a learning-rate bug accepts) must
pass on every seed. Every operator gets the generic ones: a try around ``main()``, and for a silent bug more epochs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from torchdoctor.clinic.operators import LEARNING_RATES, OPERATORS, ClinicError, Edit, apply_operator, get_operator
from torchdoctor.clinic.oracles import symptoms

__all__ = ["RIGHT", "WRONG", "Fix", "CorpusResult", "apply_fix", "check_corpus", "corpus_for"]


@dataclass(frozen=True)
class Fix:
    operator: str
    template: str  # a base template
    name: str
    edits: tuple[Edit, ...]
    says: str = ""  # what the feedback of a wrong fix must contain (the problem it hides)
    right: bool = False


def _fix(operator, template, name, says, *edits, right=False):
    return Fix(operator, template, name, tuple(Edit(*e) for e in edits), says, right)


_STEP = "            optimizer.step()\n"
_NUDGE = (_STEP, _STEP + "            for p in model.parameters():\n                p.data += 1e-4\n")
_MAIN = ('if __name__ == "__main__":\n    main()\n',
         'if __name__ == "__main__":\n    try:\n        main()\n    except Exception:\n        pass\n')
_SPAWN = ('if __name__ == "__main__":\n    mp.spawn(worker, args=(free_port(),), nprocs=WORLD_SIZE)\n',
          'if __name__ == "__main__":\n    try:\n        mp.spawn(worker, args=(free_port(),), nprocs=WORLD_SIZE)\n'
          '    except Exception:\n        pass\n')
_TRY = "adds a try statement"
_UNTRAINED = "without being trained"
_PRINTS = "no longer prints what the working script prints"
_LR = "learning rate of"
_LR_LINE = "torch.optim.SGD(model.parameters(), lr=5.0)"

WRONG: tuple[Fix, ...] = (
    _fix("backward-twice", "digits_mlp", "retain-graph-second-backward", "backward() ran",
         ("            loss.backward()\n            loss.backward()\n",
          "            loss.backward(retain_graph=True)\n            loss.backward()\n")),
    _fix("backward-twice", "digits_mlp", "try-around-second-backward", _TRY,
         ("            loss.backward()\n            loss.backward()\n",
          "            loss.backward()\n            try:\n                loss.backward()\n"
          "            except RuntimeError:\n                pass\n")),
    _fix("backward-twice", "digits_mlp", "both-backwards-deleted", "backward() ran 0 times",
         ("            loss.backward()\n            loss.backward()\n", "")),
    _fix("no-zero-grad", "digits_mlp", "zero-grad-once-an-epoch", "found the gradients of the step before",
         ("    for epoch in range(EPOCHS):\n        for x, y in loader:\n",
          "    for epoch in range(EPOCHS):\n        optimizer.zero_grad()\n        for x, y in loader:\n")),
    _fix("no-zero-grad", "linear_regression", "zero-grad-once-an-epoch", "found the gradients of the step before",
         ("        running = 0.0\n", "        running = 0.0\n        optimizer.zero_grad()\n")),
    _fix("outputs-kept-with-graph", "digits_mlp", "append-deleted", _PRINTS,
         ("            predictions.append(out)\n", "")),
    _fix("loss-sum-keeps-graph", "digits_mlp", "running-sum-deleted", _PRINTS,
         ("            running += loss\n", "")),
    _fix("load-whole-checkpoint", "digits_mlp", "strict-false", "strict=False",
         ("restored.load_state_dict(torch.load(path, weights_only=True))",
          "restored.load_state_dict(torch.load(path, weights_only=True), strict=False)")),
    _fix("load-whole-checkpoint", "digits_mlp", "restore-deleted", "no longer restores its checkpoint",
         ("    restored.load_state_dict(torch.load(path, weights_only=True))\n", "")),
    _fix("restore-other-vocab", "text_classifier", "restore-deleted", "no longer restores its checkpoint",
         ('    restored.load_state_dict(torch.load(path, weights_only=True)["model"])\n', "")),
    _fix("pickled-model", "digits_mlp", "load-without-weights-only", "evaluation failed",
         ('restored.load_state_dict(torch.load(path, weights_only=True)["model"])',
          'restored.load_state_dict(torch.load(path, weights_only=False)["model"].state_dict())')),
    _fix("labels-one-based", "digits_mlp", "eleven-outputs", "the grader's score",
         ("        self.out = nn.Linear(64, 10)\n", "        self.out = nn.Linear(64, 11)\n")),
    _fix("float64-inputs", "digits_mlp", "model-in-float64", "evaluation failed",
         ("    model = build_model()\n", "    model = build_model().double()\n")),
    _fix("detach-hidden", "digits_mlp", "frozen-layers-nudged", _UNTRAINED, _NUDGE),
    _fix("optimizer-head-only", "digits_mlp", "frozen-layers-nudged", _UNTRAINED, _NUDGE),
    _fix("frozen-convolution", "digits_cnn", "frozen-layer-nudged", _UNTRAINED, _NUDGE),
    _fix("forward-under-no-grad", "linear_regression", "loss-requires-grad", "never changed",
         ("                loss = loss_fn(model(x), y)\n",
          "                loss = loss_fn(model(x), y)\n            loss.requires_grad_(True)\n")),
    _fix("learning-rate-too-high", "linear_regression", "clipped-gradients", _LR,
         ("            loss.backward()\n",
          "            loss.backward()\n            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")),
    _fix("learning-rate-too-high", "linear_regression", "bad-steps-skipped", _LR,
         (_STEP, "            if loss.item() < 100:\n                optimizer.step()\n")),
    _fix("learning-rate-too-high", "linear_regression", "rate-still-too-high", _LR,
         (_LR_LINE, "torch.optim.SGD(model.parameters(), lr=2.0)")),
    _fix("target-column", "linear_regression", "warning-silenced", "the grader's score",
         ("import numpy as np\n", "import warnings\n\nimport numpy as np\n"),
         ("    loader = DataLoader(", '    warnings.filterwarnings("ignore")\n    loader = DataLoader(')),
)

RIGHT: tuple[Fix, ...] = (
    *(_fix("learning-rate-too-high", "linear_regression", f"rate-{lr:g}", "",
           (_LR_LINE, f"torch.optim.SGD(model.parameters(), lr={lr!r})"), right=True) for lr in LEARNING_RATES),
    _fix("argmax-over-batch", "digits_cnn", "argmax-1", "", ("argmax(dim=0)", "argmax(1)"), right=True),
    _fix("argmax-over-batch", "digits_cnn", "argmax-last-dim", "", ("argmax(dim=0)", "argmax(dim=-1)"), right=True),
    _fix("flatten-size", "digits_cnn", "lazy-linear", "",
         ("nn.Linear(16 * 4 * 4, 10)", "nn.LazyLinear(10)"), right=True),
    _fix("target-column", "linear_regression", "predictions-squeezed", "",
         ("loss = loss_fn(model(x), y)", "loss = loss_fn(model(x).squeeze(1), y)"), right=True),
    _fix("outputs-kept-with-graph", "digits_mlp", "outputs-detached", "",
         ("predictions.append(out)", "predictions.append(out.detach())"), right=True),
)


def _generic(operator: str, template: str) -> list[Fix]:
    """The wrong fixes every operator gets: a try around the whole run, and for a silent bug more epochs."""
    op = get_operator(operator)
    fixes = [_fix(operator, template, "try-around-main", _TRY, _SPAWN if template == "ddp_digits" else _MAIN)]
    if op.oracle != "error":
        fixes.append(_fix(operator, template, "three-times-the-epochs", "the number of epochs",
                          ("EPOCHS = ", "EPOCHS = 3 * ")))
    return fixes


def corpus_for(operator: str, template: str) -> list[Fix]:
    """Every fix, wrong and right, of one case on a base template."""
    return [f for f in (*WRONG, *RIGHT) if f.operator == operator and f.template == template] + _generic(
        operator, template)


def apply_fix(fix: Fix) -> str:
    """The buggy script with the fix's edits applied; fails loudly unless each anchor is there exactly once."""
    source = apply_operator(fix.operator, fix.template)
    for edit in fix.edits:
        if source.count(edit.anchor) != 1:
            raise ClinicError(f"fix {fix.name!r} of {fix.operator!r} on {fix.template!r}: anchor {edit.anchor!r} "
                              f"found {source.count(edit.anchor)} times, not once")
        source = source.replace(edit.anchor, edit.replacement)
    return source


@dataclass
class CorpusResult:
    fix: Fix
    passed: list[bool]  # per seed; empty when refused before running
    problems: list[str]  # the feedback's lines (of the first seed that failed, or the refusal)
    ok: bool = False  # judged as deserved: a wrong fix failed everywhere and named what it hides, a right one passed

    def deserved(self) -> bool:
        """A right fix passed on every seed; a wrong one failed on every seed (or was refused) and its feedback
        says what it hides."""
        if self.fix.right:
            return bool(self.passed) and all(self.passed)
        return not any(self.passed) and self.fix.says in " ".join(self.problems)

    def line(self) -> str:
        kind = "right" if self.fix.right else "wrong"
        runs = "refused before running" if not self.passed else (
            f"passed on {sum(self.passed)} of {len(self.passed)} seeds")
        verdict = "as deserved" if self.ok else "NOT AS DESERVED"
        said = "" if not self.problems else f": {' | '.join(self.problems)[:300 if not self.ok else 140]}"
        return f"{self.fix.operator:<24} {self.fix.template:<18} {kind:<5} {self.fix.name:<30} {runs}, {verdict}{said}"


def check_corpus(cases: dict, seeds: list[int], jobs: int, workdir: Path, progress=None) -> list[CorpusResult]:
    """Judge every fix of every validated case on a base template (``cases``: what ``write_cases`` wrote today) with
    the verdict ``Case.check_fix`` gives, each run on every seed."""
    from torchdoctor.clinic.practice import Case, Run, cases_data
    from torchdoctor.clinic.validate import run_all

    validated = {(c["template"], c["operator"]) for c in cases["cases"] if "~" not in c["template"]}
    fixes = [f for op in OPERATORS for t in op.templates if (t, op.id) in validated for f in corpus_for(op.id, t)]
    results, work, runnable = [], [], []
    with cases_data(cases):
        for fix in fixes:
            case = Case(fix.template, fix.operator, 0)
            source = apply_fix(fix)
            refused = case.refusals(source)
            if refused is not None:
                results.append(CorpusResult(fix, [], list(refused.problems)))
                continue
            key = f"{fix.operator}--{re.sub(r'[^a-z0-9-]', '', fix.name)}"
            runnable.append((fix, key, source))
            work += [(key, fix.template, source, s) for s in seeds]
        reports = run_all(work, jobs, 180, workdir, None, progress)
        for fix, key, source in runnable:
            passed, problems = [], []
            for s in seeds:
                case = Case(fix.template, fix.operator, s)
                report = reports[(key, fix.template, s)]
                run = Run(case.code, "your script", "", report, symptoms(report, case._threshold), case._threshold,
                          case._clean_scores)
                verdict = case.verdict(source, run)
                passed.append(verdict.ok)
                if not verdict.ok and not problems:
                    problems = list(verdict.problems)
            results.append(CorpusResult(fix, passed, problems))
    for r in results:
        r.ok = r.deserved()
    return results
