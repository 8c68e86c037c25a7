"""The converter of stock hidden asserts into observed tests (course_tools.grading.observe_asserts)."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from course_tools.grading.observe_asserts import convert_cell, main
from course_tools.grading.verdict import judge

STOCK = '''assert square(2) == 4
### BEGIN HIDDEN TESTS
import torch
for n in (3, -1):
    assert square(n) == n * n, "wrong square"
assert 9 == square(3)
assert torch.equal(square(torch.ones(2)), torch.ones(2))
### END HIDDEN TESTS
'''


def record_of(cell_source, square):
    """Run a converted cell's hidden block the way a kernel would, and return the record it built."""
    hidden = cell_source.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
    namespace = {"square": square}
    exec(compile(hidden, "<hidden>", "exec"), namespace)
    return namespace["_td_record"].as_json()


def test_asserts_become_observations_the_grader_compares_with_the_reference():
    source, count = convert_cell(STOCK)
    assert count == 3 and source.startswith("assert square(2) == 4\n")  # the visible part is left alone
    reference = record_of(source, lambda x: x * x)
    assert reference["checks"]["line 4: square(n) == n * n"] == [9.0, 9.0]
    assert reference["checks"]["line 4: square(n) == n * n #2"] == [1.0, 1.0]  # each loop turn a check of its own
    assert reference["checks"]["line 5: 9 == square(3)"] == [9.0, 9.0]  # both sides, whichever holds the student's
    assert judge(reference, [record_of(source, lambda x: x * x)], []) == (1.0, [])
    fraction, lines = judge(reference, [record_of(source, lambda x: x * 3)], [])
    assert fraction < 1 and any("square(n) == n * n" in line for line in lines)


def test_a_cell_that_already_observes_or_has_no_hidden_block_is_left_alone():
    observed = "### BEGIN HIDDEN TESTS\nfrom torchdoctor.observe import Record\n### END HIDDEN TESTS"
    assert convert_cell(observed) == (observed, 0)
    assert convert_cell("assert f(1) == 2") == ("assert f(1) == 2", 0)


def test_the_command_writes_a_new_notebook_and_leaves_the_source(tmp_path, capsys):
    source = tmp_path / "ps1.ipynb"
    cell = new_code_cell(STOCK, metadata={"nbgrader": {"grade": True, "grade_id": "test_square", "points": 1}})
    nbformat.write(new_notebook(cells=[cell]), source)
    before = source.read_bytes()
    assert main([str(source)]) == 0
    assert source.read_bytes() == before
    written = nbformat.read(tmp_path / "ps1.observed.ipynb", as_version=4)
    assert "_td_record.show()" in written.cells[0].source
    assert "test_square: 3 assert(s) now observed" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.ipynb")]) == 2
