"""Per-assignment limits (``SandboxedExecute.assignment_limits`` in autograder/nbgrader_config.py): each assignment's
cell timeout, notebook budget, memory and CPU limits reach its kernels, and unlisted assignments keep the globals."""

import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets import TraitError
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from course_tools.grading.execute import SandboxedExecute
from course_tools.release import COURSE
from torchdoctor.manifest import load_manifest

HW1 = "hw1_dimensions"
REPORT_LIMITS = ("from resource import RLIMIT_DATA, RLIMIT_CPU, getrlimit\n"
                 "print(getrlimit(RLIMIT_DATA)[0] // 2**20, getrlimit(RLIMIT_CPU)[0])")


@pytest.fixture(scope="module")
def course_config() -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()


def run(cells: list[str], assignment: str, config: Config, folder) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    SandboxedExecute(config=config).preprocess(nb, {"metadata": {"path": str(folder)},
                                                    "nbgrader": {"assignment": assignment, "student": "s"}})
    return nb


def text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs)


def test_the_course_sets_hw1s_limits_and_unlisted_assignments_keep_the_global_ones(course_config):
    execute = SandboxedExecute(config=course_config)
    hw1 = execute.limits_for(HW1)
    assert set(hw1) == {"timeout", "notebook_timeout", "memory_mb", "cpu_seconds"}
    assert hw1["timeout"] < course_config.ExecutePreprocessor.timeout  # seconds, not the global 300 s
    assert hw1["notebook_timeout"] < execute.notebook_timeout
    assert execute.limits_for("not_listed") == {"timeout": course_config.ExecutePreprocessor.timeout,
                                                "notebook_timeout": execute.notebook_timeout}


def test_every_ready_assignment_has_its_own_limits(course_config):
    listed = course_config.SandboxedExecute.assignment_limits
    missing = [name for name in load_manifest().assignment_names() if name not in listed]
    assert not missing, f"set their limits in autograder/nbgrader_config.py (assignment_limits): {missing}"


@pytest.mark.parametrize(("limits", "message"), [
    ({"hw9": {"timout": 5}}, "unknown limit 'timout'; the limits are timeout, notebook_timeout, memory_mb, "
                             "cpu_seconds"),
    ({"hw9": {"memory_mb": 0}}, "['memory_mb'] must be a positive number, not 0"),
])
def test_a_misspelt_or_impossible_limit_is_refused_with_what_is_allowed(limits, message):
    with pytest.raises(TraitError, match="assignment_limits") as caught:
        SandboxedExecute(assignment_limits=limits)
    assert message in str(caught.value)


def test_the_kernel_gets_the_memory_and_cpu_limits_of_its_assignment(tmp_path):
    config = Config()
    config.SandboxedExecute.assignment_limits = {"big": {"memory_mb": 6144, "cpu_seconds": 900}}
    config.SandboxedKernelManager.memory_mb = 4096
    config.SandboxedKernelManager.cpu_seconds = 300
    assert text(run([REPORT_LIMITS], "big", config, tmp_path).cells[0]).split() == ["6144", "900"]
    assert text(run([REPORT_LIMITS], "other", config, tmp_path).cells[0]).split() == ["4096", "300"]


def test_an_endless_loop_in_hw1_costs_hw1s_cell_timeout_not_the_global_one(course_config, tmp_path):
    hw1 = SandboxedExecute(config=course_config).limits_for(HW1)
    started = time.monotonic()
    nb = run([REPORT_LIMITS, "while True:\n    pass", "print('graded on')"], HW1, course_config, tmp_path)
    elapsed = time.monotonic() - started
    assert text(nb.cells[0]).split() == [str(hw1["memory_mb"]), str(hw1["cpu_seconds"])]
    assert f"this cell ran past the time limit ({hw1['timeout']} s)" in text(nb.cells[1])
    assert text(nb.cells[2]) == "graded on\n"  # a new kernel went on after the loop
    assert elapsed < course_config.ExecutePreprocessor.timeout  # loosely: the loop cost hw1's timeout, not 300 s
