"""Run one clinic script in this process and report what the grader measures, as JSON.

``python -m torchdoctor.clinic.runner TEMPLATE SCRIPT OUT_DIR SEED`` runs SCRIPT (a template or a mutant of it) as
``__main__`` with ``CLINIC_SEED`` and ``CLINIC_OUT`` set, and writes ``OUT_DIR/report.json``. Nothing the script
prints is trusted: the losses are taken from every ``backward()`` call, the memory in use after each of them,
which parameters of the first model trained never changed, how the steps were made (optimizer steps, backward
calls, the backward calls that found the model's gradients not cleared, the steps given gradients other than
backward() left them, the learning rates used, the parameters changed but never updated by a step with a gradient,
and what each ``load_state_dict`` of the script missed), the error raised (with the catalog
id ``explain()`` gives it), and the score the runner computes itself by loading the script's checkpoint into its
``build_model()`` and calling its ``predict()`` on held-out data the runner draws itself (a split the script never
reads), with how many of those predictions differ from the working script's evaluation on the same model.
``python -m torchdoctor.clinic.runner --serve`` is the zygote validation uses: one forked child per run.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import runpy
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np


def held_out(template: str) -> tuple[np.ndarray, np.ndarray]:
    """The grader's own data for a template (or a surface variant of it): never the script's training data."""
    template = template.split("~", 1)[0]
    if template in ("digits_mlp", "digits_cnn", "ddp_digits"):
        from sklearn.datasets import load_digits

        digits = load_digits()
        order = np.random.RandomState(0).permutation(len(digits.target))
        return digits.data[order[1200:]], digits.target[order[1200:]]
    if template == "linear_regression":
        rng = np.random.RandomState(12345)
        X = rng.randn(400, 3)
        return X, X @ np.array([2.0, -3.0, 0.5]) + 1.0 + 0.1 * rng.randn(400)
    if template == "text_classifier":
        rng = np.random.RandomState(12345)
        n, length, vocab = 600, 12, 50
        labels = rng.randint(4, size=n)
        tokens = rng.randint(20, vocab, size=(n, length))
        for i, c in enumerate(labels):
            where = rng.choice(length, size=3, replace=False)
            tokens[i, where] = 5 * c + rng.randint(5, size=3)
        return tokens, labels
    raise ValueError(f"no held-out data for template {template!r}")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2():
    """glibc's ``mallinfo2`` (2.33 and later), or None where the C library has none."""
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    function.restype = _MallInfo2
    return function


_MALLINFO2 = _mallinfo2()


def _memory_in_use() -> int:
    """The bytes the C allocator has handed out and not taken back (glibc's count, which needs no /proc, so it works
    in the grading jail too). Not resident memory: how much of a freed heap the system keeps depends on what the
    zygote did before the fork, and made a clean template's resident memory grow by 0.3-0.9 MB during training
    against 0.1 MB in use (digits MLP; the leaks grow by 1.4-1.5 MB). Elsewhere, resident memory (/proc), or its
    peak (``ru_maxrss``), which still grows with a leak."""
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        return info.uordblks + info.hblkhd
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except FileNotFoundError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _gradient_sum(module) -> float:
    """A fingerprint of a model's gradients: the sum of their absolute values (a clipped or rescaled gradient
    changes it; the same gradients give the same float)."""
    return float(sum(float(p.grad.abs().sum()) for p in module.parameters() if p.grad is not None))


def _as_array(pred) -> np.ndarray:
    import torch

    return np.asarray(pred.detach().cpu() if isinstance(pred, torch.Tensor) else pred, dtype=np.float64)


def _working_predict(template: str, ns: dict):
    """The working script's ``predict`` (its protected evaluation region, run over the script's own names), or None
    where the template protects no evaluation: what an edit of that region must agree with."""
    from torchdoctor.clinic.regions import EVALUATION, protected_regions
    from torchdoctor.clinic.templates import template_source

    region = next((r for r in protected_regions(template_source(template)) if r.name == EVALUATION), None)
    if region is None:
        return None
    scope = dict(ns)
    exec(compile(region.text, "the working script's evaluation", "exec"), scope)  # noqa: S102 (the course's own code)
    return scope.get("predict")


