"""The bug clinic (issue 25): anchored edits, the oracles on a small representative set of real runs, the
operators the issue names as symptom-free rejected, and clear errors for unknown names. The whole gate is a part of
make test of its own (`make clinic-gate`); its comparison with cases.json is checked here on made-up data."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from torchdoctor.catalog import CATALOG
from torchdoctor.clinic import (
    OPERATORS,
    ORACLES,
    TEMPLATES,
    ClinicError,
    apply_operator,
    get_operator,
    revert,
    template_source,
    validate,
)
from torchdoctor.clinic.gate import compare_offered
from torchdoctor.clinic.operators import case_templates
from torchdoctor.clinic.oracles import missing_lines, printed_lines
from torchdoctor.clinic.pairs import (
    PAIR_TEMPLATES,
    PER_TEMPLATE,
    pair_reason,
    pair_sources,
    select_pairs,
    validate_pairs,
)
from torchdoctor.clinic.practice import CASES_PATH, Case
from torchdoctor.clinic.regions import protected_regions
from torchdoctor.clinic.surface import SURFACES, base_template, rename, variant_names
from torchdoctor.clinic.wrong_fixes import RIGHT, WRONG, CorpusResult, apply_fix, corpus_for
from torchdoctor.manifest import load_manifest

CATALOG_IDS = {e.id for e in CATALOG}


def test_enough_operators_over_the_chapters():
    assert len(OPERATORS) >= 24
    assert len({op.id for op in OPERATORS}) == len(OPERATORS)
    chapters = {op.chapter for op in OPERATORS}
    assert {"dimensions", "gradients", "memory", "dtype-device", "checkpoints", "data-loading", "convergence",
            "accuracy", "multi-gpu"} <= chapters


def test_labels_chapters_and_oracles_are_known():
    slugs = {c.slug for c in load_manifest().chapters}
    for op in OPERATORS:
        assert op.chapter in slugs, op.id
        assert op.oracle in ORACLES, op.id
        if op.oracle == "error":
            assert op.label in CATALOG_IDS, f"{op.id}: an error's label must be a catalog id, not {op.label!r}"
        assert op.templates and set(op.templates) <= set(TEMPLATES), op.id


@pytest.mark.parametrize("op", OPERATORS, ids=lambda o: o.id)
def test_every_edit_applies_exactly_and_reverts_to_the_template(op):
    for template in op.templates:
        source = template_source(template)
        mutant = apply_operator(op, template)
        assert mutant != source
        assert revert(op, template, mutant) == source
        compile(mutant, f"<{op.id} on {template}>", "exec")


def test_a_missing_or_repeated_anchor_fails_loudly():
    op = get_operator("float64-inputs")
    source = template_source("digits_mlp")
    anchor = op.edits["digits_mlp"].anchor
    with pytest.raises(ClinicError, match="found 0 times"):
        apply_operator(op, "digits_mlp", source.replace(anchor, "return prepared"))
    with pytest.raises(ClinicError, match="found 2 times"):
        apply_operator(op, "digits_mlp", source + "\n# " + anchor + "\n")
    with pytest.raises(ClinicError, match="found 0 times"):
        revert(op, "digits_mlp", source)


def test_unknown_names_get_a_clear_error():
    with pytest.raises(ClinicError, match="unknown operator 'nope'; known: .*detach-hidden"):
        get_operator("nope")
    with pytest.raises(ClinicError, match="unknown template 'nope'; known: .*digits_mlp"):
        apply_operator("float64-inputs", "nope")
    with pytest.raises(ClinicError, match="has no edit for template 'ddp_digits'"):
        apply_operator("float64-inputs", "ddp_digits")
    with pytest.raises(ClinicError, match="unknown template"):
        validate(templates=["nope"])
    cli = subprocess.run([sys.executable, "-m", "torchdoctor.clinic", "validate", "--operator", "nope"],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "unknown operator 'nope'" in cli.stderr


def test_a_representative_subset_validates_and_the_symptom_free_operators_are_rejected(tmp_path):
    """On one seed (the matrix uses three): the clean MLP passes every oracle; an error, a silent bug seen only by
    the parameter check, and a memory leak fire their oracles; the three operators the issue measured as symptom
    free are rejected with the reason."""
    ops = ["float64-inputs", "detach-hidden", "loss-sum-keeps-graph", "no-shuffle", "no-eval", "test-own-statistics"]
    matrix = validate(templates=["digits_mlp"], operators=ops, seeds=1, jobs=2, workdir=tmp_path)
    clean = matrix.clean["digits_mlp"]
    assert clean["problems"] == [], clean
    assert clean["scores"][0] >= TEMPLATES["digits_mlp"][2]
    verdicts = {c.operator: c for c in matrix.cases}
    for op in ("float64-inputs", "detach-hidden", "loss-sum-keeps-graph"):
        assert verdicts[op].validated, (op, verdicts[op].reason, verdicts[op].findings)
    for op in ("no-shuffle", "no-eval", "test-own-statistics"):
        assert not verdicts[op].validated, (op, verdicts[op].findings)
        assert "no symptom" in verdicts[op].reason
    assert "rejected" in matrix.table()


# --- pairs of bugs (torchdoctor/clinic/pairs.py) ---------------------------------------------------------------


def _report(error_id=None, frozen=(), score=0.97, losses=(2.3, 0.4)):
    """A runner's report, as much of it as the oracles read (digits_mlp: 10 classes, threshold 0.95 below)."""
    return {"template": "digits_mlp", "error": f"RuntimeError: {error_id}" if error_id else None,
            "error_id": error_id, "root_error_id": None, "losses": list(losses), "frozen": list(frozen),
            "memory": [], "score": None if error_id else score}


