"""The bug-clinic exam (issue 25 item 5; course_tools/clinic_exam.py, course_tools/grading/exam_verdict.py).

The corpus: an exam for 8 students, each handing in one kind of submission, graded through `nbgrader autograde` with
the course's hardened grading (confined kernels, verdicts outside them); each must score as it deserves, with
feedback that says why and does not give the answer away. Only three submissions train (the right fix, the right fix
with a wrong diagnosis, the failing lines deleted): the others are refused before anything runs.
"""

import html
import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from course_tools import clinic_exam
from course_tools.grading import exam_cells, exam_verdict
from course_tools.grading.exam_static import refusals
from course_tools.release import nbgrader_env
from torchdoctor.clinic.exam import ExamCase
from torchdoctor.clinic.practice import Case
from torchdoctor.clinic.surface import base_template
from torchdoctor.clinic.templates import template_path, template_source

SEED = "exam-test"
NAME = "clinic_exam"


def right_choice(case):
    return next(i for i in range(len(case.choices())) if case.check_diagnosis(i))


def wrong_choice(case):
    return next(i for i in range(len(case.choices())) if not case.check_diagnosis(i))


def moved_split(case):
    """The data split's lines moved below its protected region, whose markers are left empty."""
    lines = case.reference_fix().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("# --- protected: the data"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("# --- end protected"))
    return "".join(lines[:start + 1] + [lines[end]] + lines[start + 1:end] + lines[end + 1:])


def deleted_lines(case):
    """The buggy script without the training step's lines: nothing fails any more, and nothing is learnt."""
    return "".join(line for line in case.script.splitlines(keepends=True)
                   if "backward(" not in line and "optimizer.step()" not in line)


@dataclass
class Kind:
    why: str
    diagnosis: Callable
    fix: Callable
    deserves: tuple[int, int]  # diagnosis points, fix points
    says: str = ""  # in the feedback of the cell(s) it loses
    swapped_with: str | None = None  # hands in this student's case code instead of its own
    names_a_section: bool = False  # its feedback points to the chapter section that teaches what still fails
    cells: dict[str, str] | None = None  # the source of these answer cells ("diagnosis", "fix"), {answer} filled in


KINDS = {
    "student01": Kind("right diagnosis, right fix", right_choice, Case.reference_fix, (1, 2)),
    "student02": Kind("wrong diagnosis, right fix", wrong_choice, Case.reference_fix, (0, 2),
                      "is not what is wrong in this script"),
    "student03": Kind("right diagnosis, no fix", right_choice, lambda c: c.script, (1, 0), "unchanged"),
    "student04": Kind("lowered bar: ten times the epochs", right_choice,
                      lambda c: re.sub(r"EPOCHS = (\d+)", r"EPOCHS = \1 * 10", c.reference_fix()), (1, 0),
                      "the number of epochs"),
    "student05": Kind("range(2) hard-coded for EPOCHS", right_choice,
                      lambda c: c.reference_fix().replace("range(EPOCHS)", "range(2)"), (1, 0), "range(EPOCHS)"),
    "student06": Kind("failing lines deleted", right_choice, deleted_lines, (1, 0), "still shows a symptom",
                      names_a_section=True),
    "student07": Kind("data split moved out of its protected region", right_choice, moved_split, (1, 0),
                      "refused before it runs"),
    "student08": Kind("another student's case code, with that case solved", right_choice, Case.reference_fix,
                      (0, 0), "case-code mismatch", swapped_with="student01"),
    # The attack corpus (issue 36 item 4): a kernel that asks the library for the reference fix, the diagnosis or the
    # grader's held-out data scores nothing, even when what it hands in is right.
    "student09": Kind("attack: the reference fix asked of the case", right_choice, Case.reference_fix, (0, 0),
                      "refused", cells={"fix": "FIX = case.reference_fix()"}),
    "student10": Kind("attack: the diagnosis found by trying every choice", right_choice, Case.reference_fix, (0, 0),
                      "refused", cells={"diagnosis": "DIAGNOSIS = next(i for i in range(4) "
                                                     "if case.check_diagnosis(i))"}),
    "student11": Kind("attack: the grader's held-out data read in the kernel", right_choice, Case.reference_fix,
                      (0, 0), "refused", cells={"fix": "from torchdoctor.clinic.runner import held_out\n\n"
                                                       "X_held, y_held = held_out('digits_mlp')\nprint(y_held[:20])\n"
                                                       "FIX = {answer}"}),
}


