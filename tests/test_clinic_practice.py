"""The bug clinic's student API (torchdoctor/clinic/practice.py): case codes, filters, clear errors, the closed list
of diagnoses, and fixes checked by real runs (one fast template: linear regression, a few seconds a run)."""

from __future__ import annotations

import json

import pytest

from torchdoctor.clinic import OPERATORS, ClinicError, get_operator, template_source
from torchdoctor.clinic.operators import case_templates
from torchdoctor.clinic.pair_case import PairCase
from torchdoctor.clinic.pointers import chapter_pointer
from torchdoctor.clinic.practice import (
    CASES_PATH,
    KINDS,
    SYMPTOM_SECTIONS,
    Case,
    Run,
    available,
    draw,
    write_cases,
)
from torchdoctor.clinic.regions import protected_regions
from torchdoctor.clinic.surface import base_template
from torchdoctor.clinic.wrong_fixes import RIGHT, WRONG, apply_fix

CASES = json.loads(CASES_PATH.read_text())["cases"]
PAIRS = json.loads(CASES_PATH.read_text())["pairs"]


def test_the_cases_are_validated_and_still_apply():
    assert len(CASES) >= 24
    for entry in CASES:
        case = Case(entry["template"], entry["operator"], 0)  # raises when a script changed since validation
        assert case.kind == ("error" if get_operator(entry["operator"]).oracle == "error" else "silent")
    assert {e["kind"] for e in CASES} == set(KINDS) - {"two"}
    assert len(PAIRS) >= 10
    for entry in PAIRS:
        case = PairCase(entry["template"], tuple(entry["operators"]), 0)  # raises when a script changed
        assert case.kind == "two" and case.chapters == tuple(entry["chapters"])
        singles = {(e["template"], e["operator"]) for e in CASES}
        assert all((entry["template"], o) in singles for o in entry["operators"])


def test_cases_json_is_written_from_the_matrix_with_validated_cases_only(tmp_path):
    matrix = {"seeds": [0], "clean": {"linear_regression": {"scores": [0.99], "threshold": 0.97, "problems": [],
                                                            "printed": ["epoch 0: loss #"], "loads": 0}},
              "cases": [{"operator": "learning-rate-too-high", "template": "linear_regression", "validated": True},
                        {"operator": "no-zero-grad", "template": "linear_regression", "validated": False}]}
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    data = write_cases(tmp_path / "matrix.json", tmp_path / "cases.json")
    assert [c["operator"] for c in data["cases"]] == ["learning-rate-too-high"]
    clean = data["templates"]["linear_regression"]  # what a fix must still print and restore
    assert clean["printed"] == ["epoch 0: loss #"] and clean["loads"] == 0
    assert json.loads((tmp_path / "cases.json").read_text()) == data
    pairs = {"pairs": [{"template": "linear_regression", "operators": ["learning-rate-too-high", op],
                        "validated": True} for op in ("forward-under-no-grad", "target-column")]}
    matrix["cases"].append({"operator": "forward-under-no-grad", "template": "linear_regression", "validated": True})
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    (tmp_path / "pairs.json").write_text(json.dumps(pairs))
    data = write_cases(tmp_path / "matrix.json", tmp_path / "cases.json", tmp_path / "pairs.json")
    [pair] = data["pairs"]  # target-column was not validated alone: its pair is not offered
    assert pair["operators"] == ["learning-rate-too-high", "forward-under-no-grad"] and pair["kind"] == "two"
    assert pair["chapters"] == ["convergence", "gradients"] and pair["kinds"] == ["silent", "error"]


def test_every_code_round_trips_and_codes_do_not_collide():
    codes = set()
    for entry in CASES:
        for seed in (0, 7, 2**20 - 1):
            case = Case(entry["template"], entry["operator"], seed)
            again = Case.from_code(case.code)
            assert (again.template, again.seed, again.script) == (case.template, seed, case.script)
            assert again.choices() == case.choices()
            codes.add(case.code)
    for entry in PAIRS:
        for seed in (0, 2**20 - 1):
            case = PairCase(entry["template"], tuple(entry["operators"]), seed)
            again = Case.from_code(case.code)
            assert type(again) is PairCase and case.code.startswith("P-")
            assert (again.template, again.seed, again.script, again.choices()) == (
                case.template, seed, case.script, case.choices())
            codes.add(case.code)
    assert len(codes) == 3 * len(CASES) + 2 * len(PAIRS)
    hashes = {(t, op.id) for op in OPERATORS for t in case_templates(op)}  # surface variants have codes of their own
    from torchdoctor.clinic.practice import _keys_by_hash

    assert len(_keys_by_hash("C")) == len(hashes) and len(_keys_by_hash("P")) == len(PAIRS)


