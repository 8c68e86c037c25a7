"""Hidden tests observe with torchdoctor.observe and the grader decides (course_tools/grading): every hidden test of
every ready assignment yields exactly one record on the reference solution, a test that yields none fails rather
than falling back to the student's kernel, the grading package imports one way, and nbgrader upgrades that break
what grading relies on are caught."""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbgrader.converters import Autograde, GenerateFeedback
from nbgrader.converters.base import NbGraderException
from traitlets.config import Config, PyFileConfigLoader
from traitlets.utils.importstring import import_item

from course_tools.grading import compat, references
from course_tools.grading.verdict import Verdicts
from torchdoctor import observe
from torchdoctor.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent
COURSE = REPO / "autograder"
GRADING = REPO / "course_tools" / "grading"
# nbgrader's default preprocessors the course's configuration replaces (autograder/nbgrader_config.py says why):
# every other default must still be configured, in nbgrader's order.
REPLACED = {
    "nbgrader.preprocessors.execute.Execute": "course_tools.grading.execute.SandboxedExecute",
}


def course_config() -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()


def dotted(item) -> str:
    cls = import_item(item) if isinstance(item, str) else item
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_grader_reads_the_mime_type_the_helpers_display():
    assert observe.MIME == references.OBSERVED_MIME


# -- the helpers describe values as JSON data and decide nothing ------------------------------------------------


def test_helpers_describe_values_as_json_data():
    import json

    import torch

    class Fake(torch.Tensor):
        pass

    assert observe.tensor(torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]])) == [[1.0, "nan"], ["inf", 2.0]]
    assert observe.tensor(torch.ones(2).as_subclass(Fake)) == "not a tensor: Fake"
    assert observe.shape(observe.data(2, 3, seed=1).t()) == [3, 2]
    assert observe.integer(torch.tensor(3).item()) == 3 and observe.integer(True) == "a bool: True"
    assert observe.numbers((1, float("-inf"))) == [1.0, "-inf"]
    rec = observe.Record(partial=True)
    rec.check("boom", lambda: 1 / 0)
    rec.accept("boom", ["anything"])
    assert json.loads(json.dumps(rec.as_json(), allow_nan=False)) == {
        "checks": {"boom": "raised ZeroDivisionError: division by zero"}, "alternatives": {"boom": ["anything"]},
        "partial": True}
    rec.check("a tensor left in a list", lambda: [torch.ones(1)])  # costs its own check, not the whole record
    assert rec.checks["a tensor left in a list"] == "not plain data: Object of type Tensor is not JSON serializable"


def test_a_record_carries_weights_requirements_and_choices_for_the_grader():
    rec = observe.Record(partial=True)
    rec.check("lesson", lambda: 1, weight=3, requirements=["R2.1", "R1.4"])
    rec.value("form", 2)
    rec.choice("bugs", lambda: {"b", "a"}, requirements=["R4.1"])
    rec.choice("not names", lambda: ["a", 1])
    assert rec.as_json() == {
        "checks": {"lesson": 1, "form": 2, "bugs": ["a", "b"], "not names": "not a set of names: list"},
        "weights": {"lesson": 3.0}, "requirements": {"lesson": ["R1.4", "R2.1"], "bugs": ["R4.1"]},
        "choices": ["bugs", "not names"], "partial": True}
    with pytest.raises(ValueError, match="positive number"):
        rec.check("free", lambda: 1, weight=0)


def test_parameters_compare_whatever_the_order_of_definition():
    from torch import nn

    class ConvFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(1, 2, 3), nn.Linear(8, 3)

    class FcFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.conv = nn.Linear(8, 3), nn.Conv2d(1, 2, 3)

    a, b = observe.canonical(ConvFirst()), observe.canonical(FcFirst())
    assert observe.parameter_shapes(a) == observe.parameter_shapes(b)
    assert observe.tensor(a.fc.weight) == observe.tensor(b.fc.weight)
    assert observe.tensor(a.conv.bias) == observe.tensor(b.conv.bias)


# -- every hidden test yields one record on the reference solution -----------------------------------------------


