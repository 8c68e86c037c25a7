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


CHAPTERS = [p for p in NOTEBOOKS if p.startswith("course/")]


@pytest.mark.parametrize("path", CHAPTERS)
def test_check_yourself_answers_are_left_to_the_student(path):
    """Answers start as None and the reference lives in the answer cell's metadata (the runner fills it in); no
    answer is pre-filled in a collapsed cell, and every chapter with questions checks them with torchdoctor.quiz."""
    cells = code_cells(path)
    collapsed = [i for i, c in enumerate(cells) if c.metadata.get("jupyter", {}).get("source_hidden")]
    assert not collapsed, f"{path}: code cells {collapsed} are collapsed; put answers in answer cells (metadata)"
    for index, c in enumerate(cells):
        reference = c.metadata.get("torchdoctor", {}).get("answer")
        if reference is None:
            continue
        assigned = re.findall(r"^(\w+) = (.+?)(?:\s+#.*)?$", c.source, re.MULTILINE)
        assert assigned and all(value == "None" for _, value in assigned), (
            f"{path}: answer cell {index} must leave each answer as `name = None`, not {c.source!r}")
        assert {name for name, _ in assigned} <= set(re.findall(r"\b\w+\b", reference)), (
            f"{path}: answer cell {index}'s reference does not define {[n for n, _ in assigned]}")
        later = "\n".join(cell.source for cell in cells[index + 1:])
        assert re.search(r"\b(check_answer|answered)\(", later), f"{path}: answer cell {index} is never checked"


DEVICE_GUARD = re.compile(r"^if (not torch\.cuda\.is_available\(\)|\w+\.type != \"cuda\"):")


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_cuda_cells_guard_themselves(path):
    """Only the runner blanks a cell meant for CUDA; in JupyterLab on a CPU it runs, so it must check the device
    itself and say why it did nothing (design §3)."""
    unguarded = [i for i, c in enumerate(code_cells(path))
                 if c.metadata.get("torchdoctor", {}).get("device") == "cuda"
                 and not DEVICE_GUARD.match(next(line for line in c.source.splitlines()
                                                 if line.strip() and not line.lstrip().startswith("#")))]
    assert not unguarded, (f"{path}: CUDA cells {unguarded} do not start with `if device.type != \"cuda\":` (or "
                           "`if not torch.cuda.is_available():`) followed by a printed line saying why nothing ran")
