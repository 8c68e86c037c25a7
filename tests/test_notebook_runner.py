"""The notebook check catches every way a notebook can break its declared errors."""

import os
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_tools.notebook_check import check_executed, skip_for_device
from course_tools.run_notebooks import run_one
from torchdoctor.explain_i18n import NOTEBOOK_ENV
from torchdoctor.quiz import STRICT

MISMATCH = r"mat1 and mat2 shapes cannot be multiplied \(4x20 and 10x3\)"
PARAMETERS = {"DEVICE": "cpu", "FAST": True, "SEED": 0}


def cell(source, *, raises=None, device=None, nbgrader=None, count=1, error=None):
    """A code cell as it looks after execution (count=None: never ran; error=(ename, evalue): it failed)."""
    c = new_code_cell(source, execution_count=count)
    if raises:
        c.metadata.tags = ["raises-exception"]
        c.metadata.torchdoctor = {"raises": {"type": raises[0], "match": raises[1], "id": raises[2]}}
    if device:
        c.metadata.setdefault("torchdoctor", {})["device"] = device
    if nbgrader:
        c.metadata.nbgrader = nbgrader
    if error:
        c.outputs = [new_output("error", ename=error[0], evalue=error[1], traceback=[])]
    return c


def notebook(*cells):
    nb = new_notebook(cells=list(cells))
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


DECLARED = ("RuntimeError", MISMATCH, "mat1-mat2-shapes")
REAL_ERROR = ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (4x20 and 10x3)")


def test_clean_notebook_with_its_declared_error_passes():
    nb = notebook(cell("x = 1"), cell("bad()", raises=DECLARED, error=REAL_ERROR), cell("y = 2"))
    assert check_executed(nb) == []


def test_declared_error_that_stops_happening_fails():
    problems = check_executed(notebook(cell("fine()", raises=DECLARED)))
    assert len(problems) == 1 and "raised nothing" in problems[0]


def test_declared_error_of_another_type_fails():
    problems = check_executed(notebook(cell("bad()", raises=DECLARED, error=("ValueError", "nope"))))
    assert len(problems) == 1 and "but raised ValueError: nope" in problems[0]


def test_declared_error_with_another_message_fails():
    other = ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (4x20 and 12x3)")
    problems = check_executed(notebook(cell("bad()", raises=DECLARED, error=other)))
    assert len(problems) == 1 and "12x3" in problems[0]


def test_declared_id_must_be_the_one_explain_gives():
    wrong_id = ("RuntimeError", MISMATCH, "matmul-dtype")
    (problem,) = check_executed(notebook(cell("bad()", raises=wrong_id, error=REAL_ERROR)))
    assert "declares id 'matmul-dtype' but torchdoctor.explain gives 'mat1-mat2-shapes'" in problem


def test_declared_error_that_explain_does_not_recognise_fails():
    unknown = ("KeyError", "'b'", "mat1-mat2-shapes")
    (problem,) = check_executed(notebook(cell("{}['b']", raises=unknown, error=("KeyError", "'b'"))))
    assert "which torchdoctor.explain does not recognise" in problem and "'mat1-mat2-shapes'" in problem


def test_explain_reads_the_traceback_when_type_and_message_are_not_enough():
    c = cell("bad()", raises=DECLARED, error=REAL_ERROR)
    c.outputs[0].traceback = ["\x1b[0;31mRuntimeError\x1b[0m: " + REAL_ERROR[1]]
    assert check_executed(notebook(c)) == []


def test_undeclared_error_fails():
    problems = check_executed(notebook(cell("oops()", error=("NameError", "name 'oops' is not defined"))))
    assert len(problems) == 1 and "declares no error" in problems[0]