def test_codes_given_out_before_pairs_still_name_the_same_cases():
    for code, template, operator, seed in [("C-ADBE-RGCA", "digits_mlp", "detach-hidden", 0),
                                           ("C-DEH3-600X", "digits_mlp", "detach-hidden", 7)]:
        case = Case.from_code(code)
        assert (type(case), case.template, case._op.id, case.seed) == (Case, template, operator, seed)
        assert Case(template, operator, seed).code == code
    pair = Case.from_code(draw(kind="two", seed=3).code)
    with pytest.raises(ClinicError, match="mistyped"):  # the prefix is checked too
        Case.from_code("C" + pair.code[1:])


def test_a_code_hides_the_bug_and_survives_small_typos():
    case = Case("digits_mlp", "detach-hidden", 7)
    assert "detach" not in case.code and "digits" not in case.code and "detach" not in repr(case)
    assert Case.from_code(case.code.lower().replace("0", "o")) == case
    assert Case.from_code(" c-" + case.code[2:].replace("-", "") + " ") == case


@pytest.mark.parametrize("code, message", [
    ("X-1234-5678", "is not a case code"),
    ("C-12345", "8 letters and digits"),
    ("C-UUUU-UUUU", "which no code uses"),
    (42, "is a string"),
])
def test_bad_codes_say_what_is_wrong(code, message):
    with pytest.raises(ClinicError, match=message):
        Case.from_code(code)


def test_a_mistyped_code_is_caught_by_its_check_character():
    code = Case("digits_mlp", "detach-hidden", 7).code
    wrong = 0
    for i in range(2, len(code)):
        if code[i] == "-":
            continue
        other = "0" if code[i] != "0" else "1"
        try:
            Case.from_code(code[:i] + other + code[i + 1:])
        except ClinicError as e:
            assert "mistyped" in str(e) or "names no case" in str(e) or "does not offer" in str(e)
            wrong += 1
    assert wrong >= 6


def test_draw_filters_by_chapter_and_kind_and_gives_new_cases():
    for slug in {e["chapter"] for e in CASES}:
        kinds = {e["kind"] for e in CASES if e["chapter"] == slug}
        for kind in kinds:
            case = draw(chapter=slug, kind=kind)
            assert (case.chapter, case.kind) == (slug, kind)
    codes = [draw().code for _ in range(20)]
    assert all(a != b for a, b in zip(codes, codes[1:], strict=False))
    assert len(set(codes)) >= 15
    assert draw("gradients", "silent", seed=3) == draw("gradients", "silent", seed=3)
    assert draw(seed=5).seed == 5
    assert len(available(kind="error")) + len(available(kind="silent")) == len(available()) == len(CASES)
    assert available(kind="two") == PAIRS
    for slug in {c for e in PAIRS for c in e["chapters"]}:
        assert slug in draw(chapter=slug, kind="two").chapters
    assert draw("gradients", "two", seed=3) == draw("gradients", "two", seed=3)


@pytest.mark.parametrize("kwargs, message", [
    ({"chapter": "nope"}, r"no chapter 'nope'.*valid chapter slugs: .*gradients"),
    ({"kind": "hard"}, r"unknown kind 'hard'; valid: 'error'"),
    ({"chapter": "multi-gpu", "kind": "two"}, r"chapter 'multi-gpu' has no case of kind 'two'; it has: error"),
    ({"chapter": "memory", "kind": "error"}, r"chapter 'memory' has no case of kind 'error'; it has: silent"),
    ({"seed": -1}, "seed must be a whole number"),
])
def test_bad_filters_say_what_is_valid(kwargs, message):
    with pytest.raises(ClinicError, match=message):
        draw(**kwargs)