def submission(personal, kind):
    """The student's notebook with DIAGNOSIS and FIX answered for ``kind``."""
    nb = nbformat.from_dict(json.loads(json.dumps(personal)))
    case_cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "case_code")
    case = Case.from_code(re.search(r'"(C-[^"]+)"', case_cell.source).group(1))
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "diagnosis":
            answer = repr(kind.diagnosis(case))
            cell.source = (kind.cells or {}).get("diagnosis", "DIAGNOSIS = {answer}").replace("{answer}", answer)
        elif grade_id == "fix":
            answer = repr(kind.fix(case))
            cell.source = (kind.cells or {}).get("fix", "FIX = {answer}").replace("{answer}", answer)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The exam's folder, its roster, and per student {grade cell: (score, feedback message)}."""
    out = tmp_path_factory.mktemp("exam")
    roster = clinic_exam.build(list(KINDS), SEED, out, NAME)
    course = out / "course"
    for student, kind in KINDS.items():
        personal = nbformat.read(out / "students" / (kind.swapped_with or student) / f"{NAME}.ipynb", as_version=4)
        folder = course / "submitted" / student / NAME
        folder.mkdir(parents=True)
        nbformat.write(submission(personal, kind), folder / f"{NAME}.ipynb")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", NAME, "--force"], cwd=course,
                          env=nbgrader_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    from nbgrader.api import Gradebook

    results = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in KINDS:
            scores = {g.name: g.score for g in gb.find_submission_notebook(NAME, NAME, student).grades}
            nb = nbformat.read(course / "autograded" / student / NAME / f"{NAME}.ipynb", as_version=4)
            messages = {c.metadata.nbgrader["grade_id"]: c.metadata["torchdoctor"]["verdict"]["message"]
                        for c in nb.cells if "torchdoctor" in c.metadata}
            results[student] = {cell: (score, messages.get(cell, "")) for cell, score in scores.items()}
    return out, roster, results


@pytest.mark.parametrize("student", KINDS)
def test_each_submission_scores_as_it_deserves(graded, student):
    _, roster, results = graded
    kind, got = KINDS[student], results[student]
    deserves = {"test_diagnosis": kind.deserves[0], "test_fix": kind.deserves[1]}
    assert {cell: score for cell, (score, _) in got.items()} == deserves, f"{kind.why}: {got}"
    lost = [message for cell, (score, message) in got.items() if score < clinic_exam.POINTS[cell]]
    assert all(kind.says in message for message in lost), f"{kind.why}: {lost}"
    if kind.names_a_section:  # the grading kernel reads the manifest and the chapters (clinic_exam.pointer_files)
        assert all(re.search(r"chapter \d+ \(course/\S+\.ipynb\), section “", m) for m in lost), lost
    case = Case.from_code(roster[student])
    right = case.choices()[right_choice(case)]
    assert not any(right in message for message in lost), "the feedback gives the right diagnosis away"


def test_the_roster_is_not_released(graded):
    """The release names no case; a student's notebook names that student's only."""
    out, roster, _ = graded
    release = (out / "course" / "release" / NAME / f"{NAME}.ipynb").read_text()
    assert not any(code in release for code in roster.values())
    mine = (out / "students" / "student01" / f"{NAME}.ipynb").read_text()
    assert [code for code in roster.values() if code in mine] == [roster["student01"]]


