"""The GPU job of .github/workflows/ci.yml runs only trusted code, and its test selection really selects the CUDA
reproducers and the CUDA memory tests (which skip on CPU runners, so nothing else would notice them missing)."""

import re
import subprocess
import sys

import yaml

from course_tools.release import REPO
from torchdoctor.catalog import CATALOG

WORKFLOW = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
GPU = WORKFLOW["jobs"]["gpu"]
CPU = WORKFLOW["jobs"]["cpu"]


def test_the_gpu_job_never_runs_for_a_pull_request():
    condition = GPU["if"]
    assert "pull_request" not in condition
    assert "github.event_name == 'push' && github.ref == 'refs/heads/main'" in condition
    assert "github.event_name == 'workflow_dispatch'" in condition
    assert "workflow_dispatch" in WORKFLOW[True]  # YAML reads the key `on` as True


def test_the_gpu_job_selects_every_cuda_reproducer_and_the_cuda_tests():
    """The job runs the check `make test-gpu` runs (course_tools/gpu_check.py); its `-m cuda` selects every test marked
    cuda, so every CUDA reproducer, the CUDA memory test and the live two-ranks-on-one-GPU test (issue 38)."""
    from course_tools.gpu_check import PYTEST_RUNS

    runs = [step.get("run", "") for step in GPU["steps"]]
    assert any(run.startswith(".venv/bin/python -m course_tools.gpu_check check") for run in runs)
    assert PYTEST_RUNS["CUDA tests"] == ["tests", "-m", "cuda"]
    collected = subprocess.run([sys.executable, "-m", "pytest", "tests/torchdoctor", "-m", "cuda", "--collect-only",
                                "-q", "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True).stdout
    reproducers = set(re.findall(r"reproducer\w*\[(.+)\]$", collected, re.M))
    cuda_entries = {e.id for e in CATALOG if e.needs == "cuda"}
    assert cuda_entries and cuda_entries == reproducers, f"not selected: {sorted(cuda_entries - reproducers)}"
    for test in ("test_memory.py::test_cuda_accounting_and_real_budget", "::test_two_ranks_on_one_gpu_live",
                 "::test_genuine_device_mismatches_raised_on_cuda_are_not_meta"):
        assert test in collected, f"{test} is not selected"


def test_the_cpu_job_uploads_the_browser_tests_screenshots_even_when_tests_fail():
    uploads = [step for step in CPU["steps"] if str(step.get("uses", "")).startswith("actions/upload-artifact")]
    screenshots = [step for step in uploads if step["with"]["path"] == "build/screenshots"]
    assert screenshots, "build/screenshots (tests/browser/) is not uploaded"
    assert screenshots[0].get("if") == "always()", "screenshots must be uploaded when the tests fail too"


def test_the_cpu_job_publishes_the_course_site_after_the_tests():
    names = [step.get("name", "") + step.get("run", "") for step in CPU["steps"]]
    tests = next(i for i, n in enumerate(names) if ".ci/run" in n)
    site = next(i for i, n in enumerate(names) if "make site" in n)
    assert site > tests, "make site reads the notebooks that make test executed"
    assert any(step.get("with", {}).get("path") == "build/site" for step in CPU["steps"])


def test_the_notebook_matrix_job_runs_every_configuration_make_test_leaves_out():
    from course_tools.notebook_matrix import CONFIGURATIONS

    job = WORKFLOW["jobs"]["notebooks-matrix"]
    assert set(job["strategy"]["matrix"]["config"]) | {"fast-seed0"} == set(CONFIGURATIONS)
    assert any("make test-notebooks-matrix CONFIG=${{ matrix.config }}" in step.get("run", "") for step in job["steps"])
    assert "pull_request" in WORKFLOW[True] and "if" not in job, "the matrix checks every push and pull request"


def test_a_job_runs_the_chinese_notebooks_under_the_runner_on_every_push():
    job = WORKFLOW["jobs"]["notebooks-zh_CN"]
    assert any(step.get("run", "").strip() == "make i18n-test-notebooks" for step in job["steps"])
    assert "if" not in job, "the Chinese notebooks are checked on every push and pull request"


def test_make_test_runs_the_bug_clinics_whole_gate_and_the_cpu_job_keeps_its_matrices():
    from course_tools.test_all import parts

    assert parts("cpu")["clinic-gate"][-3:] == ["torchdoctor.clinic", "gate", "--quiet"]
    uploads = [step["with"]["path"] for step in WORKFLOW["jobs"]["cpu"]["steps"] if "with" in step and
               step.get("uses", "").startswith("actions/upload-artifact")]
    assert "build/clinic/gate/*.json" in uploads and "clinic-gate" not in WORKFLOW["jobs"]