def test_a_pair_s_edits_must_be_independent():
    a, b = get_operator("detach-hidden"), get_operator("float64-inputs")
    both, only_a, only_b = pair_sources("digits_mlp", a, b)
    assert only_a == apply_operator(a, "digits_mlp") and only_b == apply_operator(b, "digits_mlp")
    assert revert(a, "digits_mlp", revert(b, "digits_mlp", both)) == template_source("digits_mlp")
    with pytest.raises(ClinicError, match="edits overlap|found 0 times"):  # both edit the same labels
        pair_sources("digits_mlp", get_operator("labels-one-based"), get_operator("float-labels"))


def test_the_pairs_tried_are_few_fast_and_of_two_chapters():
    cases = json.loads(CASES_PATH.read_text())["cases"]
    validated = [(c["template"], c["operator"]) for c in cases]
    chosen = select_pairs(validated)
    assert chosen == select_pairs(list(reversed(validated)))  # deterministic
    assert {t for t, _, _ in chosen} <= set(PAIR_TEMPLATES) and "ddp_digits" not in PAIR_TEMPLATES
    for t in PAIR_TEMPLATES:
        assert 0 < sum(p[0] == t for p in chosen) <= PER_TEMPLATE
    for t, a, b in chosen:
        op_a, op_b = get_operator(a), get_operator(b)
        assert (t, a) in validated and (t, b) in validated
        assert op_a.oracle != "error" and op_a.chapter != op_b.chapter and op_a.oracle != op_b.oracle


def test_the_pair_gate_wants_each_bug_to_need_its_own_fix():
    """detach-hidden (parameters frozen) with float64-inputs (an error that hides it): accepted when the script
    with the error fixed still shows the frozen layers; rejected when fixing one bug hides the other's symptom,
    or when the two bugs together show nothing."""
    a, b = get_operator("detach-hidden"), get_operator("float64-inputs")
    error, frozen, clean = _report("matmul-dtype"), _report(frozen=["fc1.weight"]), _report()
    assert pair_reason(a, b, {"both": [error] * 3, "a": [frozen] * 3, "b": [error] * 3}, 0.95) == ""
    hidden = pair_reason(a, b, {"both": [error] * 3, "a": [frozen, clean, frozen], "b": [error] * 3}, 0.95)
    assert hidden.startswith("seed 1: fixing float64-inputs alone also hides detach-hidden's symptom"), hidden
    silent = get_operator("loss-sum-keeps-graph")
    none = pair_reason(a, silent, {"both": [clean] * 3, "a": [frozen] * 3, "b": [clean] * 3}, 0.95)
    assert none.startswith("seed 0: with both bugs, neither bug's oracle fires"), none


def test_the_pair_gate_runs_a_pair_and_its_two_bugs(tmp_path):
    """One seed of a real pair on linear regression (3 runs of a few seconds): the learning rate that makes the
    loss NaN, and the forward pass under no_grad that raises first."""
    matrix = {"seeds": [0], "clean": {"linear_regression": {"threshold": 0.979}},
              "cases": [{"template": "linear_regression", "operator": o, "validated": True}
                        for o in ("learning-rate-too-high", "forward-under-no-grad")]}
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    result = validate_pairs(tmp_path / "matrix.json", seeds=1, workdir=tmp_path / "runs")
    [pair] = result.pairs
    assert pair.operators == ["learning-rate-too-high", "forward-under-no-grad"]
    assert pair.validated, (pair.reason, pair.findings)
    assert pair.findings[0]["both"]["error"] == "no-grad-fn" and pair.findings[0]["a"]["nonfinite"]
    assert "1 pairs validated of 1 tried" in result.table() and json.loads(result.to_json())["pairs"][0]["validated"]
    with pytest.raises(ClinicError, match="run `make clinic-validate`"):
        validate_pairs(tmp_path / "missing.json")