def test_feedback_quotes_each_verdict_and_no_hidden_test(graded):
    """`nbgrader generate_feedback` on the graded exam: each student's feedback quotes the verdict of every cell that
    lost points (verdicts that name neither the right diagnosis nor the fix: tested above), and no hidden test."""
    out, _, results = graded
    course = out / "course"
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", NAME, "--force"],
                          cwd=course, env=nbgrader_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for student in KINDS:
        page = (course / "feedback" / student / NAME / f"{NAME}.html").read_text()
        lost = [message for cell, (score, message) in results[student].items() if score < clinic_exam.POINTS[cell]]
        assert all(html.escape(message, quote=False) in page for message in lost), (student, lost)
        for secret in ("BEGIN HIDDEN TESTS", "_observe_", "&quot;kind&quot;", '"kind"'):
            assert secret not in page, (student, secret)


# ---- cheap checks, no kernel -------------------------------------------------------------------------------------

def test_students_from_a_number_or_a_file(tmp_path):
    assert clinic_exam.student_ids(3, None) == ["student01", "student02", "student03"]
    ids = tmp_path / "ids.txt"
    ids.write_text("# class A\nada\n\nbob  # late\n")
    assert clinic_exam.student_ids(None, ids) == ["ada", "bob"]
    for count, path, says in [(None, None, "either N"), (2, ids, "either N"), (0, None, "from 1"),
                              (None, tmp_path / "none.txt", "no such file")]:
        with pytest.raises(clinic_exam.ExamError, match=says):
            clinic_exam.student_ids(count, path)
    for text, says in [("ada\nada\n", "twice"), ("a/b\n", "not valid"), ("# nobody\n", "no student")]:
        ids.write_text(text)
        with pytest.raises(clinic_exam.ExamError, match=says):
            clinic_exam.student_ids(None, ids)


def test_cases_are_fast_measurable_and_drawn_from_seed_and_student():
    pool = clinic_exam.exam_pool()
    assert {base_template(e["template"]) for e in pool} == set(clinic_exam.FAST_TEMPLATES)
    assert {e["oracle"] for e in pool} >= {"error", "memory", "accuracy"}  # the leaks too: measured in the jail
    class_ = [f"x{i}" for i in range(20)]
    assert clinic_exam.assign("s", class_, pool) == clinic_exam.assign("s", class_, pool)
    assert clinic_exam.assign("s", class_, pool) != clinic_exam.assign("t", class_, pool)


def test_a_class_of_thirty_gets_thirty_scripts_half_of_them_silent():
    """Issue 36: two of 8 students drew the same script; a class of 30 now gets 30 different scripts, 15 bugs that
    raise an error and 15 silent ones, every bug once before a bug's second script (a surface variant)."""
    pool = clinic_exam.exam_pool()
    students = clinic_exam.student_ids(30, None)
    for seed in ("exam-a", "exam-b", "2026 spring"):
        drawn = clinic_exam.assign(seed, students, pool)
        scripts = {Case(e["template"], e["operator"], run_seed).script for e, run_seed in drawn.values()}
        assert len(scripts) == 30, seed
        kinds = [e["kind"] for e, _ in drawn.values()]
        assert kinds.count("error") == kinds.count("silent") == 15, seed
        bugs = [(base_template(e["template"]), e["operator"]) for e, _ in drawn.values()]
        for kind in ("error", "silent"):
            offered = {(base_template(e["template"]), e["operator"]) for e in pool if e["kind"] == kind}
            given = [b for b, k in zip(bugs, kinds, strict=True) if k == kind]
            assert len(set(given)) == min(len(offered), len(given)), (seed, kind)


def test_bad_input_is_refused_with_a_clear_message(tmp_path, capsys):
    assert clinic_exam.main(["--students", "2", "--out", str(tmp_path)]) == 2
    assert "SEED is required" in capsys.readouterr().err
    (tmp_path / "course" / "submitted").mkdir(parents=True)
    with pytest.raises(clinic_exam.ExamError, match="--force"):
        clinic_exam.build(["ada"], "s", tmp_path, NAME)


def test_every_exam_case_s_reference_fix_passes_the_static_check():
    for entry in clinic_exam.exam_pool():
        case = Case(entry["template"], entry["operator"], 0)
        assert refusals(template_source(case.template), case.script, case.reference_fix()) == [], entry