def test_distractors_are_validated_bugs_of_the_same_kind_on_the_same_template_first():
    """Issue 36 item 3: every choice is a bug the gate validated (none it rejected for showing no symptom), with a
    symptom of the truth's kind; on the case's own template whenever it has enough of them, else elsewhere."""
    for entry in CASES:
        case = Case(entry["template"], entry["operator"], 11)
        options = case.choices()
        truth = get_operator(entry["operator"])
        assert options.count(truth.description) == 1 and len(options) == len(set(options)) == 4
        distractors = case._distractor_operators()
        assert truth not in distractors and len(distractors) == 3
        same_kind = [e for e in CASES if e["kind"] == entry["kind"] and e["operator"] != truth.id]
        assert all(any(e["operator"] == op.id for e in same_kind) for op in distractors), entry
        here = {get_operator(e["operator"]).description for e in same_kind
                if base_template(e["template"]) == base_template(entry["template"])} - {truth.description}
        assert sum(op.description in here for op in distractors) == min(3, len(here)), entry
    case = Case("digits_mlp", "first-layer-width", 1)
    assert all(op.oracle == "error" and "digits_mlp" in op.templates for op in case._distractor_operators())
    orders = {tuple(Case("digits_mlp", "first-layer-width", s).choices()) for s in range(6)}
    assert len(orders) > 1  # shuffled by the code


def test_a_wrong_diagnosis_is_refused_and_the_right_one_accepted():
    case = Case("linear_regression", "learning-rate-too-high", 0)
    options = case.choices()
    right = options.index(get_operator("learning-rate-too-high").description)
    assert case.check_diagnosis(right).ok
    assert case.check_diagnosis(options[right].upper()).ok
    wrong = case.check_diagnosis((right + 1) % len(options))
    assert not wrong.ok and "is not what is wrong" in repr(wrong)
    with pytest.raises(ClinicError, match="indices are 0 to 3"):
        case.check_diagnosis(9)
    with pytest.raises(ClinicError, match="not one of case.choices"):
        case.check_diagnosis("the GPU is broken")


def test_protected_regions_are_marked_in_every_template():
    for template in ("digits_mlp", "digits_cnn", "linear_regression", "text_classifier", "ddp_digits"):
        names = [r.name for r in protected_regions(template_source(template))]
        assert len(names) == 3 and "the number of epochs" in names and "evaluation" in names, template
    for entry in CASES:  # the working script and the untouched buggy one are never refused as edits
        case = Case(entry["template"], entry["operator"], 0)
        assert case.protected_changes(case.reference_fix()) == [], entry
        assert case.protected_changes(case.script) == [], entry


def test_chapter_pointers_name_a_section():
    for oracle, (slug, start) in SYMPTOM_SECTIONS.items():
        assert "section “" + start in chapter_pointer(slug, start), oracle
    assert "section “2. `backward()` on a non-scalar" in chapter_pointer("gradients", error_id="non-scalar-backward")


LR = ("torch.optim.SGD(model.parameters(), lr=5.0)", "torch.optim.SGD(model.parameters(), lr=0.05)")


@pytest.fixture(scope="module")
def nan_case():
    return Case("linear_regression", "learning-rate-too-high", 1)


def test_the_buggy_script_runs_and_shows_its_symptom(nan_case):
    run = nan_case.run(timeout=120)
    assert run.found["nonfinite"] and "<-- symptom" in repr(run) and "epoch 0" in run.output


def test_the_clean_template_passes_and_the_unmodified_case_fails(nan_case, tmp_path):
    assert nan_case.reference_fix() == template_source("linear_regression")
    path = tmp_path / "fixed.py"
    path.write_text(nan_case.script.replace(*LR))
    passed = nan_case.check_fix(str(path), timeout=120)
    assert passed.ok, repr(passed)
    failed = nan_case.check_fix(nan_case.script, timeout=120)
    assert not failed.ok and any("NaN or infinite" in p and "section “5. NaN" in p for p in failed.problems)


@pytest.mark.parametrize("edit", [
    ("EPOCHS = 10", "EPOCHS = 3"),  # fewer epochs
    ("X_train = rng.randn(800, 3)", "X_train = rng.randn(400, 3)"),  # another data split
    ("    loader = DataLoader(", "    X_train = X_train[:50]\n    loader = DataLoader("),  # a protected name redefined
    ("# --- end protected ---\n\n\nclass Points", "\n\nclass Points"),  # a marker removed
])
def test_a_fix_that_edits_a_protected_region_is_refused_before_it_runs(nan_case, edit):
    source = nan_case.script.replace(*LR)
    assert source.count(edit[0]) == 1
    verdict = nan_case.check_fix(source.replace(*edit))
    assert not verdict.ok and verdict.run is None and "refused" in verdict.title, repr(verdict)