@pytest.mark.parametrize("assignment", load_manifest().assignment_names())
def test_every_hidden_test_yields_exactly_one_record_on_the_reference_solution(assignment):
    path = COURSE / "source" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    hidden = {c.metadata.nbgrader["grade_id"] for c in nb.cells
              if references.is_test_cell(c) and references.has_hidden_tests(c)}
    assert hidden, f"{assignment} has no hidden tests"
    found = references.reference_run(path, course_config())
    records = found.records
    assert not found.problems, f"{path.relative_to(REPO)}:\n" + "\n".join(found.problems)
    assert not found.in_kernel, f"{found.in_kernel} display no record (forgotten Record.show()?): the course's own " \
                                "hidden tests are never judged in the student's kernel"
    assert hidden <= set(records)
    assert all(type(records[g].get("checks")) is dict and records[g]["checks"] for g in hidden)


def _test_cell(grade_id: str, source: str) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": grade_id, "points": 1, "schema_version": 3}})


def test_the_reference_run_uses_the_helpers_in_the_sandbox_and_reports_a_test_without_record(tmp_path):
    """torchdoctor.observe is importable in the confined kernel, and a test with hidden tests but no record (stock
    asserts, or a forgotten ``show()``) is reported as judged in the kernel (and grading does not abort on it)."""
    nb = new_notebook(cells=[
        _test_cell("observed", "### BEGIN HIDDEN TESTS\nfrom torchdoctor.observe import Record, data, shape\n"
                               "rec = Record()\nrec.check('shape', lambda: shape(data(2, 3, seed=0).t()))\n"
                               "rec.show()\n### END HIDDEN TESTS"),
        _test_cell("forgotten", "### BEGIN HIDDEN TESTS\nfrom torchdoctor.observe import Record\n"
                                "rec = Record()\nrec.value('x', 1)\n### END HIDDEN TESTS"),
        _test_cell("visible_only", "assert 1 + 1 == 2"),
    ])
    path = tmp_path / "toy.ipynb"
    nbformat.write(nb, path)
    found = references.reference_run(path, Config())
    assert found.records == {"observed": {"checks": {"shape": [3, 2]}}}
    assert found.in_kernel == ["forgotten"] and found.problems == []
    assert found.failed == {}  # grading goes on; the kernel judges that cell (next test)


def test_a_hidden_test_without_reference_record_is_judged_in_the_kernel_and_marked_so():
    """Stock nbgrader hidden asserts: the kernel's outcome stands (an error scores 0, else full points), and the
    cell, its verdict and so results.json say it was not protected."""
    verdicts = Verdicts()
    verdicts._references = references.References(in_kernel=["asserts"])
    passed = _test_cell("asserts", "### BEGIN HIDDEN TESTS\nassert f(2) == 4\n### END HIDDEN TESTS")
    passed.outputs = [new_output("stream", name="stdout", text="all good\n")]
    passed, _ = verdicts.preprocess_cell(passed, {}, 0)
    assert [o.output_type for o in passed.outputs] == ["stream", "stream"]
    assert "judged in the student's kernel: not protected against tampering" in passed.outputs[1].text
    assert passed.metadata.torchdoctor.verdict == {"score": 1.0, "max": 1.0, "passed": True,
                                                   "message": references.IN_KERNEL, "judged_in_kernel": True}
    failed = _test_cell("asserts", "### BEGIN HIDDEN TESTS\nassert f(2) == 4\n### END HIDDEN TESTS")
    failed.outputs = [new_output("error", ename="AssertionError", evalue="", traceback=[])]
    failed, _ = verdicts.preprocess_cell(failed, {}, 0)
    assert failed.outputs[0].output_type == "error" and failed.metadata.torchdoctor.verdict["score"] == 0
    visible = _test_cell("visible_only", "assert True")
    visible.outputs = []
    assert verdicts.preprocess_cell(visible, {}, 1)[0].outputs == []  # visible asserts: nbgrader's verdict


# -- the grading package reads as a one-way chain --------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    """The course_tools.grading modules a module imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "course_tools.grading":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_tools.grading."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("course_tools.grading.")}
    return found - {path.stem}


def test_the_grading_package_imports_one_way():
    """Each module imports only modules listed above it in the package's docstring: no cycle, and
    ``verdict`` -> ``references``, never back."""
    import course_tools.grading

    order = re.findall(r"^- ``(\w+)``:", course_tools.grading.__doc__, re.MULTILINE)
    modules = sorted(p.stem for p in GRADING.glob("*.py") if p.stem != "__init__")
    assert sorted(order) == modules, "list every module of course_tools/grading in its __init__ docstring"
    upward = [f"{module} imports {target}" for i, module in enumerate(order)
              for target in sorted(_imports(GRADING / f"{module}.py")) if target not in order[:i]]
    assert not upward, "imports against the order of course_tools/grading/__init__.py: " + "; ".join(upward)