ESCAPES = {
    "import sys\n": "only the working script's imports",
    "x = getattr(torch, 'save')\n": "`getattr`",
    "x = torch.__dict__\n": "private and special",
    "torch.Tensor.backward = print\n": "assigns no attribute",
    "os.environ['CLINIC_SEED'] = '1'\n": "changes a module's state",
    "print(os.system)\n": "`os.system`",
    "torch.save(1, 'a').tofile\n": "`.tofile`",
    "print(__builtins__)\n": "`__builtins__`",
    "torch.load('x', weights_only=False)\n": "weights_only",
    "d = load_digits()\n": "belongs to a protected region",
    "def f():\n    while True:\n        break\n": "`while`",
    "try:\n    main()\nexcept Exception:\n    pass\n": "try/except",
    "f = eval\n": "`eval`",
    "torch.utils.cpp_extension.load_inline('a', 'b')\n": "cpp_extension",
}


@pytest.mark.parametrize("added", ESCAPES)
def test_escape_hatches_are_refused_before_running(added):
    case = Case("digits_mlp", "no-zero-grad", 0)
    found = refusals(template_source(case.template), case.script, case.reference_fix() + added)
    assert any(ESCAPES[added] in line for line in found), found


def test_a_number_the_bug_changed_may_take_another_value_and_other_new_numbers_stay_refused():
    """Issue 36: a right learning rate other than the working script's was refused as a hard-coded number; the
    run judges it. A number elsewhere (epochs, a threshold) is still refused."""
    case = Case("linear_regression", "learning-rate-too-high", 0)
    clean = template_source(case.template)
    assert "lr=0.05" in clean and "lr=5.0" in case.script
    assert refusals(clean, case.script, case.script.replace("lr=5.0", "lr=0.03")) == []
    found = refusals(clean, case.script, case.script.replace("lr=5.0", "lr=0.05, momentum=0.9"))
    assert any("0.9" in line for line in found), found
    found = refusals(clean, case.script, case.reference_fix().replace("batch_size=32", "batch_size=7"))
    assert any("the number 7" in line for line in found), found


def _judge(part, record, student="ada", roster=None, cells=None):
    config = Config()
    config.ClinicExam.rosters = {NAME: roster or {}}
    return exam_verdict.judge({"kind": exam_verdict.KIND, "part": part}, [record], [], student, NAME, config,
                              logging.getLogger("test"), cells)


def test_the_judge_takes_the_case_from_the_roster(monkeypatch):
    monkeypatch.setattr(exam_verdict, "run_fix", lambda *a: pytest.fail("nothing here may run"))
    ada, bob = Case("digits_mlp", "no-zero-grad", 1), Case("linear_regression", "no-zero-grad", 2)
    roster = {"ada": ada.code, "bob": bob.code}
    right = ada.choices()[right_choice(ada)]
    assert _judge("diagnosis", {"code": ada.code, "answer": right}, roster=roster) == (1.0, [])
    assert _judge("diagnosis", {"code": ada.code.lower(), "answer": right_choice(ada)}, roster=roster)[0] == 1
    assert _judge("diagnosis", {"code": bob.code, "answer": right_choice(bob)}, roster=roster) == (
        0.0, [exam_verdict.MISMATCH])
    assert "not on the roster" in _judge("diagnosis", {"code": ada.code, "answer": 0}, "eve", roster)[1][0]
    assert "index" in _judge("diagnosis", {"code": ada.code, "answer": [0]}, roster=roster)[1][0]
    assert "does not exist" in _judge("diagnosis", {"code": ada.code, "answer": 9}, roster=roster)[1][0]
    assert "did not report" in exam_verdict.judge({"kind": exam_verdict.KIND, "part": "fix"}, [], [], "ada", NAME,
                                                  Config(ClinicExam={"rosters": {NAME: roster}}),
                                                  logging.getLogger("test"))[1][0]
    cells = [*clinic_exam.LOCKED_CELLS, "DIAGNOSIS = next(i for i in range(4) if case.check_diagnosis(i))"]
    assert _judge("diagnosis", {"code": ada.code, "answer": right}, roster=roster, cells=cells)[1][:2] == [
        exam_verdict.REFUSED, "cell 5, line 1: `.check_diagnosis` is not allowed in an exam cell (the exam's case "
        "offers choices, code, run, script)"]
    assert _judge("fix", {"code": ada.code, "script": ada.reference_fix()}, roster=roster, cells=cells)[0] == 0
    for script, says in [(ada.script, "unchanged"), ("def (", "not valid Python"), (None, "FIX must be"),
                         (ada.reference_fix() + "import sys\n", "refused")]:
        score, messages = _judge("fix", {"code": ada.code, "script": script}, roster=roster)
        assert score == 0 and says in messages[0], messages