def test_cell_left_unrun_fails():
    problems = check_executed(notebook(cell("x = 1"), cell("y = 2", count=None), cell("z = 3", count=None)))
    assert len(problems) == 1 and problems[0].startswith("2 cell(s) never ran") and "'y = 2'" in problems[0]


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"tags": ["raises-exception"]}, "does not declare which error"),
        ({"torchdoctor": {"raises": {"type": "RuntimeError", "match": "x"}}}, "not tagged"),
        ({"tags": ["raises-exception"], "torchdoctor": {"raises": {"type": "RuntimeError"}}}, '"raises" must be'),
        ({"tags": ["raises-exception"], "torchdoctor": {"raises": {"type": "E", "match": "(", "id": "broadcast-size"}}},
         "not a valid"),
        ({"tags": ["raises-exception"], "torchdoctor": {"raises": {"type": "RuntimeError", "match": "x"}}},
         "(missing: id)"),
        ({"tags": ["raises-exception"], "torchdoctor": {"raises": {"type": "E", "match": "x", "id": "no-such-id"}}},
         "id 'no-such-id', which is not in the torchdoctor catalog"),
    ],
)
def test_malformed_declarations_are_reported(metadata, message):
    c = new_code_cell("bad()", execution_count=1, metadata=metadata)
    problems = check_executed(notebook(c))
    assert len(problems) == 1 and message in problems[0]


SOLUTION = {"solution": True, "grade": False, "grade_id": "answer", "locked": False}
TEST = {"solution": False, "grade": True, "grade_id": "test_answer", "points": 1, "locked": True}
GIVEN = {"solution": False, "grade": False, "grade_id": "given", "locked": True}


def test_starter_may_fail_only_where_work_is_left():
    stub = ("NotImplementedError", "")
    nb = notebook(
        cell("import torch", nbgrader=GIVEN),
        cell("raise NotImplementedError()", nbgrader=SOLUTION, error=stub),
        cell("assert answer == 1", nbgrader=TEST, error=("NameError", "name 'answer' is not defined")),
    )
    assert check_executed(nb, starter=True) == []
    assert len(check_executed(nb)) == 2  # the same notebook as a solution is broken


def test_starter_with_a_broken_given_cell_fails():
    nb = notebook(cell("import torhc", nbgrader=GIVEN, error=("ModuleNotFoundError", "No module named 'torhc'")))
    assert "declares no error" in check_executed(nb, starter=True)[0]


def test_starter_whose_test_passes_without_work_fails():
    nb = notebook(cell("raise NotImplementedError()", nbgrader=SOLUTION, error=("NotImplementedError", "")),
                  cell("assert True", nbgrader=TEST))
    assert "passes on the unmodified starter" in check_executed(nb, starter=True)[0]


def test_cells_for_another_device_are_blanked():
    nb = notebook(cell("x.cuda()", device="cuda", raises=DECLARED), cell("x.cpu()", device="cpu"))
    assert skip_for_device(nb, "cpu", cuda_usable=False) == [0]
    assert nb.cells[0].source.startswith("# Skipped") and "raises-exception" not in nb.cells[0].metadata.tags
    assert nb.cells[1].source == "x.cpu()"


def test_a_cpu_cell_is_blanked_where_cuda_is_usable_even_with_device_cpu():
    """A "cpu" cell shows what a hard-coded "cuda" does without a GPU: on a GPU machine it cannot."""
    nb = notebook(cell('torch.zeros(1, device="cuda")', device="cpu", raises=DECLARED))
    assert skip_for_device(nb, "cpu", cuda_usable=True) == [0]
    assert "without a usable CUDA GPU" in nb.cells[0].source


# End to end: the same checks through papermill and a real kernel.
def write(tmp_path, name, *cells):
    params = new_code_cell('DEVICE = "auto"\nFAST = False\nSEED = 0', metadata={"tags": ["parameters"]})
    nb = notebook(params, new_code_cell("import torch\nx = torch.randn(4, 20)"), *cells)
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def declared(source):
    c = new_code_cell(source)
    c.metadata.tags = ["raises-exception"]
    c.metadata.torchdoctor = {"raises": {"type": "RuntimeError", "match": MISMATCH, "id": "mat1-mat2-shapes"}}
    return c


