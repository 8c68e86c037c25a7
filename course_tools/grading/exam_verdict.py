"""Verdicts of the bug-clinic exam (docs/instructors.md, "Bug clinic exam"), taken by the grader, never in the kernel.

Every student gets the same release, so the case a student must fix is not in the notebook but in the roster
(``ClinicExam.rosters`` in the exam course's nbgrader_config.py, which ``course_tools.clinic_exam`` writes and no
student receives). The exam's hidden tests only display what was handed in, as one record each: ``{"kind":
"clinic-exam", "part": "diagnosis" | "fix", "code": ..., "answer" | "script": ...}``. ``verdict.Verdicts`` hands a
test cell whose *reference* record has that kind to :func:`judge`, with the student id nbgrader gives it:

1. the case is the roster's for that student; a notebook whose case code differs scores nothing (a case-code
   mismatch: another student's case, or an easier one), and so does one whose own cells reach past the exam's view
   of the case (``exam_cells``: the reference fix, the diagnosis's answer, the held-out data are the library's);
2. the diagnosis is checked with ``Case.check_diagnosis``, here;
3. the fix is refused, without running, when it is the buggy script unchanged, not Python, changes a protected
   region (``Case.protected_changes``: data split, epochs, evaluation) or steps outside what the working script does
   (``exam_static``); otherwise it runs confined like a kernel: a one-cell notebook ``Case.from_code(code)
   .check_fix(script)`` in a fresh kernel forked from the grading zygote (``SandboxedExecute``: the same jail, the
   assignment's limits), whose record says whether every oracle stayed quiet.

The feedback says what is wrong (a wrong choice, a refused edit, the measured symptom) and never which choice or
edit is right.
"""

from __future__ import annotations

import ast
import tempfile
import typing as t

from nbformat.v4 import new_code_cell, new_notebook
from traitlets import Dict, Int, Unicode
from traitlets.config import Config, Configurable

from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.references import OBSERVED_MIME, observed_records

KIND = "clinic-exam"
MAX_SCRIPT = 200_000  # characters of a handed-in script the grader looks at
MAX_LINES = 5  # feedback lines shown per test, as verdict.judge shows
MISMATCH = ("case-code mismatch: the case code in your notebook is not the one you were given, so nothing is graded "
            "(put your own case code back in the CASE_CODE cell)")
REFUSED = ("your notebook is refused, so nothing is graded: a cell reaches past what the exam's `case` offers (the "
           "exam's rules for your cells)")
FIX_RUN = """\
from IPython.display import display
from torchdoctor.clinic.practice import Case
feedback = Case.from_code({code!r}).check_fix({script!r}, timeout={timeout})
display({{{mime!r}: {{"ok": feedback.ok, "title": feedback.title, "problems": feedback.problems}}}}, raw=True)
"""


class ClinicExam(Configurable):
    """The exam's roster, per assignment, and how long a fix may train."""

    rosters = Dict(value_trait=Dict(value_trait=Unicode()),
                   help="Per assignment id: student id -> the case code of that student's case.").tag(config=True)
    fix_timeout = Int(120, help="Seconds a handed-in fix may run (the clinic's own limit inside the kernel); the "
                      "assignment's cell timeout must be longer.").tag(config=True)


def judge(reference: dict, records: list[t.Any], errors: list[str], student: str | None, assignment: str,
          config: Config, log: t.Any, cells: list[str] | None = None) -> tuple[float, list[str]]:
    """The fraction of the cell's points earned (0 or 1) and the feedback lines; ``cells``: the sources of the
    notebook's code cells, whose student cells must keep to the exam's view of the case (``exam_cells``)."""
    fraction, lines = _judge(reference, records, errors, student, assignment, config, log, cells or [])
    return fraction, lines[:MAX_LINES] + ([f"(and {len(lines) - MAX_LINES} more)"] if len(lines) > MAX_LINES else [])


