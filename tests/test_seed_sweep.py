"""The seed sweep (``make test-notebooks-sweep``, issue 34) runs every seed it is asked for, and a claim that breaks at
one seed is reported with that seed, its mode, the cell and the command that reruns it."""

import argparse
import json

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_notebook

from course_tools import seed_sweep
from course_tools.release import REPO


@pytest.mark.parametrize("text, seeds", [("0-15", list(range(16))), ("3,7", [3, 7]), ("", []), ("0-2,7", [0, 1, 2, 7]),
                                         ("4", [4]), ("1-3,2", [1, 2, 3])])
def test_seed_lists(text, seeds):
    assert seed_sweep.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["seven", "3-1", "1-x"])
def test_a_malformed_seed_list_says_what_is_accepted(text):
    with pytest.raises(argparse.ArgumentTypeError, match="range|list"):
        seed_sweep.parse_seeds(text)


def test_a_claim_that_breaks_at_one_seed_is_reported_with_its_seed_mode_and_cell(tmp_path, capsys):
    params = new_code_cell('DEVICE = "auto"\nFAST = False\nSEED = 0', metadata={"tags": ["parameters"]})
    claim = new_code_cell("measured = 0.5 if (SEED, FAST) == (3, True) else 0.9\nassert measured > 0.8, measured")
    nb = new_notebook(cells=[params, claim])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "claim.ipynb"
    nbformat.write(nb, path)
    build = tmp_path / "sweep"

    code = seed_sweep.main(["--fast-seeds", "2-3", "--full-seeds", "3", "--device", "cpu", "--jobs", "2",
                            "--build", str(build), str(path)])

    out = capsys.readouterr().out
    assert code == 1
    report = json.loads((build / "report.json").read_text())
    (failure,) = report["failures"]
    assert (failure["seed"], failure["fast"], failure["configuration"]) == (3, True, "fast-seed3")
    assert f"id {claim.id}" in failure["problem"] and "AssertionError" in failure["problem"]
    assert failure["rerun"].endswith(f"run_notebooks --seed 3 {failure['notebook']}")
    assert f"FAIL at SEED 3 in FAST mode: {failure['notebook']}: cell " in out and f"(id {claim.id}" in out
    assert [run["ok"] for run in report["runs"]] == [True, False, True], "fast-seed2, fast-seed3, full-seed3"
    assert (build / "full-seed3").is_dir() and (build / "fast-seed2").is_dir()


def test_the_scheduled_workflow_runs_every_seed_the_sweep_defaults_to_one_job_each():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "seed-sweep.yml").read_text(encoding="utf-8"))
    assert "schedule" in workflow[True] and "workflow_dispatch" in workflow[True]  # YAML reads `on` as True
    job = workflow["jobs"]["seed-sweep"]
    jobs = job["strategy"]["matrix"]["include"]
    fast = [seed_sweep.parse_seeds(j["fast"]) for j in jobs]
    full = [seed_sweep.parse_seeds(j["full"]) for j in jobs]
    assert all(len(f) + len(g) == 1 for f, g in zip(fast, full, strict=True)), "one seed per job"
    assert sorted(s for f in fast for s in f) == seed_sweep.parse_seeds(seed_sweep.FAST_SEEDS)
    assert sorted(s for f in full for s in f) == seed_sweep.parse_seeds(seed_sweep.FULL_SEEDS)
    (run,) = [step["run"] for step in job["steps"] if "make test-notebooks-sweep" in step.get("run", "")]
    assert 'SWEEP_FAST="${{ matrix.fast }}"' in run and 'SWEEP_FULL="${{ matrix.full }}"' in run
