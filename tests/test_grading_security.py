"""Hardened grading: no attack earns a point it does not deserve, honest controls keep theirs, and the verdict is
taken outside the student's kernel (course_tools/grading, tests/attack_corpus)."""

import os
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools.grading import attack_corpus
from course_tools.grading.verdict import compare, judge
from course_tools.release import REPO, nbgrader_env, solution_notebook

BENCHMARK = REPO / "benchmarks" / "autograde_speed.py"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    attacks = attack_corpus.load()
    return attacks, attack_corpus.grade(tmp_path_factory.mktemp("attacks"), attacks)


def test_the_corpus_has_every_attack_and_both_controls():
    attacks = {a.name: a for a in attack_corpus.load()}
    assert {"control_correct", "control_wrong"} <= set(attacks)
    assert not attacks["control_correct"].deserves and attacks["control_wrong"].deserves
    for name in ("patched_comparisons", "fake_eq", "read_hidden_tests", "write_gradebook", "network",
                 "deleted_test_cell", "emptied_test_cell", "stripped_test_cell", "kernel_exit", "endless_loop",
                 "memory_grab", "grader_environment", "forged_huge_number", "unreadable_messages",
                 "unknown_grade_cell", "symlinked_files", "huge_message",
                 "fill_host_disk"):
        assert name in attacks, name
        assert attacks[name].deserves or name == "output_flood", f"{name} must be set up to gain undeserved points"


def test_no_submission_gets_a_point_it_does_not_deserve(graded):
    attacks, result = graded
    found = attack_corpus.problems(attacks, result)
    assert not found, "\n".join(found)


def test_results_json_has_one_row_per_student_and_test(graded):
    attacks, result = graded
    rows = result["results"]["results"]
    assert len(rows) == 2 * len(attacks)
    assert {tuple(sorted(r)) for r in rows} == {("max", "message", "notebook", "passed", "points", "student", "test")}
    wrong = next(r for r in rows if r["student"] == "control_wrong" and r["test"] == "test_row_sums")
    assert (wrong["points"], wrong["max"], wrong["passed"]) == (1.5, 2.0, False)
    assert "one row: expected [10.0], got 10.0" in wrong["message"]
    assert result["results"]["protections"]["off"] == [] or os.geteuid() != 0


def test_the_gradebook_holds_exactly_one_submission_and_grade_row_each(graded):
    attacks, result = graded
    with Gradebook(f"sqlite:///{result['course'] / 'gradebook.db'}") as gb:
        submissions = gb.assignment_submissions(attack_corpus.ASSIGNMENT)
        assert sorted(s.student_id for s in submissions) == sorted(a.name for a in attacks)
        assert all(len(s.notebooks[0].grades) == 2 for s in submissions)


def test_feedback_shows_verdicts_but_no_hidden_test_source(graded):
    _, result = graded
    course = result["course"]
    env = dict(nbgrader_env(), PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", attack_corpus.ASSIGNMENT,
                    "--CourseDirectory.student_id=control_wrong"], cwd=course, env=env, check=True,
                   capture_output=True)
    html = (course / "feedback" / "control_wrong" / attack_corpus.ASSIGNMENT / "toy_guard.html").read_text()
    assert "one row: expected [10.0], got 10.0" in html
    for secret in ("BEGIN HIDDEN TESTS", "_observe_row_sums", "transposed"):
        assert secret not in html


def test_a_submitted_file_is_byte_identical_after_grading(graded):
    _, result = graded
    assert result["results"]["submitted_files_changed"] == []
    attacked = result["course"] / "submitted" / "control_correct" / "toy_guard" / "toy_guard.ipynb"
    assert nbformat.read(attacked, as_version=4).cells, "the write_gradebook attack must not have emptied it"


def test_slow_cells_are_cut_off_by_the_notebooks_time_budget(graded):
    _, result = graded
    nb = nbformat.read(result["course"] / "autograded" / "slow_cells" / "toy_guard" / "toy_guard.ipynb", as_version=4)
    assert [o.get("ename") for o in nb.cells[-1].outputs] == ["NotRun"]


def test_unreadable_kernel_messages_cost_their_own_cell_only(graded):
    _, result = graded
    path = result["course"] / "autograded" / "unreadable_messages" / "toy_guard" / "toy_guard.ipynb"
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nbformat.read(path, as_version=4).cells}
    assert [o.get("ename") for o in cells["double"].outputs] == ["ValueError"]  # invalid signature
    assert [o.get("ename") for o in cells["row_sums"].outputs] == ["RecursionError"]
    path = result["course"] / "autograded" / "huge_message" / "toy_guard" / "toy_guard.ipynb"
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nbformat.read(path, as_version=4).cells}
    # dropped unread; its connection then resets, so the cell's "idle" is usually lost too (CellTimeoutError)
    assert all(o.output_type == "error" and o.ename == "CellTimeoutError" for o in cells["double"].outputs)


def test_symlinked_files_reach_neither_the_kernel_nor_the_feedback(graded):
    _, result = graded
    autograded = result["course"] / "autograded" / "symlinked_files" / "toy_guard"
    assert sorted(p.name for p in autograded.iterdir()) == ["toy_guard.ipynb"]