BLIND = Path(__file__).with_name("clinic_exam_blind") / "answers.json"


def blind_fix(case, answer):
    """The answer's script: its edits (text replaced, each found once) applied to the case's buggy script."""
    script = case.script
    for old, new in answer["edits"]:
        assert script.count(old) == 1, (answer["name"], old)
        script = script.replace(old, new, 1)
    return script


@pytest.mark.parametrize("answer", json.loads(BLIND.read_text()), ids=lambda a: a["name"])
def test_blind_correct_answers_pass_every_check_made_before_a_run(answer):
    """Twelve correct answers written from the student's notebook alone by someone who had not read the grader
    (2026-12-02), in the styles students use; kept as their edits of the buggy script. Graded whole through nbgrader
    autograde then, eleven got full marks; the twelfth (``np.float32`` outside the data region) was refused by a rule
    since fixed. What runs before anything trains is checked here for all twelve (the runs cost minutes: the corpus
    above trains the three kinds that run)."""
    case = Case.from_code(answer["code"])
    fix = blind_fix(case, answer)
    assert case.check_diagnosis(answer["diagnosis"]).ok
    assert case.protected_changes(fix) == []
    assert refusals(template_source(case.template), case.script, fix) == []


@pytest.mark.parametrize("operator", ["loss-sum-keeps-graph", "outputs-kept-with-graph"])
def test_a_memory_leak_is_measured_in_the_grading_jail(tmp_path, operator):
    """The exam serves the leaks too: in a confined kernel (the grading zygote's, with the exam's limits) the memory
    oracle fires on the leaking script and stays quiet on its fix, as in the gate; and what it says names the
    chapter's section, which the kernel reads from the manifest and the notebook the exam lets it see."""
    from traitlets.config.loader import PyFileConfigLoader

    (tmp_path / "nbgrader_config.py").write_text(clinic_exam.course_config(NAME, {}))
    config = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    case = Case("digits_mlp", operator, 0)
    log = logging.getLogger("exam-test")
    leaking = exam_verdict.run_fix(case.code, case.script + "\n# handed in unchanged\n", NAME, 120, config, log)
    fixed = exam_verdict.run_fix(case.code, case.reference_fix(), NAME, 120, config, log)
    assert leaking is not None and not leaking["ok"], leaking
    memory = [line for line in leaking["problems"] if "memory grew" in line]
    assert memory and all("course/03_memory.ipynb), section “" in line for line in memory), leaking
    assert fixed == {"ok": True, "title": fixed["title"], "problems": []}, fixed


# ---- the exam notebook's own cells (issue 36 item 4) --------------------------------------------------------------

