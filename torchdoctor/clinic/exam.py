"""A bug-clinic exam's view of a case (course_tools/clinic_exam.py): its script, its choices and its run, and nothing
that gives the answer away (``Case.reference_fix``, ``Case.check_diagnosis``) or runs other code than the buggy script
(``Case.check_fix``: the grader runs the fix). The exam's grader refuses a notebook whose cells reach past it (issue 36:
course_tools/grading/exam_cells.py); this class only keeps an honest student's notebook within those rules."""

from __future__ import annotations

from torchdoctor.clinic.practice import DEFAULT_TIMEOUT, Case, Run

__all__ = ["ExamCase"]


class ExamCase:
    """The case a code names, as an exam shows it: ``code``, ``script``, ``choices()`` and ``run()``."""

    def __init__(self, code: str) -> None:
        self._case = Case.from_code(code)
        self.code: str = self._case.code
        self.script: str = self._case.script

    def choices(self) -> list[str]:
        """The closed list of diagnoses (answer with a choice's number or its text)."""
        return self._case.choices()

    def run(self, timeout: float = DEFAULT_TIMEOUT) -> Run:
        """Run the buggy script in a separate process: what it printed, and what the clinic measured on the run."""
        return self._case.run(timeout)

    def __repr__(self) -> str:
        return repr(self._case)
