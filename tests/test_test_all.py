"""course_tools.test_all's summary helpers: the slowest tests read from a pytest log, the machine's CPU."""

import sys

import pytest

from course_tools.test_all import machine_cpu, part_environment, reference_seconds, slowest


def test_the_slowest_tests_are_read_from_the_durations_section_only():
    log = ("...\n============ slowest 15 durations ============\n12.30s call     tests/a.py::test_x\n"
           "0.50s setup    tests/b.py::test_y\n\n============ short test summary info ============\n1.00s not this\n")
    assert slowest(log) == ["12.30s call     tests/a.py::test_x", "0.50s setup    tests/b.py::test_y"]
    assert slowest("no durations here") == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_the_machines_busy_cpu_grows_while_this_process_works():
    before = machine_cpu()
    sum(i * i for i in range(3_000_000))
    after = machine_cpu()
    assert before and after and all(x >= 0 for x in before)
    assert after[0] > before[0] and after[1] >= before[1]


def test_the_parts_run_one_thread_per_process_unless_the_caller_chose(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = part_environment()
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert part_environment()["OMP_NUM_THREADS"] == "2"


def test_every_test_file_runs_in_exactly_one_part_and_the_chinese_check_is_a_part():
    from course_tools import test_all
    from course_tools.release import REPO

    groups = [test_all.DISTRIBUTED, test_all.CORPUS, test_all.GRADING]
    named = [path for group in groups for path in group]
    assert len(named) == len(set(named)), "a test file is in two parts"
    assert all((REPO / path).is_file() for path in named), "a part names a test file that does not exist"
    commands = test_all.parts("cpu")
    assert all(f"--ignore={path}" in commands["pytest"] for path in named)
    assert commands["i18n-check"][-2:] == ["course_tools.i18n", "check"]


def test_the_reference_workload_measures_cpu_time():
    assert 0 < reference_seconds() < 60