def test_an_edit_of_the_evaluation_that_lowers_the_bar_is_refused_after_it_runs(nan_case):
    """The evaluation is judged by what it predicts (issue 36): predicting the training mean is refused."""
    source = nan_case.script.replace(*LR).replace(
        "        return model(torch.tensor(X, dtype=torch.float32)).squeeze(1)",
        "        return model(torch.tensor(X, dtype=torch.float32)).squeeze(1) * 0 + y_train.mean()")
    verdict = nan_case.check_fix(source, timeout=120)
    assert not verdict.ok and verdict.run is not None, repr(verdict)
    assert "changes what predict() returns for 400 of the grader's examples" in verdict.problems[0]


def test_a_bug_inside_the_evaluation_may_be_fixed_there_in_any_way_that_predicts_alike():
    """Issue 36: argmax(1) and argmax(dim=-1) for argmax(dim=1) are right fixes (they were refused by their text);
    a predict() that looks the labels up in the dataset instead of asking the model is not."""
    case = Case("digits_cnn", "argmax-over-batch", 0)
    assert case.protected_changes(case.reference_fix()) == []
    for fix in ("argmax(1)", "argmax(dim=-1)"):
        source = case.script.replace("argmax(dim=0)", fix)
        assert case.protected_changes(source) == [] and case.edited_evaluation(source)
        verdict = case.check_fix(source, timeout=120)
        assert verdict.ok, (fix, repr(verdict))
    lookup = case.script.replace("        return model(prepare(X)).argmax(dim=0)", (
        "        seen = {tuple(r): t for r, t in zip(load_digits().data, load_digits().target)}\n"
        "        return torch.tensor([seen[tuple(r)] for r in X])"))
    assert lookup != case.script
    verdict = case.check_fix(lookup, timeout=120)
    assert not verdict.ok and "changes what predict() returns" in verdict.problems[0], repr(verdict)


def test_a_bad_path_or_syntax_is_a_clear_answer(nan_case, tmp_path):
    with pytest.raises(ClinicError, match="no file"):
        nan_case.check_fix(str(tmp_path / "missing.py"))
    verdict = nan_case.check_fix("def broken(:\n    pass\n")
    assert not verdict.ok and "not valid Python" in verdict.title


# --- two bugs in one script (torchdoctor/clinic/pair_case.py) ---------------------------------------------------


def _pair(template, a, b, seed=0):
    assert [template, [a, b]] in [[e["template"], e["operators"]] for e in PAIRS], (a, b)
    return PairCase(template, (a, b), seed)


def test_a_pair_s_diagnosis_names_both_bugs_and_a_wrong_name_costs_a_right_one():
    case = _pair("digits_mlp", "detach-hidden", "load-whole-checkpoint")
    options = case.choices()
    truths = [options.index(get_operator(o).description) for o in ("detach-hidden", "load-whole-checkpoint")]
    others = [i for i in range(len(options)) if i not in truths]
    assert len(options) == len(set(options)) == 6 and len(case._distractor_operators()) == 4
    assert case.check_diagnosis(truths).ok and case.check_diagnosis([options[i].upper() for i in truths]).ok
    half = case.check_diagnosis(truths[:1])
    assert not half.ok and "1 of the 2 bugs named, and 0 wrong choices: 50% of the credit" in half.title
    assert "an error stops the script before the other bug can show" in half.problems[-1]
    mixed = case.check_diagnosis([truths[0], others[0]])
    assert "1 wrong choice: 0% of the credit" in mixed.title and "is not what is wrong" in mixed.problems[0]
    assert "0% of the credit" in case.check_diagnosis(list(range(6))).title  # naming every choice earns nothing
    with pytest.raises(ClinicError, match="answer with a list of choices"):
        case.check_diagnosis(truths[0])


def test_a_pair_s_protected_regions_take_each_half_fix_and_its_reference_fix_is_the_template():
    for entry in PAIRS:
        case = PairCase(entry["template"], tuple(entry["operators"]), 0)
        assert case.reference_fix() == template_source(entry["template"])
        for version in (case.script, *case._halves, case.reference_fix()):
            assert case.protected_changes(version) == [], entry


def test_a_pair_s_fix_passes_only_when_both_bugs_are_fixed():
    """A real run of the script with one of the two bugs fixed (linear regression, a few seconds); the other
    verdicts from the runs' reports."""
    case = _pair("linear_regression", "learning-rate-too-high", "forward-under-no-grad", seed=2)
    half = case.check_fix(case.script.replace(*LR), timeout=120)
    assert not half.ok and half.problems[0].startswith("one of this case's two bugs still raises its error"), half
    nan = {**half.run.report, "error": None, "losses": [1.0, "nan"], "score": 0.1}
    silent = case._problems(Run(case.code, "your script", "", nan, {"nonfinite": True, "accuracy": True}, 0.97, [1]))
    assert silent[0] == "one of this case's two bugs still shows its symptom" and "NaN or infinite" in silent[1]