def test_the_gate_fails_on_an_offered_case_it_no_longer_validates_and_lists_new_ones():
    offered = {"cases": [{"template": "digits_mlp", "operator": "detach-hidden", "mutant": "aaaa"},
                         {"template": "digits_mlp", "operator": "no-eval", "mutant": "bbbb"}],
               "pairs": [{"template": "digits_mlp", "operators": ["detach-hidden", "float64-inputs"], "mutant": "cc"}]}
    same = json.loads(json.dumps(offered))
    assert compare_offered(offered, same) == ([], [])
    today = {"cases": [{"template": "digits_mlp", "operator": "detach-hidden", "mutant": "a2a2"},  # script changed
                       {"template": "digits_mlp", "operator": "no-eval", "mutant": "bbbb"},
                       {"template": "text_classifier", "operator": "float-tokens", "mutant": "dddd"}], "pairs": []}
    lost, new = compare_offered(offered, today)
    assert lost == ["digits_mlp detach-hidden (script aaaa)", "digits_mlp detach-hidden+float64-inputs (script cc)"]
    assert new == ["digits_mlp detach-hidden", "text_classifier float-tokens"]


# --- surface variants (torchdoctor/clinic/surface.py) -----------------------------------------------------------


def test_a_surface_variant_renames_names_but_not_attributes_text_or_protected_regions():
    base = template_source("digits_mlp")
    variant = template_source("digits_mlp~1")
    assert variant != base and compile(variant, "digits_mlp~1", "exec")
    assert "net = build_model()" in variant and "opt = torch.optim.Adam(net.parameters()" in variant
    assert "self.out = nn.Linear(64, 10)" in variant  # an attribute keeps its name
    assert '{"model": net.state_dict()' in variant  # a string keeps its text
    assert "{loss_sum / n_steps:.4f}" in variant  # an f-string's fields are renamed
    assert [r.text for r in protected_regions(variant)] == [r.text for r in protected_regions(base)]
    assert variant_names("digits_mlp") == ["digits_mlp", "digits_mlp~1", "digits_mlp~2"]
    assert variant_names("ddp_digits") == ["ddp_digits"] and base_template("digits_mlp~2") == "digits_mlp"
    with pytest.raises(ClinicError, match="no surface variant '3'"):
        template_source("digits_mlp~3")
    with pytest.raises(ClinicError, match="also a keyword argument"):
        rename("loader = DataLoader(x=1)\n", "digits_mlp~1")
    with pytest.raises(ClinicError, match="already has the names"):
        rename("net = 1\nmodel = 2\n", "digits_mlp~1")


@pytest.mark.parametrize("template", sorted(SURFACES))
def test_every_variant_renames_only_what_its_map_names_and_every_case_on_it_applies(template):
    for name in variant_names(template)[1:]:
        variant = template_source(name)
        renamed = SURFACES[template][int(name.split("~")[1]) - 1]
        for old, new in renamed.items():
            assert new in variant, (name, old, new)  # every renaming takes effect somewhere
        for op in OPERATORS:
            if template in op.templates:
                mutant = apply_operator(op, name)
                assert mutant == rename(apply_operator(op, template), name)
                compile(mutant, f"<{op.id} on {name}>", "exec")
    assert all(base_template(t) in TEMPLATES for op in OPERATORS for t in case_templates(op))


def test_a_variant_case_s_fix_is_its_variant_and_its_code_names_it():
    entry = next(e for e in json.loads(CASES_PATH.read_text())["cases"] if e["template"] == "digits_mlp~1")
    case = Case(entry["template"], entry["operator"], 5)
    assert case.reference_fix() == template_source("digits_mlp~1") != template_source("digits_mlp")
    assert case.protected_changes(case.reference_fix()) == [] and "(digits_mlp.py)" in repr(case)
    assert Case.from_code(case.code).script == case.script


