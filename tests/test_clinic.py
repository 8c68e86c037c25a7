"""The bug clinic (issue 25): anchored edits, the oracles on a small representative set of real runs, the
operators the issue names as symptom-free rejected, and clear errors for unknown names. The whole matrix is not
run here (`make clinic-validate`)."""

from __future__ import annotations

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