@pytest.mark.parametrize("template, operator, wrong, right", [
    # a second backward made possible instead of removed: the losses still fall (issue 36, seeds 0, 5, 7)
    ("digits_mlp", "backward-twice", ("            loss.backward()\n            loss.backward()\n",
                                      "            loss.backward(retain_graph=True)\n            loss.backward()\n"),
     ("            loss.backward()\n            loss.backward()\n", "            loss.backward()\n")),
    # zero_grad() once an epoch: R^2 0.999 on the regression all the same (C-PERG-XSA4)
    ("linear_regression", "no-zero-grad", ("        for x, y in loader:\n",
                                           "        optimizer.zero_grad()\n        for x, y in loader:\n"),
     ("            loss = loss_fn(model(x), y)",
      "            optimizer.zero_grad()\n            loss = loss_fn(model(x), y)")),
])
def test_a_fix_that_trains_but_makes_its_steps_otherwise_fails_and_the_right_one_passes(template, operator, wrong,
                                                                                        right):
    case = Case(template, operator, 0)
    assert case.script.count(wrong[0]) == 1 and case.script.count(right[0]) == 1
    verdict = case.check_fix(case.script.replace(*wrong), timeout=120)
    report = verdict.run.report
    assert not verdict.ok, repr(verdict)
    if operator == "backward-twice":
        assert report["backward_calls"] == 2 * report["steps"] > 0
        assert verdict.problems[0].startswith(f"backward() ran {2 * report['steps']} times for {report['steps']}")
    else:
        assert report["backward_calls"] == report["steps"] and report["uncleared"] > 0
        assert "found the gradients of the step before still there" in verdict.problems[0]
    fixed = case.check_fix(case.script.replace(*right), timeout=120)
    assert fixed.ok, repr(fixed)
    assert fixed.run.report["uncleared"] == 0 and fixed.run.report["backward_calls"] == fixed.run.report["steps"]


def _wrong(operator, name):
    return next(f for f in WRONG if f.operator == operator and f.name == name)


def test_a_clipping_fix_of_a_learning_rate_bug_is_refused_for_the_learning_rate():
    """Issue 36 item 5: clipping the gradients instead of lowering the learning rate is refused, and the feedback
    names the learning rate, not "your edit"; another right rate than the working script's passes."""
    fix = _wrong("learning-rate-too-high", "clipped-gradients")
    case = Case(fix.template, fix.operator, 0)
    verdict = case.check_fix(apply_fix(fix), timeout=120)
    assert not verdict.ok and verdict.run.report["grads_changed"] > 0, repr(verdict)
    assert verdict.problems[0].startswith("the optimizer still steps with a learning rate of 5:"), verdict.problems
    assert not any("your edit" in p for p in verdict.problems), verdict.problems
    right = next(f for f in RIGHT if f.operator == fix.operator and f.name == "rate-0.5")
    assert case.check_fix(apply_fix(right), timeout=120).ok


@pytest.mark.parametrize("operator, name, says", [
    ("outputs-kept-with-graph", "append-deleted", "predictions kept for a confusion matrix: 228 batches"),
    ("load-whole-checkpoint", "strict-false", "were not loaded: strict=False hides the mismatch"),
    ("detach-hidden", "frozen-layers-nudged", "no optimizer step updated them with a gradient (fc1.weight"),
])
def test_a_fix_that_hides_the_symptom_is_refused_for_what_it_hides(operator, name, says):
    """Issue 36 item 1: the line that shows the symptom deleted, a restore that loads nothing, frozen layers nudged by
    hand: each passed every outcome oracle; the feedback names what it hides."""
    fix = _wrong(operator, name)
    verdict = Case(fix.template, fix.operator, 0).check_fix(apply_fix(fix), timeout=120)
    assert not verdict.ok and any(says in p for p in verdict.problems), repr(verdict)


def test_a_try_around_the_failing_code_is_refused_before_it_runs():
    fix = _wrong("backward-twice", "try-around-second-backward")
    verdict = Case(fix.template, fix.operator, 0).check_fix(apply_fix(fix))
    assert not verdict.ok and verdict.run is None and "adds a try statement" in verdict.problems[0], repr(verdict)
