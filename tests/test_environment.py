"""The pinned environment: requirements.txt and environment.yml describe the same one."""

import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^[A-Za-z0-9_.\-\[\]]+==[^\s=]+$")
# What course_tools/grading overrides privately or configures (course_tools/grading/compat.py checks the methods):
# an unpinned upgrade of any of them could silently switch a protection off.
GRADING_STACK = ("nbgrader", "nbclient", "nbconvert", "nbformat", "jupyter_client", "jupyter_core", "pyzmq",
                 "traitlets", "ipykernel", "ipython")


def requirement_lines():
    lines = (REPO / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def conda_pip_lines():
    """The entries of environment.yml's pip section (a flat list, so no YAML parser is needed)."""
    text = (REPO / "environment.yml").read_text()
    section = text.split("- pip:", 1)[1]
    return [line.strip()[2:].strip() for line in section.splitlines() if line.strip().startswith("- ")]


def test_every_requirement_is_pinned_exactly():
    unpinned = [line for line in requirement_lines() if not PIN.match(line)]
    assert not unpinned, f"pin these with ==: {unpinned}"


def test_the_course_pins_torch_and_torchvision():
    assert {"torch==2.14.1", "torchvision==0.29.1"} <= set(requirement_lines())


def test_environment_yml_has_the_same_pins_as_requirements_txt():
    conda = [line for line in conda_pip_lines() if line != "-e ."]
    only_pip = sorted(set(requirement_lines()) - set(conda))
    only_conda = sorted(set(conda) - set(requirement_lines()))
    assert not only_pip and not only_conda, (
        f"requirements.txt and environment.yml drifted apart: only in requirements.txt {only_pip}, "
        f"only in environment.yml {only_conda}"
    )


def test_environment_yml_uses_python_311_and_installs_torchdoctor():
    text = (REPO / "environment.yml").read_text()
    assert re.search(r"^\s*- python=3\.11\s*$", text, re.MULTILINE)
    assert "-e ." in conda_pip_lines()


def pins() -> dict[str, str]:
    return dict(line.split("==") for line in requirement_lines())


def test_the_jupyter_stack_grading_relies_on_is_pinned():
    unpinned = [name for name in GRADING_STACK if name not in pins()]
    assert not unpinned, f"pin these in requirements.txt and environment.yml: {unpinned}"


def test_the_installed_environment_has_the_pinned_versions():
    """An upgrade in .venv without a change of pins (or the reverse) shows here, not as odd grading."""
    found = []
    for name, pinned in pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "not installed"
        if installed.split("+")[0] != pinned:
            found.append(f"{name}: pinned {pinned}, installed {installed}")
    assert not found, "run `make setup` (or update the pins): " + "; ".join(found)


def test_importing_the_notebook_stack_compiles_no_iri_grammar():
    """`make setup` uninstalls rfc3987-syntax (requirements.txt says why): with it, every process importing nbformat
    spent 0.84 s compiling its grammar."""
    probe = "import sys, nbformat, nbgrader.api, papermill; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", "rfc3987-syntax is installed: run `make setup` (it removes it)"
