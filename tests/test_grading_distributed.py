"""Distributed grading (course_tools/grading/engine.py, writer.py): on an existing Dask cluster with a PostgreSQL
gradebook, the scores the local engine with SQLite must give (tests/test_grading_corpus.py); a lost worker's
submissions graded elsewhere, once; a submission that keeps killing its workers reported ungraded; one gradebook
writer that drops duplicate and late results; nothing left running or mounted on the workers.

A private PostgreSQL (initdb and pg_ctl in a temporary folder) and a Dask scheduler with two worker processes are
started here and always stopped (course_tools/grading_cluster.py). Slow: it grades the attack corpus and a
representative part of the hw1 corpus on the cluster; `make test` runs it as a part of its own.

The Dask engine is checked on ``representative(hw1 corpus)``, not on all of it: tests/test_grading_corpus.py already
grades every submission of every corpus on the local engine, and what an engine can get wrong (where and how a
notebook runs, how its bundle comes back and is written to the gradebook) shows on one submission of each kind of
outcome as well as on all of them: full marks, zero, each grade cell failed, each partial credit. The subset is chosen
by a rule (below), so it follows the corpus as the corpus changes, and the test checks that it still covers every
grade cell.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools import grading_corpus
from course_tools.grading import attack_corpus, autograde, engine
from course_tools.grading.writer import Bundle, GradebookWriter
from course_tools.grading.zygote import unprotected_refusal
from course_tools.grading_cluster import dask_cluster, postgres_bin, private_postgres

HW1 = "hw1_dimensions"
POISON = "poison"


@pytest.fixture(scope="module", autouse=True)
def protected():
    line = unprotected_refusal()
    if line:
        pytest.skip(line)


# The services' folders are not pytest's tmp_path: a pytest session started meanwhile on the same machine prunes
# older sessions' folders, a database's included.
@pytest.fixture(scope="module")
def postgres():
    if postgres_bin() is None:
        pytest.fail("PostgreSQL is not installed (make test installs it as root: apt-get install postgresql)")
    with tempfile.TemporaryDirectory(prefix="td-pg-") as folder, private_postgres(Path(folder)) as pg:
        yield pg


@pytest.fixture(scope="module")
def cluster():
    # One worker death per submission is allowed: the poison submission is given up after its second kill.
    with tempfile.TemporaryDirectory(prefix="td-dask-") as folder, dask_cluster(
            Path(folder), workers=2, env={engine.POISON_ENV: POISON},
                      scheduler_env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
                                     "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}) as processes:
        yield processes


def representative(submissions: list[grading_corpus.Submission]) -> list[grading_corpus.Submission]:
    """One submission of each kind of outcome, in corpus order: the solution and the starter as they are, every
    submission that earns partial credit, for each grade cell lost the first submission that loses it alone (else
    the first that loses it), the one that loses the most cells without losing all, and the first other correct
    fix."""
    chosen: set[str] = set()
    some = [s for s in submissions if s.loses != "all"]
    chosen |= {s.name for s in submissions if not s.cells}  # the solution and the starter
    chosen |= {s.name for s in submissions if s.scores}
    for cell in sorted({c for s in some for c in s.loses}):
        losers = [s for s in some if cell in s.loses]
        chosen.add(next((s for s in losers if list(s.loses) == [cell]), losers[0]).name)
    if some:
        chosen.add(max(some, key=lambda s: len(s.loses)).name)
    chosen |= {s.name for s in [next((s for s in some if s.cells and not s.loses and not s.scores), None)] if s}
    return [s for s in submissions if s.name in chosen]


def test_the_representative_submissions_cover_every_outcome():
    submissions = grading_corpus.load_corpus(HW1)
    chosen = representative(submissions)
    assert len(chosen) < len(submissions) / 2
    names = {s.name for s in chosen}
    assert {s.name for s in submissions if s.scores} <= names
    assert ("solution", {}, []) in [(s.base, s.cells, s.loses) for s in chosen]
    assert ("release", {}, "all") in [(s.base, s.cells, s.loses) for s in chosen]
    lost = {c for s in submissions if s.loses != "all" for c in s.loses}
    assert lost == {c for s in chosen if s.loses != "all" for c in s.loses}


def _dask(cluster) -> tuple[str, ...]:
    return ("--engine", "dask", "--scheduler", cluster.address)


def _worker_states(cluster) -> dict:
    from distributed import Client

    with Client(cluster.address, timeout="30s") as client:
        return client.run(engine.worker_state)


def test_hw1_corpus_on_dask_with_postgres_gets_the_scores_it_deserves(tmp_path, postgres, cluster):
    """Graded on the Dask cluster with the PostgreSQL gradebook only: the local engine with SQLite grades the whole
    corpus in tests/test_grading_corpus.py against the same expectations (it was graded locally again here until
    make test had to fit in 30 minutes). The results file agrees with the gradebook row by row."""
    submissions = representative(grading_corpus.load_corpus(HW1))
    url = postgres.database("hw1")
    distributed = grading_corpus.grade(HW1, submissions, tmp_path / "dask", args=_dask(cluster), db_url=url)
    every_cell = set(next(iter(distributed.values())))
    assert every_cell == {c for s in submissions if s.loses != "all" for c in s.loses}, (
        "a grade cell no representative submission loses: the corpus or representative() must change")
    found = [p for s in submissions for p in grading_corpus.problems(s, distributed[s.name])]
    assert not found, "\n".join(found)
    results = json.loads((tmp_path / "dask" / "course" / "results" / f"{HW1}.json").read_text())
    rows = {(r["student"], r["test"]): (r["points"], r["max"]) for r in results["results"]}
    assert rows == {(s, cell): score for s, cells in distributed.items() for cell, score in cells.items()}
    assert all(r["passed"] == (r["points"] == r["max"]) and not r["judged_in_kernel"] for r in results["results"])
    assert (results["ungraded"], results["submitted_files_changed"], results["reference_problems"]) == ([], [], [])
    grades = (tmp_path / "dask" / "course" / "grades.csv").read_text().splitlines()
    assert len(grades) == 1 + len(submissions)  # nbgrader export read the PostgreSQL gradebook
    states = _worker_states(cluster)
    assert all(not s["children"] and not s["mounts"] for s in states.values()), states


def test_attack_corpus_on_dask_with_postgres_gets_what_each_attack_deserves(tmp_path, postgres, cluster):
    """The expectations the local engine meets (tests/test_grading_security.py grades the same corpus locally with
    SQLite): each attack's deserved scores and reported tampering, nothing ungraded or changed, no connection out.
    The corpus is not graded locally again here (it was, until make test had to fit in 30 minutes)."""
    attacks = attack_corpus.load()
    distributed = attack_corpus.grade(tmp_path / "dask", attacks, args=_dask(cluster),
                                      db_url=postgres.database("attacks"))
    assert not attack_corpus.problems(attacks, distributed)
    assert distributed["connections"] == 0
    assert set(distributed["scores"]) == {a.name for a in attacks}


@pytest.fixture(scope="module")
def failures(tmp_path_factory, postgres, cluster):
    """hw1 graded on the cluster while one worker is killed mid-run, with a poison submission among them."""
    scratch = tmp_path_factory.mktemp("failures")
    submissions = grading_corpus.load_corpus(HW1)[:8]
    poison = grading_corpus.Submission(name=POISON, base="solution", why="kills the worker that grades it", loses=[])
    url = postgres.database("failures")
    killed: list[int] = []

    stop = threading.Event()

    def kill_one_busy_worker() -> None:
        from distributed import Client

        with Client(cluster.address, timeout="30s") as client:
            while not stop.is_set():
                busy = [w for w, tasks in client.processing().items()
                        if any(isinstance(k, tuple) and k[1] != POISON for k in tasks)]
                if busy:
                    pid = client.run(__import__("os").getpid, workers=[busy[0]])[busy[0]]
                    time.sleep(0.5)  # mid-task
                    __import__("os").kill(pid, 9)
                    killed.append(pid)
                    return
                stop.wait(0.1)

    thread = threading.Thread(target=kill_one_busy_worker, daemon=True)
    thread.start()
    try:
        grading_corpus.grade(HW1, [*submissions, poison], scratch, args=_dask(cluster), db_url=url)
        status = 0
    except RuntimeError:
        status = 1
    stop.set()
    thread.join(timeout=60)
    course = scratch / "course"
    return {"course": course, "status": status, "killed": killed, "url": url, "submissions": submissions,
            "results": json.loads((course / "results" / f"{HW1}.json").read_text()),
            "hashes_before": None}


def test_a_killed_worker_loses_no_submission_and_none_is_graded_twice(failures):
    assert failures["killed"], "the test killed no worker"
    results = failures["results"]
    names = {s.name for s in failures["submissions"]}
    assert results["ungraded"] == [POISON]
    assert results["submitted_files_changed"] == []
    graded = {r["student"] for r in results["results"]}
    assert names <= graded
    with Gradebook(failures["url"], "torch-doctor") as gb:
        submissions = gb.find_assignment(HW1).submissions
        per_student = {}
        for sub in submissions:
            per_student[sub.student_id] = per_student.get(sub.student_id, 0) + 1
        assert all(n == 1 for n in per_student.values()), per_student
        for sub in submissions:
            if sub.student_id == POISON:
                continue
            cells = [g.name for nb in sub.notebooks for g in nb.grades]
            assert len(cells) == len(set(cells)) and cells, (sub.student_id, cells)
            assert all(g.auto_score is not None for nb in sub.notebooks for g in nb.grades), sub.student_id
    for s in failures["submissions"]:
        scores = {g: (p, m) for g, p, m in ((r["test"], r["points"], r["max"]) for r in results["results"]
                                           if r["student"] == s.name)}
        assert not grading_corpus.problems(s, scores)


def test_a_poison_submission_is_reported_ungraded_with_the_reason(failures):
    assert failures["status"] == 1
    why = failures["results"]["ungraded_why"][POISON]
    assert "killed its worker" in why, why
    assert not (failures["course"] / "autograded" / POISON).exists()


def test_nothing_is_left_running_or_mounted_on_the_workers(failures, cluster):
    states = _worker_states(cluster)
    assert len(states) == 2
    assert all(not s["children"] and not s["mounts"] for s in states.values()), states


def test_a_gpu_assignment_runs_only_on_workers_that_declare_a_gpu(tmp_path):
    """Two workers, one declaring GPU=1 (a label: no GPU is needed to check where the tasks go)."""
    submissions = grading_corpus.load_corpus(HW1)[:3]
    with dask_cluster(tmp_path / "dask", workers=2, worker_args={1: ["--resources", "GPU=1"]}) as gpu_cluster:
        scores = grading_corpus.grade(HW1, submissions, tmp_path / "grade", args=_dask(gpu_cluster),
                                      config_extra=f"c.GradingEngine.gpu_assignments = [{HW1!r}]")
    results = json.loads((tmp_path / "grade" / "course" / "results" / f"{HW1}.json").read_text())
    assert {w.split("@")[0] for w in results["graded_by"].values()} == {"w1"}, results["graded_by"]
    assert not [p for s in submissions for p in grading_corpus.problems(s, scores[s.name])]


# ---- the one writer ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toy_course(tmp_path_factory):
    return attack_corpus.make_course(tmp_path_factory.mktemp("writer"))


def _bundle(course: Path, student: str, run: str, executed: bool = True) -> Bundle:
    nb = nbformat.read(course / "source" / attack_corpus.ASSIGNMENT / f"{attack_corpus.ASSIGNMENT}.ipynb", 4)
    nb.metadata.pop("language_info", None)
    if executed:
        nb.metadata["language_info"] = {"name": "python"}
    return Bundle(assignment=attack_corpus.ASSIGNMENT, student=student, run=run, status="graded",
                  files={f"{attack_corpus.ASSIGNMENT}.ipynb": nbformat.writes(nb).encode()})


def test_the_writer_records_once_and_drops_duplicate_late_and_foreign_results(toy_course, tmp_path):
    url, course_id = autograde.gradebook_url(toy_course)
    writer = GradebookWriter(toy_course, attack_corpus.ASSIGNMENT, "run1", url, course_id, tmp_path)
    writer.expect(["ann", "bob", "cid"])
    assert writer.record(_bundle(toy_course, "ann", "run1")) is None
    assert "duplicate" in writer.record(_bundle(toy_course, "ann", "run1"))
    assert "another run" in writer.record(_bundle(toy_course, "bob", "run0"))
    assert "another run" in writer.record(_bundle(toy_course, "zed", "run1"))
    writer.give_up("bob")
    assert "late" in writer.record(_bundle(toy_course, "bob", "run1"))
    assert "never executed" in writer.record(_bundle(toy_course, "cid", "run1", executed=False))
    failed = Bundle(attack_corpus.ASSIGNMENT, "cid", "run1", status="failed", reason="nbgrader gave up")
    assert "nbgrader gave up" in writer.record(failed)
    assert len(writer.dropped) == 4
    with Gradebook(url, course_id) as gb:
        students = sorted(s.student_id for s in gb.find_assignment(attack_corpus.ASSIGNMENT).submissions)
    assert students == ["ann"]
    name = attack_corpus.ASSIGNMENT
    assert (toy_course / "autograded" / "ann" / name / f"{name}.ipynb").is_file()