def _judge(reference: dict, records: list[t.Any], errors: list[str], student: str | None, assignment: str,
           config: Config, log: t.Any, cells: list[str]) -> tuple[float, list[str]]:
    from course_tools.clinic_exam import LOCKED_CELLS
    from course_tools.grading.exam_cells import refusals
    from torchdoctor.clinic.operators import ClinicError
    from torchdoctor.clinic.practice import Case

    exam = ClinicExam(config=config)
    code = exam.rosters.get(assignment, {}).get(student or "")
    if code is None:
        log.error("Clinic exam %s: student %r is not on the roster (ClinicExam.rosters)", assignment, student)
        return 0.0, [f"you are not on the roster of {assignment}: ask your instructor"]
    refused = refusals(cells, list(LOCKED_CELLS))
    if refused:
        return 0.0, [REFUSED, *refused]
    record = records[0] if len(records) == 1 and type(records[0]) is dict else None
    if record is None:
        why = f"the test did not finish: {errors[-1]}" if errors else "the test did not report what you handed in"
        return 0.0, [why]
    if type(record.get("code")) is not str or record["code"].strip().upper() != code:
        return 0.0, [MISMATCH]
    try:
        case = Case.from_code(code)
    except ClinicError as exc:
        log.error("Clinic exam %s, student %r: the roster's case %s: %s", assignment, student, code, exc)
        return 0.0, ["your case cannot be rebuilt by this version of the clinic: ask your instructor"]
    if reference.get("part") == "diagnosis":
        return _diagnosis(case, record.get("answer"))
    return _fix(case, record.get("script"), assignment, exam, config, log)


def _diagnosis(case: t.Any, answer: t.Any) -> tuple[float, list[str]]:
    from torchdoctor.clinic.operators import ClinicError

    if type(answer) not in (int, str):
        return 0.0, ["DIAGNOSIS must be an index into case.choices() or the text of one choice"]
    try:
        feedback = case.check_diagnosis(answer)
    except ClinicError as exc:
        return 0.0, [str(exc)]
    return (1.0, []) if feedback.ok else (0.0, [feedback.title])


def _fix(case: t.Any, script: t.Any, assignment: str, exam: ClinicExam, config: Config, log: t.Any
         ) -> tuple[float, list[str]]:
    from course_tools.grading.exam_static import refusals  # imports torch: only when an exam is graded
    from torchdoctor.clinic.templates import template_source

    if type(script) is not str or not script.strip():
        return 0.0, ["FIX must be your fixed script: its source text, or the name of a .py file you handed in"]
    if len(script) > MAX_SCRIPT:
        return 0.0, [f"your script is longer than {MAX_SCRIPT} characters"]
    try:
        unchanged = ast.dump(ast.parse(script)) == ast.dump(ast.parse(case.script))
    except SyntaxError as exc:
        return 0.0, [f"your script is not valid Python: line {exc.lineno}: {exc.msg}"]
    if unchanged:
        return 0.0, ["your script is the buggy script, unchanged"]
    refused = case.protected_changes(script) + refusals(template_source(case.template), case.script, script)
    if refused:
        return 0.0, ["your script is refused before it runs:", *refused]
    result = run_fix(case.code, script, assignment, exam.fix_timeout, config, log)
    if result is None:
        return 0.0, ["the run of your script could not be judged (it did not finish in its limits)"]
    if result["ok"]:
        return 1.0, []
    return 0.0, [result["title"], *result["problems"]]


def run_fix(code: str, script: str, assignment: str, timeout: int, config: Config, log: t.Any) -> dict | None:
    """``check_fix`` of ``script`` in a confined kernel (the grading zygote's, with ``assignment``'s limits): its
    record ``{"ok", "title", "problems"}``, or None when the kernel gave none."""
    nb = new_notebook(cells=[new_code_cell(FIX_RUN.format(code=code, script=script, timeout=timeout,
                                                          mime=OBSERVED_MIME))])
    with tempfile.TemporaryDirectory(prefix="tdexam-") as scratch:
        resources = {"metadata": {"path": scratch}, "nbgrader": {"assignment": assignment}}
        SandboxedExecute(config=config).preprocess(nb, resources)
    records = observed_records(nb.cells[0])
    record = records[0] if len(records) == 1 else None
    if type(record) is not dict or type(record.get("ok")) is not bool or type(record.get("problems")) is not list:
        errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in nb.cells[0].outputs if o.output_type == "error"]
        log.error("Clinic exam %s, case %s: the fix run gave no record (%s)", assignment, code, errors)
        return None
    return record
