"""Pass or fail, decided by the grader, never inside the student's kernel.

A hidden test runs in the student's kernel, where student code may have replaced anything (``__eq__``,
``isinstance``, ``torch.allclose``, the test's own helpers, ``print``). So the test decides nothing there: it
only *observes*, turning what the student's objects do on hidden inputs into plain JSON data, and displays it
once as ``references.OBSERVED_MIME``. The grader then compares that data with what the reference solution
observed in a clean kernel (``references``), with its own comparison (``compare``), in its own process. A test
cell with hidden tests that the reference run saw display no record fails, with a message saying so; a test cell
whose reference run failed (``References.failed``) keeps nbgrader's own in-kernel verdict, with an error in the log;
one whose hidden tests are plain asserts (``References.in_kernel``) keeps it too, marked as not protected.

``Verdicts`` runs after execution and before nbgrader's SaveAutoGrades: each graded test cell's outputs are
replaced by the verdict, in the form nbgrader scores (nothing but a "passed" line: full points; an error output:
zero; a number as ``execute_result``: partial credit), with a feedback message that shows no hidden test source.
The verdict also goes into the cell's metadata (``torchdoctor.verdict``) for the per-test JSON results.

A test cell whose reference record is of the bug-clinic exam's kind is judged by ``exam_verdict`` instead: each
student has a case of their own, so the reference's values say nothing about theirs.
"""

from __future__ import annotations

import math
import typing as t

from nbconvert.exporters.exporter import ResourcesDict
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import determine_grade

from course_tools.grading import exam_verdict
from course_tools.grading.references import (
    IN_KERNEL,
    References,
    has_hidden_tests,
    is_test_cell,
    observed_records,
    references_for,
)

REL_TOL, ABS_TOL = 1e-4, 1e-6
MAX_SHOWN = 200  # characters of a value shown in a feedback message
MAX_LINES = 5  # failed comparisons shown per test
MAX_RULE = 300  # characters of a requirement's sentence quoted in feedback