def evaluation_changes(template: str, ns: dict, model, X: np.ndarray, pred: np.ndarray) -> int | None:
    """How many held-out predictions of the script's ``predict`` differ from those of the working script's evaluation
    on the same trained model (issue 36: an edit of the protected evaluation is judged by what it does, not by its
    text); None where there is nothing to compare."""
    try:
        working = _working_predict(template, ns)
        if working is None:
            return None
        expected = _as_array(working(model, X))
    except Exception:  # the working evaluation cannot run on what the script defines: nothing predicts alike
        return int(pred.size)
    if expected.shape != pred.shape:
        return int(max(expected.size, pred.size))
    return int((~np.isclose(expected, pred, rtol=1e-5, atol=1e-6)).sum())


def _score(template: str, ns: dict, out_dir: Path, report: dict) -> tuple[float | None, str | None]:
    import torch

    path = out_dir / "checkpoint.pt"
    if not path.exists():
        return None, "the script saved no checkpoint.pt"
    model = ns["build_model"]()
    model.load_state_dict(torch.load(path, weights_only=True)["model"])
    X, y = held_out(template)
    pred = _as_array(ns["predict"](model, X))
    report["evaluation_changes"] = evaluation_changes(template, ns, model, X, pred)
    if pred.shape != y.shape:
        return 0.0, f"predict() returned shape {pred.shape} for {y.shape[0]} examples"
    if template.split("~", 1)[0] == "linear_regression":
        return float(1.0 - ((pred - y) ** 2).mean() / y.var()), None  # R^2
    return float((pred == y).mean()), None


def run(template: str, script: str, out_dir: Path, seed: int) -> dict:
    import torch

    from torchdoctor.explain import explain

    torch.set_num_threads(1)
    os.environ["CLINIC_SEED"], os.environ["CLINIC_OUT"] = str(seed), str(out_dir)
    report: dict = {"template": template, "seed": seed, "losses": [], "memory": [], "error": None, "error_id": None,
                    "root_error_id": None,
                    "frozen": [], "parameters": 0, "score": None, "score_note": None, "warning_ids": [],
              "evaluation_changes": None, "steps": 0, "backward_calls": 0, "uncleared": 0, "untrained": [],
              "grads_changed": 0, "lr": None, "loads": []}

    original_backward = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        if self.numel() == 1:
            report["losses"].append(float(self.detach().float()))
        if tracked["module"] is not None:  # how the step is made, beside what it gives (issue 36)
            report["backward_calls"] += 1
            if any(p.grad is not None and bool(p.grad.any()) for p in tracked["module"].parameters()):
                report["uncleared"] += 1
        result = original_backward(self, *args, **kwargs)
        report["memory"].append(_memory_in_use())
        if tracked["module"] is not None:
            tracked["grads"] = _gradient_sum(tracked["module"])
        return result

    # The first module trained at the top level is the model; each of its parameters is copied the first time it
    # is seen initialised, before its outermost forward and again after it: a lazy module's parameters come into
    # being in the first forward, a layer built in forward() in every one, and both must be judged (issue 36).
    tracked: dict = {"module": None, "first": {}, "grads": None, "with_gradient": set(), "stepped": set()}
    depth = [0]

    def snapshot(module):
        for p in module.parameters():
            if id(p) not in tracked["first"] and not isinstance(p, torch.nn.parameter.UninitializedParameter):
                tracked["first"][id(p)] = (p, p.detach().clone())

    def pre_hook(module, args):
        if (depth[0] == 0 and tracked["module"] is None and module.training
                and any(True for _ in module.parameters())):
            tracked["module"] = module
        if depth[0] == 0 and module is tracked["module"]:
            snapshot(module)
        depth[0] += 1

    def post_hook(module, args, output):
        depth[0] -= 1
        if depth[0] == 0 and module is tracked["module"]:
            snapshot(module)

    from torch.nn.modules import module as module_mod
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    def step_pre_hook(optimizer, args, kwargs):
        # What the step is given: the gradients as backward() left them (clipping or scaling them in between is
        # not how the working script trains), the learning rate, and which parameters it updates with a gradient.
        lrs = [float(g["lr"]) for g in optimizer.param_groups if isinstance(g.get("lr"), int | float)]
        if lrs:
            low, high = report["lr"] or (min(lrs), max(lrs))
            report["lr"] = [min(low, *lrs), max(high, *lrs)]
        if tracked["module"] is None:
            return
        if tracked["grads"] is not None and _gradient_sum(tracked["module"]) != tracked["grads"]:
            report["grads_changed"] += 1
        for group in optimizer.param_groups:
            for p in group["params"]:
                tracked["stepped"].add(id(p))
                if p.grad is not None and id(p) not in tracked["with_gradient"] and bool(p.grad.any()):
                    tracked["with_gradient"].add(id(p))

    def step_hook(optimizer, args, kwargs):
        report["steps"] += 1

    original_load = torch.nn.Module.load_state_dict

    def load_state_dict(self, *args, **kwargs):  # what the script's own restore loads (a strict=False that
        result = original_load(self, *args, **kwargs)  # loads nothing is no restore)
        report["loads"].append([len(result.missing_keys), len(result.unexpected_keys)])
        return result

    handles = [module_mod.register_module_forward_pre_hook(pre_hook),
               module_mod.register_module_forward_hook(post_hook, always_call=True),
               register_optimizer_step_pre_hook(step_pre_hook),
               register_optimizer_step_post_hook(step_hook)]
    torch.Tensor.backward = backward
    torch.nn.Module.load_state_dict = load_state_dict
    ns: dict | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ns = runpy.run_path(script, run_name="__main__")
        except BaseException as e:  # noqa: B036  (SystemExit and KeyboardInterrupt are the script's errors too)
            report["error"] = "".join(traceback.format_exception(e))[-4000:]
            diagnosis = explain(e)
            report["error_id"] = diagnosis.id if diagnosis else None
            if type(e).__name__ == "ProcessRaisedException":  # a spawned worker's traceback, quoted in the message
                root = explain(str(e).split("terminated with the following error:", 1)[-1])
                report["root_error_id"] = root.id if root else None
        finally:
            torch.Tensor.backward = original_backward
            torch.nn.Module.load_state_dict = original_load
            for h in handles:
                h.remove()
    for w in caught:
        diagnosis = explain(f"{w.category.__name__}: {w.message}")
        if diagnosis and diagnosis.id not in report["warning_ids"]:
            report["warning_ids"].append(diagnosis.id)
    if tracked["module"] is not None:
        named = dict(tracked["module"].named_parameters())
        report["parameters"] = len(named)
        first = tracked["first"]
        report["frozen"] = [n for n, p in named.items() if id(p) in first and first[id(p)][0] is p
                            and torch.equal(p.detach(), first[id(p)][1])]
        if report["steps"]:  # changed, but not by an optimizer step with a gradient: nudged by hand
            report["untrained"] = [n for n, p in named.items() if n not in report["frozen"]
                                   and not (id(p) in tracked["stepped"] and id(p) in tracked["with_gradient"])]
    if ns is not None:
        try:
            report["score"], report["score_note"] = _score(template, ns, out_dir, report)
        except Exception as e:
            report["score_note"] = f"evaluation failed: {type(e).__name__}: {e}"
    report["losses"] = [x if math.isfinite(x) else str(x) for x in report["losses"]]
    return report