def test_runner_end_to_end(tmp_path):
    good = write(tmp_path, "good.ipynb", declared("torch.nn.Linear(10, 3)(x)"), new_code_cell("y = x * 2"))
    fixed = write(tmp_path, "fixed.ipynb", declared("torch.nn.Linear(20, 3)(x)"))
    broken = write(tmp_path, "broken.ipynb", new_code_cell("torch.nn.Linear(10, 3)(x)"), new_code_cell("y = 1"))
    build = tmp_path / "build"

    assert run_one(good, PARAMETERS, build).problems == []
    assert (build / "good.ipynb").is_file()

    (problem,) = run_one(fixed, PARAMETERS, build).problems
    assert "raised nothing" in problem

    undeclared, unrun = run_one(broken, PARAMETERS, build).problems
    assert "declares no error" in undeclared and "1 cell(s) never ran" in unrun


def test_nbval_alone_would_pass_a_declared_error_that_never_happens(tmp_path):
    """Why the runner has its own check: nbval accepts a raises-exception cell that raises nothing."""
    path = write(tmp_path, "fixed.ipynb", declared("torch.nn.Linear(20, 3)(x)"))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider", str(path)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout
    assert run_one(path, PARAMETERS, tmp_path / "build").problems != []


# Check-yourself answers: the runner fills in each answer cell's reference and fails when a check rejects it.
def answer_cell(placeholder, reference):
    return new_code_cell(placeholder, metadata={"torchdoctor": {"answer": reference}})


HINTS = '[Q1]\nnudge = "count the weight\'s rows"\nnarrower = "out_features"\nanswer = "{expected}"\nkeywords = []\n'


def quiz_cells(tmp_path, reference):
    (tmp_path / "quiz.toml").write_text(HINTS)
    setup = f"from torchdoctor.quiz import check_answer, load_hints\nload_hints('quiz', {str(tmp_path)!r})"
    question = "q1 = None  # your answer"
    check = new_code_cell('check_answer("Q1", q1, expected=torch.nn.Linear(20, 3).weight.shape[0])')
    first = answer_cell(question, reference) if reference is not None else new_code_cell(question)
    return new_code_cell(setup), first, check


def test_reference_answers_are_filled_in_and_checked(tmp_path):
    right = write(tmp_path, "right.ipynb", *quiz_cells(tmp_path, "q1 = 3"))
    wrong = write(tmp_path, "wrong.ipynb", *quiz_cells(tmp_path, "q1 = 4"))
    missing = write(tmp_path, "missing.ipynb", *quiz_cells(tmp_path, None))
    build = tmp_path / "build"

    assert run_one(right, PARAMETERS, build).problems == []
    assert "Q1: correct." in nbformat.read(build / "right.ipynb", as_version=4).cells[-1].outputs[0].text
    (problem,) = run_one(wrong, PARAMETERS, build).problems
    assert "did not accept the reference answer: Q1: not yet: 4" in problem
    (problem,) = run_one(missing, PARAMETERS, build).problems
    assert "Q1: not answered yet." in problem


def test_strict_checks_end_with_the_run(tmp_path, monkeypatch):
    """The runner's kernel gets strict checks, the runner's process keeps its own environment: the test suite runs
    notebooks, then starts a student's JupyterLab, whose unanswered questions must not raise (CI failed on it)."""
    monkeypatch.delenv(STRICT, raising=False)
    monkeypatch.setenv(NOTEBOOK_ENV, "the caller's notebook")
    run_one(write(tmp_path, "right.ipynb", *quiz_cells(tmp_path, "q1 = 3")), PARAMETERS, tmp_path / "build")
    assert STRICT not in os.environ
    assert os.environ[NOTEBOOK_ENV] == "the caller's notebook"


def test_progress_bars_are_kept_as_their_final_text(tmp_path):
    loop = new_code_cell("from tqdm.auto import tqdm\nfor _ in tqdm(range(7), desc='epochs'):\n    pass")
    path = write(tmp_path, "progress.ipynb", loop)
    assert run_one(path, PARAMETERS, tmp_path / "build").problems == []
    executed = nbformat.read(tmp_path / "build" / "progress.ipynb", as_version=4)
    (output,) = executed.cells[-1].outputs
    assert output.data == {"text/plain": output.data["text/plain"]}
    assert output.data["text/plain"].startswith("epochs: 100%|##########| 7/7 [")
    assert "widgets" not in executed.metadata
