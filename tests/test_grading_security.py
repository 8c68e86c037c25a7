"""Hardened grading: no attack earns a point it does not deserve, honest controls keep theirs, and the verdict is
taken outside the student's kernel (course_tools/grading, tests/attack_corpus)."""

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools.grading import attack_corpus
from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.sandbox import ROOT_ROUTE, USERNS_ROUTE, Protections, probe
from course_tools.grading.verdict import compare, judge
from course_tools.grading.zygote import ALLOW_UNPROTECTED_ENV, DISABLE_ENV, refusal, unprotected_refusal
from course_tools.release import REPO, nbgrader_env, solution_notebook

BENCHMARK = REPO / "benchmarks" / "autograde_speed.py"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    line = unprotected_refusal()
    if line:  # neither root nor unprivileged user namespaces: grading refuses, as it must (tested below)
        pytest.skip(line)
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
                 "fill_host_disk", "escape_the_jail", "signal_everything"):
        assert name in attacks, name
        assert attacks[name].deserves or name == "output_flood", f"{name} must be set up to gain undeserved points"


def test_a_score_not_deserved_is_reported_with_what_the_cell_showed(tmp_path):
    """Where an attack scores other than it deserves, the report quotes the grade cell: the verdict, the error, the
    streams (the CI log of a lost point then says why, with no rerun)."""
    verdict = {"score": 0, "max": 1, "passed": False, "message": "the cell ran past its time limit"}
    cell = nbformat.v4.new_code_cell("assert flood()", metadata={"nbgrader": {"grade_id": "test_a", "grade": True},
                                                                 "torchdoctor": {"verdict": verdict}})
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="slow\n"),
                    nbformat.v4.new_output("error", ename="CellTimeoutError", evalue="8 s", traceback=[])]
    folder = tmp_path / "autograded" / "flooder" / attack_corpus.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), folder / f"{attack_corpus.ASSIGNMENT}.ipynb")
    shown = attack_corpus.cell_outcome(tmp_path, "flooder", "test_a")
    assert "the cell ran past its time limit" in shown and "CellTimeoutError: 8 s" in shown, shown
    assert "stderr: 'slow\\n'" in shown, shown
    assert attack_corpus.cell_outcome(tmp_path, "flooder", "test_b").startswith("nothing: no cell 'test_b'")
    assert attack_corpus.cell_outcome(tmp_path, "nobody", "test_a").startswith("nothing: ")


def test_no_submission_gets_a_point_it_does_not_deserve(graded):
    attacks, result = graded
    found = attack_corpus.problems(attacks, result)
    assert not found, "\n".join(found)


def test_results_json_has_one_row_per_student_and_test(graded):
    attacks, result = graded
    rows = result["results"]["results"]
    assert len(rows) == 2 * len(attacks)
    keys = ("judged_in_kernel", "max", "message", "notebook", "passed", "points", "student", "test")
    assert {tuple(sorted(r)) for r in rows} == {keys}
    assert not any(r["judged_in_kernel"] for r in rows)  # the course's hidden tests are all judged by the grader
    wrong = next(r for r in rows if r["student"] == "control_wrong" and r["test"] == "test_row_sums")
    assert (wrong["points"], wrong["max"], wrong["passed"]) == (1.5, 2.0, False)
    assert "one row: expected [10.0], got 10.0" in wrong["message"]
    protections = Protections(**result["results"]["protections"])
    assert protections.network and protections.filesystem and protections.processes and protections.limits
    if os.geteuid() == 0:
        assert protections.route == ROOT_ROUTE and protections.unprivileged_user and protections.off == []
    else:  # the only protection a user namespace cannot give: a uid of the kernel's own
        assert protections.route == USERNS_ROUTE and [o.split(":")[0] for o in protections.off] == ["unprivileged_user"]


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


def test_an_output_flood_is_cut_at_the_cap_and_says_so(graded):
    _, result = graded
    path = result["course"] / "autograded" / "output_flood" / "toy_guard" / "toy_guard.ipynb"
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nbformat.read(path, as_version=4).cells}
    streams = [o.text for o in cells["double"].outputs if o.output_type == "stream"]
    kept = sum(len(text) for text in streams)
    assert 0 < kept <= SandboxedExecute.max_output_bytes.default_value, f"{kept} characters kept of 4 MB printed"
    assert streams[-1] == "\n[output truncated by the grader]\n"


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


def test_judge_weighs_checks_by_the_references_weights_only():
    reference = {"checks": {"lesson": 1, "form": 2}, "weights": {"lesson": 3.0}}
    assert judge(reference, [{"checks": {"lesson": 1, "form": 0}}], [])[0] == 0.75
    assert judge(reference, [{"checks": {"lesson": 0, "form": 2}}], [])[0] == 0.25
    forged = {"checks": {"lesson": 0, "form": 2}, "weights": {"form": 100.0}}
    assert judge(reference, [forged], [])[0] == 0.25


def test_a_choice_that_lists_every_option_earns_nothing():
    reference = {"checks": {"bugs": ["a", "b", "c"]}, "choices": ["bugs"]}

    def score(names):
        return judge(reference, [{"checks": {"bugs": names}}], [])[0]

    assert score(["a", "b", "c"]) == 1
    assert score(["a", "b"]) == 2 / 3  # a careful student who found two of three
    assert score(["a", "b", "c", "d", "e", "f"]) == 0  # every option named: three wrong cost three right
    assert score(["a", "b", "d"]) == 1 / 3
    assert score("not a set of names: str") == 0
    forged = {"checks": {"bugs": ["a"]}, "choices": []}
    assert judge({"checks": {"bugs": ["a", "b"]}}, [forged], [])[0] == 0  # choices only from the reference


