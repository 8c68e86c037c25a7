"""Committed notebooks follow the course conventions (design §3)."""

import re
import subprocess

import nbformat
import pytest

from course_tools.notebook_check import check_declaration
from course_tools.release import REPO

FOLDERS = ("course", "exercises", "solutions", "autograder/source", "tests")


def committed_notebooks():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.ipynb"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()
    return sorted(path for path in listed if path.startswith(FOLDERS))


NOTEBOOKS = committed_notebooks()
COURSE_NOTEBOOKS = [p for p in NOTEBOOKS if not p.startswith("tests/")]


def code_cells(path):
    nb = nbformat.read(REPO / path, as_version=4)
    nbformat.validate(nb)
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_course_has_notebooks():
    assert "course/01_dimensions.ipynb" in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_committed_without_outputs(path):
    dirty = [i for i, c in enumerate(code_cells(path)) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path}: code cells {dirty} carry outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS)
def test_first_code_cell_holds_the_parameters(path):
    first = code_cells(path)[0]
    assert "parameters" in first.metadata.get("tags", []), f"{path}: first code cell is not tagged 'parameters'"
    for name in ("DEVICE", "FAST", "SEED"):
        assert re.search(rf"^{name}\s*=", first.source, re.MULTILINE), f"{path}: parameters cell lacks {name}"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_nothing_is_installed_from_a_notebook(path):
    installs = [c.source for c in code_cells(path) if re.search(r"(^|\s)[%!]?\s*pip3? install", c.source)]
    assert not installs, f"{path} installs packages; add them to requirements.txt instead"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_declared_errors_name_a_catalog_entry(path):
    """Every raises declaration is well formed and names an entry of the torchdoctor catalog (the runner then
    checks, on the executed notebook, that explain() gives that entry for the real error)."""
    problems = [p for i, c in enumerate(code_cells(path)) for p in check_declaration(i, c)]
    assert not problems, f"{path}: " + "; ".join(problems)