def _run_template(tmp_path, name, edit):
    """The runner's report on digits_cnn with one textual edit (old, new) applied, in a subprocess of its own."""
    from torchdoctor.clinic.templates import template_source

    source = template_source("digits_cnn")
    for old, new in edit:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    out = tmp_path / name
    out.mkdir()
    script = out / "script.py"
    script.write_text(source)
    done = subprocess.run([sys.executable, "-m", "torchdoctor.clinic.runner", "digits_cnn", str(script), str(out), "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "report.json").read_text())


def test_parameters_that_appear_after_the_first_forward_are_judged(tmp_path):
    """Issue 36: a fix with nn.LazyLinear runs (the runner copied uninitialised parameters and crashed with
    KeyError: 'before'), and a layer built inside forward(), which no optimizer sees, is reported frozen."""
    linear = ("        self.fc = nn.Linear(16 * 2 * 2, 10)\n", "")
    lazy = _run_template(tmp_path, "lazy", [(linear[0], "        self.fc = nn.LazyLinear(10)\n")])
    assert lazy["error"] is None and lazy["frozen"] == [] and lazy["parameters"] == 6
    assert lazy["score"] > 0.8, lazy["score"]
    in_forward = _run_template(tmp_path, "in_forward", [linear, (
        "        return self.fc(x)", "        self.fc = nn.Linear(x.shape[1], 10)\n        return self.fc(x)")])
    assert in_forward["frozen"] == ["fc.weight", "fc.bias"]


def test_every_operator_carries_known_wrong_fixes_that_apply():
    """Issue 36 item 1: each operator, on each of its templates, has known-wrong fixes (at least the generic try
    around the run, and more epochs for a silent bug), each an exact edit of the buggy script; the right ones apply
    too. The gate (`make clinic-gate`) runs them."""
    for op in OPERATORS:
        for template in op.templates:
            fixes = corpus_for(op.id, template)
            wrong = [f for f in fixes if not f.right]
            assert any(f.name == "try-around-main" for f in wrong), (op.id, template)
            assert op.oracle == "error" or any(f.name == "three-times-the-epochs" for f in wrong), (op.id, template)
            for fix in fixes:
                assert apply_fix(fix) != apply_operator(op, template), fix.name
                assert fix.right or fix.says, fix.name
    specific = {f.operator for f in WRONG}
    assert {"backward-twice", "no-zero-grad", "outputs-kept-with-graph", "learning-rate-too-high"} <= specific
    assert len(WRONG) >= 20 and len(RIGHT) >= 5


def test_the_corpus_fails_when_a_wrong_fix_passes():
    """The verdict of a corpus entry: a wrong fix that passes on one seed, or fails without naming what it hides,
    is not judged as deserved; a right fix must pass on every seed."""
    wrong, right = WRONG[0], RIGHT[0]
    assert CorpusResult(wrong, [False, False], ["x " + wrong.says]).deserved()
    assert CorpusResult(wrong, [], [wrong.says]).deserved()  # refused before running
    assert not CorpusResult(wrong, [False, True], [wrong.says]).deserved()
    assert not CorpusResult(wrong, [False, False], ["something else"]).deserved()
    assert CorpusResult(right, [True] * 3, []).deserved()
    assert not CorpusResult(right, [True, False, True], ["a symptom"]).deserved()
    assert not CorpusResult(right, [], ["refused"]).deserved()


def test_what_a_run_printed_is_compared_with_decimals_masked_and_zeros_kept():
    """A fix must print every line the working script prints (issue 36: deleting `predictions.append(out)` left
    "0 batches", deleting `running += loss` a mean loss of 0.0000); losses differ from seed to seed, so decimals are
    masked, but a zero and whole numbers are kept, and the run's folder is written <run>."""
    printed = printed_lines("epoch 0: loss 0.1234\n\nsaved to /x/run/checkpoint.pt; 228 batches\nmean -0.0000\n"
                            "w = [[2.0001, -3.5e-01]]\n", "/x/run")
    assert printed == ["epoch 0: loss #", "saved to <run>/checkpoint.pt; 228 batches", "mean 0", "w = [[#, #]]"]
    assert missing_lines(["a", "a", "b"], ["b", "a", "c"]) == ["a"]
    assert missing_lines(printed, printed + ["a warning"]) == []


def test_a_run_killed_at_its_limit_runs_once_more_with_a_longer_one(monkeypatch, tmp_path):
    """A clean template that a loaded machine made slow is not lost; one that hangs times out again."""
    validate = importlib.import_module("torchdoctor.clinic.validate")   # the package exports a function of that name

    limits = []

    def fake_run(self, template, source, workdir, seed, timeout):
        limits.append(timeout)
        slow = template == "hangs" or len(limits) == 1
        return {"template": template, "seed": seed, "timeout": timeout} if slow else {"template": template}

    monkeypatch.setattr(validate.Zygote, "__init__", lambda self: None)
    monkeypatch.setattr(validate.Zygote, "run", fake_run)
    monkeypatch.setattr(validate.Zygote, "close", lambda self: None, raising=False)
    slow = validate.run_all([("k", "slow", "", 0)], jobs=1, timeout=10, workdir=tmp_path)
    assert limits == [10, 10 * validate.RETRY_FACTOR] and "timeout" not in slow[("k", "slow", 0)]
    hangs = validate.run_all([("k", "hangs", "", 0)], jobs=1, timeout=10, workdir=tmp_path)
    assert hangs[("k", "hangs", 0)]["timeout"] == 10 * validate.RETRY_FACTOR