def _autograde_the_solution(tmp_path, **env_extra):
    course = attack_corpus.make_course(tmp_path)
    folder = course / "submitted" / "solution" / attack_corpus.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(solution_notebook(attack_corpus.ASSIGNMENT, course), folder / f"{attack_corpus.ASSIGNMENT}.ipynb")
    env = {k: v for k, v in nbgrader_env().items() if k not in (DISABLE_ENV, ALLOW_UNPROTECTED_ENV)}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", attack_corpus.ASSIGNMENT], cwd=course,
                          env=dict(env, PYTHONPATH=str(REPO), **env_extra), capture_output=True, text=True)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            nb = gb.find_submission_notebook(attack_corpus.ASSIGNMENT, attack_corpus.ASSIGNMENT, "solution")
            scores = sorted((g.name, g.score) for g in nb.grades)
        except Exception:  # noqa: BLE001 -- MissingEntry: nothing was graded
            scores = []
    return proc, scores


def test_without_namespaces_grading_refuses_unless_allowed(tmp_path):
    """A machine with neither root nor unprivileged user namespaces, simulated: grading stops, saying why."""
    proc, scores = _autograde_the_solution(tmp_path, **{DISABLE_ENV: "all"})
    assert proc.returncode != 0
    assert "Grading refuses to run student code unprotected: network, filesystem, processes isolation" in proc.stderr
    assert f"{ALLOW_UNPROTECTED_ENV}=1" in proc.stderr
    assert all(score == 0 for _, score in scores)


def test_allowed_unprotected_grading_still_works_and_says_what_is_off(tmp_path):
    """What the instructor who opted in gets: resource limits only, and a plain warning naming what is off."""
    proc, scores = _autograde_the_solution(tmp_path, **{DISABLE_ENV: "all", ALLOW_UNPROTECTED_ENV: "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sandbox protections on: limits\n" in proc.stderr
    for protection in ("network", "filesystem", "processes", "unprivileged_user"):
        assert f"OFF: {protection}" in proc.stderr
    assert scores == [("test_double", 2.0), ("test_row_sums", 2.0)]


def test_the_refusal_needs_every_namespaced_protection_and_yields_to_the_opt_in(monkeypatch):
    monkeypatch.delenv(ALLOW_UNPROTECTED_ENV, raising=False)
    full = Protections(network=True, filesystem=True, unprivileged_user=False, processes=True, route=USERNS_ROUTE)
    assert refusal(full) is None
    no_pid = Protections(network=True, filesystem=True, unprivileged_user=True, processes=False, route=ROOT_ROUTE)
    assert "unprotected: processes isolation is off" in refusal(no_pid)
    monkeypatch.setenv(ALLOW_UNPROTECTED_ENV, "1")
    assert refusal(no_pid) is None


def test_without_root_the_user_namespace_route_is_taken_and_disabling_it_turns_everything_off():
    """As root the kernels' namespaces come from root's privileges; as an ordinary user from a user namespace,
    where the machine allows one. With that route disabled (a machine that refuses user namespaces), an ordinary
    user gets no namespaced protection, and each OFF line says why and what it means."""
    found = probe(frozenset({"user_namespace"}))
    if os.geteuid() == 0:
        assert found.route == ROOT_ROUTE and found.network and found.filesystem and found.processes
        return
    assert found.route == "none" and not (found.network or found.filesystem or found.processes)
    assert len(found.off) == 4 and all("user namespaces are disabled by configuration" in o for o in found.off[:3])
    allowed = probe()
    if allowed.route == "none":
        pytest.skip("this machine refuses unprivileged user namespaces: " + allowed.off[0])
    assert allowed.route == USERNS_ROUTE and allowed.network and allowed.filesystem and allowed.processes
    assert not allowed.unprivileged_user and "user namespace" in allowed.summary()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        except OSError:
            children = []
        found += children
        todo += children
    return found


def test_a_killed_kernel_leaves_no_process_behind(tmp_path):
    """What a kernel spawned, even detached in a session of its own, dies when the grader kills the kernel: by its
    PID namespace (as root, by uid too where there is none)."""
    if unprotected_refusal():
        pytest.skip(unprotected_refusal())
    from course_tools.grading.kernel import SandboxedKernelManager

    async def spawn_and_kill() -> list[int]:
        km = SandboxedKernelManager()
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            code = "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)"
            await kc.execute_interactive(code, timeout=60)
            spawned = _descendants(km.provisioner.pid)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        return spawned

    spawned = asyncio.run(spawn_and_kill())
    assert len(spawned) >= 2, spawned  # the kernel and its sleep (the keeper's descendants)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in spawned if _alive(p)]


def test_the_benchmark_prints_both_figures_and_the_speed_up():
    proc = subprocess.run([sys.executable, str(BENCHMARK), "--submissions", "1", "--workers", "1"],
                          capture_output=True, text=True, env=nbgrader_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for figure in ("stock nbgrader autograde", "hardened autograde", "speed-up:", "notebook execution in a warm kernel",
                   "fixed cost of the run", "references", "export", "per submission per worker", "capacity for"):
        assert figure in proc.stdout  # the figures themselves are not asserted: timings are not tests


def test_the_course_config_turns_every_protection_on():
    """What plain `nbgrader autograde` / `collect` in autograder/ read: the hardened pipeline and the safe collect."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "autograder")).load_config()
    assert config.ExchangeFactory.collect == "course_tools.grading.collect.SafeCollect"
    assert "course_tools.grading.execute.SandboxedExecute" in config.Autograde.autograde_preprocessors
    assert "course_tools.grading.verdict.Verdicts" in config.Autograde.autograde_preprocessors
    assert "course_tools.grading.restore.RestoreCells" in config.Autograde.sanitize_preprocessors