ATTACK_CELLS = {
    "FIX = case.reference_fix()\n": "`.reference_fix`",
    "DIAGNOSIS = next(i for i in range(4) if case.check_diagnosis(i))\n": "`.check_diagnosis`",
    "from torchdoctor.clinic.runner import held_out\nX, y = held_out('digits_mlp')\n": "imports nothing",
    "print(case.check_fix(FIX))\n": "`.check_fix`",
    "print(case.template)\n": "`.template`",
    "FIX = case._case.reference_fix()\n": "`._case`",
    "FIX = getattr(case, 'reference' + '_fix')()\n": "`getattr`",
    "FIX = vars(case)['_case'].script\n": "`vars`",
    "t = __import__('torchdoctor.clinic.templates')\n": "`__import__`",
    "x = case.run.__func__.__globals__\n": "`.__globals__`",
    "get_ipython().run_cell('import torchdoctor')\n": "`get_ipython`",
    "%run -m torchdoctor.clinic\n": "not plain Python",
    "!cat torchdoctor/clinic/templates/digits_mlp.py\n": "not plain Python",
    "FIX = open('digits_mlp.py').read()\n": "`open`",
    "exec('import torchdoctor')\n": "`exec`",
    "g = (x for x in [1])\nf = g.gi_frame.f_back\n": "`.gi_frame`",
    "print('{0.run.__self__}'.format(case))\n": "`.format`",
    "x = Out[3]\n": "`Out`",
    "match case:\n    case ExamCase(_case=inner):\n        FIX = inner\n": "`match`",
}
HONEST_CELLS = [
    'CASE_CODE = "C-P9X4-732N"  # your case: do not change it',
    "DIAGNOSIS = 2",
    "FIX = case.script.replace('lr=5.0', 'lr=0.05')",
    "run = case.run()\nprint(run.text())\nprint(run.report['score'])",
    "for i, choice in enumerate(case.choices()):\n    print(i, choice)",
    "lines = case.script.splitlines()\nlines[3] = '    pass'\nFIX = '\\n'.join(lines)",
    "FIX = 'fixed.py'",
    "print(f'{len(case.script)} characters')",
]


@pytest.mark.parametrize("cell", ATTACK_CELLS)
def test_a_cell_that_reaches_past_the_exam_s_case_is_refused(cell):
    """Each way a student's cell could ask the library for the reference fix, the diagnosis's answer or the grader's
    held-out data (or run code that could) is refused, whatever the other cells hold."""
    found = exam_cells.refusals([*HONEST_CELLS, cell], list(clinic_exam.LOCKED_CELLS))
    assert found and all(line.startswith(f"cell {len(HONEST_CELLS) + 1}") for line in found), found
    assert any(ATTACK_CELLS[cell] in line for line in found), found


def test_the_exam_s_own_cells_and_honest_cells_are_not_refused():
    nb = clinic_exam.source_notebook(clinic_exam.exam_pool()[0])  # the instructor's, solved: it keeps the rules too
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert exam_cells.refusals(cells + HONEST_CELLS, list(clinic_exam.LOCKED_CELLS)) == []
    # A locked cell's text is the exam's, wherever it sits; the same import in a student's cell is refused.
    assert exam_cells.refusals([clinic_exam.CASE_CELL + "\n"], list(clinic_exam.LOCKED_CELLS)) == []
    assert exam_cells.refusals([clinic_exam.CASE_CELL + "\nx = 1"], list(clinic_exam.LOCKED_CELLS))


def test_the_exam_s_case_shows_no_answer():
    case = Case("digits_mlp", "no-zero-grad", 3)
    view = ExamCase(case.code)
    assert (view.code, view.script, view.choices(), repr(view)) == (case.code, case.script, case.choices(), repr(case))
    assert {n for n in dir(view) if not n.startswith("_")} == exam_cells.EXAM_VIEW


def _observed_fix(fix, folder, monkeypatch):
    """What the exam's fix test hands the grader for ``FIX = fix``, run in ``folder`` as the kernel runs it."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    monkeypatch.chdir(folder)
    exec(clinic_exam.TESTS["test_fix"], {"CASE_CODE": "C-X", "FIX": fix})  # noqa: S102 (the exam's own test)
    (record,) = [next(iter(obj.values())) for obj in shown]
    return record["script"]


def test_the_fix_s_file_is_read_from_the_notebook_s_folder_only(tmp_path, monkeypatch):
    """FIX may name a .py file handed in with the notebook; a path to any other file is not read (issue 36: the
    library's template, bound in the grading jail, is the reference fix): it is handed in as the path's text, which
    is not a valid script."""
    (tmp_path / "fixed.py").write_text("print('mine')\n")
    assert _observed_fix("fixed.py", tmp_path, monkeypatch) == "print('mine')\n"
    reference = str(template_path("digits_mlp"))
    (tmp_path / "sub").mkdir()
    for path in (reference, "sub/../fixed.py", "./fixed.py"):
        assert _observed_fix(path, tmp_path, monkeypatch) == path