# -- nbgrader and Jupyter upgrades fail loudly -----------------------------------------------------------------


@pytest.mark.parametrize(("converter", "trait"), [
    (Autograde, "sanitize_preprocessors"), (Autograde, "autograde_preprocessors"), (GenerateFeedback, "preprocessors"),
])
def test_the_configured_preprocessors_keep_nbgraders_defaults(converter, trait):
    defaults = [dotted(c) for c in converter.class_traits()[trait].default()]
    configured = [dotted(name) for name in course_config()[converter.__name__][trait]]
    expected = [REPLACED.get(name, name) for name in defaults]
    kept = [name for name in configured if name in expected]
    where = f"{converter.__name__}.{trait}"
    assert kept == expected, f"{where}: nbgrader's defaults are {defaults}; configured {configured}"
    for original, replacement in REPLACED.items():
        assert issubclass(import_item(replacement), import_item(original))


def test_the_preprocessor_lists_follow_nbgraders_defaults(monkeypatch):
    """The lists are derived from nbgrader's defaults when the configuration loads: a default a new nbgrader adds
    is graded with, and one it removes that ours hang on stops the configuration from loading."""
    from nbgrader.preprocessors import ClearOutput

    class NewDefault(ClearOutput):
        pass

    trait = Autograde.class_traits()["autograde_preprocessors"]
    monkeypatch.setattr(trait, "default_value", [*trait.default(), NewDefault])
    configured = course_config().Autograde.autograde_preprocessors
    assert configured[-1].endswith(".NewDefault") and "course_tools.grading.verdict.Verdicts" in configured
    monkeypatch.setattr(trait, "default_value", [ClearOutput])
    with pytest.raises(ValueError, match="no longer has"):
        course_config()


def test_verdicts_run_after_clear_metadata_so_results_keep_them():
    configured = [dotted(n) for n in course_config().Autograde.autograde_preprocessors]
    clear = configured.index("nbconvert.preprocessors.clearmetadata.ClearMetadataPreprocessor")
    assert configured.index("course_tools.grading.verdict.Verdicts") == clear + 1


def test_grading_runs_on_the_pinned_jupyter_stack():
    assert compat.problems() == []
    assert dotted(course_config().Autograde.exporter_class) == "course_tools.grading.compat.CheckedExporter"


def test_assignment_templates_are_stamped_with_nbgraders_schema_version_without_running_alembic(tmp_path, monkeypatch):
    import os
    import sqlite3
    import sys

    from nbgrader.api import Gradebook, get_alembic_version

    from course_tools.grading import writer

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    assert writer.alembic_head() == get_alembic_version()  # nbgrader's answer, from its `alembic heads` process
    with Gradebook(f"sqlite:///{tmp_path / 'course.db'}", "c") as gb:
        gb.update_or_create_assignment("ps1")
        gb.update_or_create_notebook("p1", "ps1")
    monkeypatch.setattr("subprocess.Popen", None)  # no process at all, alembic's included
    writer.assignment_template(f"sqlite:///{tmp_path / 'course.db'}", "c", "ps1", tmp_path / "template.db")
    stamped = sqlite3.connect(tmp_path / "template.db").execute("SELECT version_num FROM alembic_version").fetchall()
    assert stamped == [(writer.alembic_head(),)]
    with Gradebook(f"sqlite:///{tmp_path / 'template.db'}", "c") as gb:
        assert [n.name for n in gb.find_assignment("ps1").notebooks] == ["p1"]


def test_grading_refuses_to_start_when_an_overridden_private_method_is_gone(monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.delattr(NotebookClient, "_async_handle_timeout")
    line = compat.refusal()
    assert line is not None and "\n" not in line
    assert "has no NotebookClient._async_handle_timeout" in line and "make setup" in line
    with pytest.raises(NbGraderException, match="Grading refuses to start"):
        compat.CheckedExporter()


def test_grading_refuses_to_start_when_an_overridden_private_method_changed(monkeypatch):
    from jupyter_client.manager import AsyncKernelManager

    async def launch(self, kernel_cmd, extra, **kw):  # a new positional parameter
        return None

    monkeypatch.setattr(AsyncKernelManager, "_async_launch_kernel", launch)
    assert any("changed AsyncKernelManager._async_launch_kernel" in p for p in compat.problems())