def _child(template: str, script: str, out: Path, seed: int) -> None:
    """In a forked child: its own process group (a timeout kills the script's processes too), output to a file."""
    os.setpgid(0, 0)
    os.chdir(out)
    # Temporary files in the run's folder, not the machine's: torch.multiprocessing.spawn leaves an error file per
    # worker (pytorch-errorfile-*.pickle) when a run is killed or its workers fail, and chapter 09, run beside the
    # gate in make test, checks that it leaves none in the system's temporary folder.
    scratch = out / "tmp"
    scratch.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)
    fd = os.open(out / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    code = 0
    try:
        report = run(template, script, out, seed)
        (out / "report.json").write_text(json.dumps(report))
    except BaseException:  # noqa: B036  (the runner's own failure: reported by the missing report.json)
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> int:
    """The zygote: import torch, scikit-learn and the catalog once, then fork one child per request read from stdin
    (a JSON line: template, script, out, seed, timeout) and answer a JSON line when it ends or is killed at its
    time limit. Importing torch costs far more than training a template, so this is what keeps the matrix short.
    torch._dynamo too: the first optimizer a process builds imports it (1.7 s here, against 0.15 s of training for a
    template), so a child of a zygote without it paid that import on every run."""
    import sklearn.datasets  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401

    import torchdoctor.explain  # noqa: F401

    torch.set_num_threads(1)
    for line in sys.stdin:
        request = json.loads(line)
        out = Path(request["out"])
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(request["template"], request["script"], out, int(request["seed"]))
        timed_out, status = False, 0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > request["timeout"]:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # whatever the script left running (spawned workers)
        answer = {"timed_out": timed_out, "exit": os.waitstatus_to_exitcode(status),
                  "wall_s": round(time.monotonic() - start, 2)}
        print(json.dumps(answer), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--serve"]:
        return serve()
    template, script, out_dir, seed = argv
    out = Path(out_dir)
    report = run(template, script, out, int(seed))
    (out / "report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
