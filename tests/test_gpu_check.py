"""The offline GPU check (course_tools/gpu_check.py, `make wheelhouse` and `make test-gpu`): the parts that need no
GPU. Where CUDA is usable it must refuse nothing, so the refusal is checked with CUDA_VISIBLE_DEVICES empty."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from course_tools import gpu_check

REPO = Path(__file__).resolve().parent.parent


def test_the_wheelhouse_holds_every_pin_but_the_machines_own_torch_and_the_markdown_extraction():
    pins = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    pins = [p for p in pins if p]
    wanted = gpu_check.wheelhouse_requirements()
    assert set(pins) - set(wanted) == {p for p in pins if re.match(r"(torch|torchvision|mdpo|pymd4c)==", p)}
    assert not any(gpu_check.NOT_ALLOWED.match(f"{p.split('==')[0]}-") for p in wanted)
    names = {p.split("==")[0] for p in wanted}
    assert {"papermill", "nbformat", "ipykernel", "pytest", "numpy", "matplotlib", "scikit-learn"} <= names


def test_the_wheelhouse_refuses_torch_and_its_cuda_libraries_as_dependencies():
    for wheel in ("torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl", "triton-3.8.0-cp312-cp312-linux.whl",
                  "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl", "torchvision-0.29.1-cp312-x.whl"):
        assert gpu_check.NOT_ALLOWED.match(wheel), wheel
    for wheel in ("torchdoctor_x-1-py3-none-any.whl", "tornado-6.5-cp39-abi3-manylinux_2_28_x86_64.whl"):
        assert not gpu_check.NOT_ALLOWED.match(wheel), wheel


def test_the_wheelhouse_is_gathered_by_a_python_of_its_version(tmp_path, capsys):
    """pip reads dependencies' environment markers for the Python that runs it (papermill's aiohttp is for 3.12
    only): a wheelhouse gathered for 3.12 by Python 3.11 lacked aiohttp and failed to install offline on 3.12."""
    assert gpu_check.pip_python(f"{sys.version_info[0]}.{sys.version_info[1]}") == sys.executable
    assert gpu_check.pip_python("3.1") is None
    assert gpu_check.build_wheelhouse(tmp_path / "wheels", "3.1") == 2
    assert "make wheelhouse: no Python 3.1 with pip here" in capsys.readouterr().err
    assert not (tmp_path / "wheels").exists()


def test_pip_download_is_asked_for_every_manylinux_tag_a_glibc_2_28_node_runs():
    platforms = gpu_check.manylinux_platforms("2_28")
    assert platforms[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in platforms
    assert platforms[-1] == "manylinux2014_x86_64" and len(platforms) == 13


def test_the_check_says_when_no_cuda_device_is_usable_and_runs_nothing(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-m", "course_tools.gpu_check", "check", "--build", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == gpu_check.NO_CUDA, out.stdout + out.stderr
    assert "make test-gpu: no CUDA device" in out.stderr and "Nothing was run" in out.stderr
    assert "pinned torch: 2.14.1" in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_install_refuses_a_folder_that_is_no_wheelhouse_or_one_for_another_python(tmp_path, capsys):
    assert gpu_check.install_and_check(tmp_path, tmp_path / "env", tmp_path / "build", 1) == 2
    assert "is no wheelhouse" in capsys.readouterr().err
    (tmp_path / "wheelhouse.json").write_text(json.dumps({"python": "3.9", "glibc": "2_28"}))
    assert gpu_check.install_and_check(tmp_path, tmp_path / "env", tmp_path / "build", 1) == 2
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"holds wheels for Python 3.9, but PYTHON={sys.executable} (Python {version})" in capsys.readouterr().err
    assert not (tmp_path / "env").exists()


def test_the_release_report_names_the_wordings_the_corpus_recorded_otherwise():
    differences = {entry: (theirs, ours) for entry, theirs, ours in gpu_check.wording_differences("2.11.0", "2.14.1")}
    assert differences["ce-target-dtype"][0] == "expected scalar type Long but found Float"
    assert "backward-twice" not in differences
    assert gpu_check.wording_differences("2.14.1", "2.14.1") == []
    assert gpu_check.wording_differences("1.0.0", "2.14.1") is None
    assert gpu_check.pinned_torch() == "2.14.1" and gpu_check.release_of("2.11.0+cu130") == "2.11.0"


def test_cuda_tests_use_the_marker_so_that_make_test_gpu_selects_them():
    """A hand-written skipif on torch.cuda.is_available() would hide a CUDA test from `pytest -m cuda`."""
    hand_written = [str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                    if re.search(r"skipif\(\s*not torch\.cuda\.is_available\(\)", p.read_text(encoding="utf-8"))]
    assert hand_written == []