def test_collect_copies_plain_files_only(tmp_path):
    """A student's symbolic link in the exchange's inbound folder must not become a copy of what it points to."""
    course = attack_corpus.make_course(tmp_path)
    exchange = tmp_path / "exchange"
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\nc.CollectApp.check_owner = False\n"
                     "c.ExchangeFactory.collect = 'course_tools.grading.collect.SafeCollect'\n")
    inbound = exchange / "torch-doctor" / "inbound" / "mallory+toy_guard+2026-11-30 01:00:00.000000 UTC"
    inbound.mkdir(parents=True)
    (inbound / "toy_guard.ipynb").write_text((course / "release" / "toy_guard" / "toy_guard.ipynb").read_text())
    (inbound / "timestamp.txt").write_text("2026-11-30 01:00:00.000000 UTC")
    (inbound / "notes.txt").symlink_to(course / "source" / "toy_guard" / "toy_guard.ipynb")
    (inbound / "grades").symlink_to(course / "gradebook.db")
    (inbound / "sources").symlink_to(course / "source")
    os.mkfifo(inbound / "pipe")
    env = dict(nbgrader_env(), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "collect", attack_corpus.ASSIGNMENT], cwd=course,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    submitted = course / "submitted" / "mallory" / attack_corpus.ASSIGNMENT
    assert sorted(p.name for p in submitted.iterdir()) == ["timestamp.txt", "toy_guard.ipynb"]


def test_the_kernels_environment_holds_nothing_of_the_graders():
    from course_tools.grading.zygote import kernel_environment

    env = kernel_environment({"PATH": "/usr/bin", "LC_ALL": "C", "JUPYTERHUB_API_TOKEN": "x", "HOME": "/home/grader",
                              "AWS_SECRET_ACCESS_KEY": "y", "TORCHDOCTOR_REFERENCES": "/tmp/r.json"})
    assert set(env) == {"PATH", "LC_ALL", "PYTHONPATH"}


def test_compare_takes_no_lookalike_for_the_real_thing():
    assert compare([1.0, 2.0], [1.0, 2.00001]) == []
    assert compare(3, True) and compare(True, 1) and compare(3, 3.0) and compare("a", ["a"])
    assert compare([1, 2], [1, 2, 3]) and compare({"a": 1}, {"a": 1, "b": 2})
    assert compare(1.0, 1) == [] and compare(float("nan"), float("nan")) == []
    assert compare([[1.0]], [[float("nan")]])
    assert compare(1.0, 10**400) and compare([1.0], [-(10**400)])  # no OverflowError: a failed check


def test_judge_accepts_one_record_only_and_alternatives_only_from_the_reference():
    reference = {"checks": {"x": "message"}, "alternatives": {"x": ["RuntimeError: message"]}}
    assert judge(reference, [{"checks": {"x": "message"}}], [])[0] == 1
    assert judge(reference, [{"checks": {"x": "RuntimeError: message"}}], [])[0] == 1
    forged = {"checks": {"x": "made up"}, "alternatives": {"x": ["made up"]}}
    assert judge(reference, [forged], [])[0] == 0
    assert judge(reference, [{"checks": {"x": "message"}}] * 2, [])[0] == 0
    assert judge(reference, [], ["NameError: name 'x' is not defined"]) == (
        0, ["the test did not finish: NameError: name 'x' is not defined"])


def test_judge_counts_missing_checks_as_failed_and_shows_what_came_instead():
    reference = {"checks": {"a": 1, "b": [1.0, 2.0]}}
    observed = {"checks": {"a": 1, "b raised": "RuntimeError: view size is not compatible"}}
    fraction, lines = judge(reference, [observed], [])
    assert fraction == 0.5
    assert lines == ["b raised: 'RuntimeError: view size is not compatible'",
                     "b: expected [1.0, 2.0], observed nothing"]
    padded = {"checks": {"a": 1, "x": 0, "y": 0, "z": 0}}  # extra observations earn nothing
    assert judge(reference, [padded], [])[0] == 0.5


def test_without_the_privileged_protections_grading_still_works_and_says_what_is_off(tmp_path):
    """What a laptop without root gets: resource limits only, and a plain warning naming what is off."""
    course = attack_corpus.make_course(tmp_path)
    folder = course / "submitted" / "solution" / attack_corpus.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(solution_notebook(attack_corpus.ASSIGNMENT, course), folder / f"{attack_corpus.ASSIGNMENT}.ipynb")
    env = dict(nbgrader_env(), PYTHONPATH=str(REPO), TORCHDOCTOR_SANDBOX_DISABLE="all")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", attack_corpus.ASSIGNMENT], cwd=course,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for protection in ("network", "filesystem", "unprivileged_user"):
        assert f"OFF: {protection}" in proc.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = gb.find_submission_notebook(attack_corpus.ASSIGNMENT, attack_corpus.ASSIGNMENT, "solution").grades
        assert sorted((g.name, g.score) for g in grades) == [("test_double", 2.0), ("test_row_sums", 2.0)]


def test_the_benchmark_prints_both_figures_and_the_speed_up():
    proc = subprocess.run([sys.executable, str(BENCHMARK), "--limit", "1"], capture_output=True, text=True,
                          env=nbgrader_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for figure in ("stock nbgrader autograde", "hardened autograde", "speed-up:", "floor per submission"):
        assert figure in proc.stdout  # the figures themselves are not asserted: timings are not tests


def test_the_course_config_turns_every_protection_on():
    """What plain `nbgrader autograde` / `collect` in autograder/ read: the hardened pipeline and the safe collect."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "autograder")).load_config()
    assert config.ExchangeFactory.collect == "course_tools.grading.collect.SafeCollect"
    assert "course_tools.grading.execute.SandboxedExecute" in config.Autograde.autograde_preprocessors
    assert "course_tools.grading.verdict.Verdicts" in config.Autograde.autograde_preprocessors
    assert "course_tools.grading.restore.RestoreCells" in config.Autograde.sanitize_preprocessors