def _short(value: t.Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def compare(expected: t.Any, observed: t.Any, where: str = "") -> list[str]:
    """Differences between two JSON values: types must match (an int may stand for a float), floats within
    a tolerance, lists and dicts element by element. Empty when they agree."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        ok = type(observed) is type(expected) and observed == expected
        return [] if ok else [f"{where}: expected {_short(expected)}, got {_short(observed)}"]
    if isinstance(expected, int):
        ok = type(observed) is int and observed == expected
        return [] if ok else [f"{where}: expected {_short(expected)}, got {_short(observed)}"]
    if isinstance(expected, float):
        if type(observed) not in (int, float) or (type(observed) is int and abs(observed) > 2**1023):
            return [f"{where}: expected a number close to {expected!r}, got {_short(observed)}"]
        both_nan = math.isnan(expected) and math.isnan(observed)
        ok = both_nan or math.isclose(expected, observed, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        return [] if ok else [f"{where}: expected {expected!r}, got {observed!r}"]
    if isinstance(expected, list):
        if type(observed) is not list or len(observed) != len(expected):
            return [f"{where}: expected {_short(expected)}, got {_short(observed)}"]
        return [m for i, (e, o) in enumerate(zip(expected, observed, strict=True))
                for m in compare(e, o, f"{where}[{i}]")]
    if isinstance(expected, dict):
        if type(observed) is not dict or set(observed) != set(expected):
            return [f"{where}: expected the checks {sorted(expected)}, got {_short(observed)}"]
        return [m for key in expected for m in compare(expected[key], observed[key], f"{where} {key}".strip())]
    raise TypeError(f"reference value of unsupported type {type(expected).__name__}")


def choice_credit(expected: t.Any, observed: t.Any) -> float:
    """Credit for a choice from a closed list (``Record.choice``): each right name earns 1/len(expected), each wrong
    name costs as much, never below 0; so naming every option earns nothing for the right ones."""
    if type(expected) is not list or not expected or type(observed) is not list:
        return 0.0
    right = len(set(observed) & set(expected))
    wrong = len(set(observed) - set(expected))
    return max(0.0, (right - wrong) / len(expected))


def judge(reference: dict, records: list[t.Any], errors: list[str]) -> tuple[float, list[str]]:
    """Weighted share of the reference's checks the observed records pass, and feedback lines. A check passes when
    its observation matches the reference's value or one of the reference's ``alternatives`` for it; a choice
    (``Record.choice``) earns :func:`choice_credit`. Only the reference run's alternatives, weights and choices
    count (the student's kernel displays its own, which are ignored)."""
    if len(records) != 1 or type(records[0]) is not dict or type(records[0].get("checks")) is not dict:
        if errors:
            return 0.0, [f"the test did not finish: {errors[-1]}"]
        return 0.0, [f"the test did not report its observations ({len(records)} records instead of 1)"]
    expected, observed = reference["checks"], records[0]["checks"]
    alternatives = reference.get("alternatives", {})
    weights = {name: float(reference.get("weights", {}).get(name, 1.0)) for name in expected}
    choices = set(reference.get("choices", []))
    # Observations the reference does not have (such as "raised ..." where the reference observed a value) earn
    # nothing, but they are what the student needs to read first.
    lines = [f"{name}: {_short(value)}" for name, value in observed.items() if name not in expected]
    failed, credit = {}, {}
    for name, value in expected.items():
        if name not in observed:
            failed[name] = [f"{name}: expected {_short(value)}, observed nothing"]
            continue
        if name in choices:
            credit[name] = choice_credit(value, observed[name])
            if credit[name] < 1:
                failed[name] = [f"{name}: {credit[name]:.0%} of this choice's credit (a wrong name costs what a "
                                f"right one earns)"]
            continue
        accepted = [value, *alternatives.get(name, [])]
        if all(compare(v, observed[name], name) for v in accepted):
            failed[name] = compare(value, observed[name], name)
    total = sum(weights.values())
    earned = sum(weights[name] * credit.get(name, 0.0 if name in failed else 1.0) for name in expected)
    passed = earned / total if expected else 1.0
    ids = reference.get("requirements", {})
    lines += [f"[{', '.join(ids[name])}] {line}" if ids.get(name) else line
              for name, messages in failed.items() for line in messages]
    more = [f"(and {len(lines) - MAX_LINES} more)"] if len(lines) > MAX_LINES else []
    return passed, lines[:MAX_LINES] + more + _broken_rules(reference, failed)


def _broken_rules(reference: dict, failed: dict[str, list[str]]) -> list[str]:
    """The requirements the failed checks test, each once with its sentence from the student text (issue 35: feedback
    names the rule a student broke, not only the check that saw it)."""
    ids = reference.get("requirements", {})
    texts = reference.get("requirement_text", {})
    broken = list(dict.fromkeys(i for name in failed for i in ids.get(name, [])))
    if not broken:
        return []
    quoted = []
    for rid in broken:
        text = " ".join(str(texts.get(rid, "")).split())
        text = text if len(text) <= MAX_RULE else text[:MAX_RULE] + "…"
        quoted.append(f"  {rid}: “{text}”" if text else f"  {rid}")
    return ["Requirements not met (the ids in your notebook's text):", *quoted]


def verdict_outputs(points: float, fraction: float, partial: bool, messages: list[str]) -> list[NotebookNode]:
    if fraction == 1:
        return [new_output("stream", name="stdout", text="Passed every check.\n")]
    text = "\n".join(messages)
    if partial and fraction > 0:
        score = round(points * fraction, 6)
        return [new_output("stream", name="stdout", text=f"Partial credit, {fraction:.0%} of the checks:\n{text}\n"),
                new_output("execute_result", data={"text/plain": repr(score)}, execution_count=None)]
    return [new_output("error", ename="TestFailed", evalue=text, traceback=["TestFailed", *messages])]


def _error_text(output: NotebookNode) -> str:
    text = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
    return text if len(text) <= 2 * MAX_SHOWN else text[: 2 * MAX_SHOWN] + "…"


class Verdicts(NbGraderPreprocessor):
    """Replace each graded test cell's outputs by the grader's verdict on what it observed."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        info = resources["nbgrader"]
        self._references = references_for(self.config, info["assignment"], info["notebook"], self.log)
        self._cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]  # a clinic exam's judge reads them
        return super().preprocess(nb, resources)

    _references: References
    _cells: list[str]

    def preprocess_cell(self, cell: NotebookNode, resources: ResourcesDict, index: int
                        ) -> tuple[NotebookNode, ResourcesDict]:
        if not is_test_cell(cell):
            return cell, resources
        grade_id = cell.metadata.nbgrader["grade_id"]
        points = float(cell.metadata.nbgrader["points"])
        reference = self._references.records.get(grade_id)
        failed = self._references.failed.get(grade_id)
        if failed is not None:  # the reference run could not judge it: as stock nbgrader, the kernel's verdict
            self.log.error("Test cell %s %s: nbgrader's in-kernel verdict stands for it (fix the source notebook, or "
                           "what it needs in the sandbox, and grade again)", grade_id, failed)
            return cell, resources
        if reference is None and (grade_id in self._references.in_kernel or has_hidden_tests(cell, self.config)):
            # Stock hidden asserts: judged as nbgrader judges them, in the student's kernel, and said so where the
            # instructor and the student look (the cell, the log, results/<assignment>.json).
            self.log.warning("Test cell %s: %s", grade_id, IN_KERNEL)
            score, _ = determine_grade(cell, self.log)
            cell.outputs = [*cell.get("outputs", []), new_output("stream", name="stdout", text=f"Note: {IN_KERNEL}.\n")]
            cell.metadata["torchdoctor"] = {"verdict": {"score": score, "max": points, "passed": score == points,
                                                        "message": IN_KERNEL, "judged_in_kernel": True}}
            return cell, resources
        if reference is None:  # visible asserts only: the student sees the whole test, nothing to hide
            self.log.warning("Test cell %s has no hidden tests: nbgrader's in-kernel verdict stands", grade_id)
            return cell, resources
        errors = [_error_text(o) for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if reference.get("kind") == exam_verdict.KIND:  # judged against the roster, not the reference's values
            info = resources["nbgrader"]
            fraction, messages = exam_verdict.judge(reference, observed_records(cell), errors, info.get("student"),
                                                    info["assignment"], self.config, self.log, self._cells)
            return self._set_verdict(cell, points, fraction, False, messages), resources
        try:
            fraction, messages = judge(reference, observed_records(cell), errors)
        except Exception as exc:  # a record built to break the comparison (huge ints, deep nesting): it fails
            self.log.warning("Test cell %s: its observations could not be judged: %r", grade_id, exc)
            fraction, messages = 0.0, [f"the test's observations could not be judged ({type(exc).__name__})"]
        return self._set_verdict(cell, points, fraction, bool(reference.get("partial")), messages), resources

    @staticmethod
    def _set_verdict(cell: NotebookNode, points: float, fraction: float, partial: bool, messages: list[str]
                     ) -> NotebookNode:
        if not partial and fraction < 1:
            fraction = 0.0
        cell.outputs = verdict_outputs(points, fraction, partial, messages)
        cell.metadata["torchdoctor"] = {"verdict": {"score": round(points * fraction, 6), "max": points,
                                                    "passed": fraction == 1, "message": "\n".join(messages)}}
        return cell
