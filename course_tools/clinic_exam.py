"""The bug-clinic exam (issue 25; docs/instructors.md, "Bug clinic exam"): one validated case per student, graded by
nbgrader's hardened autograde.

``make clinic-exam N=8 SEED=...`` (or ``STUDENTS=ids.txt``, one id a line) writes, in ``--out`` (build/clinic_exam):

- ``course/``: an nbgrader course root: its nbgrader_config.py (the course's own, plus the roster and the exam's
  limits), ``source/<name>/<name>.ipynb`` and, from ``nbgrader generate_assignment``, ``release/<name>/``: one
  notebook for everybody, whose case-code cell each student fills in;
- ``students/<id>/<name>.ipynb``: the released notebook with that student's case code filled in;
- ``roster.csv``: student, case code, template, bug: the instructor's key (it names every bug).

Students' cases are dealt from SEED and the student ids (HMACs), among the validated cases of the fast templates (the
digits MLP and linear regression: a fix trains in seconds) and their surface variants, the memory leaks included
(measured in the grading jail as in the gate): half of a class gets a bug that raises an error, half a silent one, and
no two students get the same script while the pool lasts (``assign``). Nothing in a notebook decides the grade:
``grading.exam_verdict`` takes each student's case from the roster and judges outside the kernel. The notebook's
``case`` is an ``ExamCase`` (no reference fix, no diagnosis check, no ``check_fix``), and a notebook whose own cells
reach past it (the cells but ``LOCKED_CELLS``) scores nothing (``grading.exam_cells``, issue 36). The grading
kernels may read the course manifest and the chapter notebooks (``pointer_files``), so that the feedback names the
section that teaches the bug.

Usage: python -m course_tools.clinic_exam (--students N | --roster-file FILE) --seed SEED [--out DIR] [--name NAME]
       [--force]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import hmac
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_tools.release import COURSE, nbgrader

FAST_TEMPLATES = ("digits_mlp", "linear_regression")
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
MAX_STUDENTS = 1000
POINTS = {"test_diagnosis": 1, "test_fix": 2}
# Limits of the exam's kernels, and of the grader's run of each fix: a fix trains in seconds, the clinic's own limit
# (ClinicExam.fix_timeout, 120 s) comes first, and a student's own case.run() cells must fit in the notebook's time.
LIMITS = {"timeout": 300, "notebook_timeout": 900, "cpu_seconds": 600, "memory_mb": 4096}


class ExamError(ValueError):
    """Bad input for the exam: a clear message, no traceback."""


def student_ids(count: int | None, roster_file: Path | None) -> list[str]:
    """student01..studentNN, or the ids of a file (one a line; blank lines and # comments skipped)."""
    if (count is None) == (roster_file is None):
        raise ExamError("give either N (a number of students: student01, student02...) or STUDENTS (a file of ids)")
    if count is not None:
        if not 1 <= count <= MAX_STUDENTS:
            raise ExamError(f"N must be a whole number from 1 to {MAX_STUDENTS}, not {count}")
        return [f"student{i:0{max(2, len(str(count)))}d}" for i in range(1, count + 1)]
    if not roster_file.is_file():
        raise ExamError(f"STUDENTS={roster_file}: no such file")
    ids = [line.split("#")[0].strip() for line in roster_file.read_text().splitlines()]
    ids = [i for i in ids if i]
    bad = [i for i in ids if not STUDENT_ID.fullmatch(i)]
    if bad:
        raise ExamError(f"{roster_file}: not valid student ids (letters, digits, _ . @ -, at most 64): {bad[:5]}")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ExamError(f"{roster_file}: ids listed twice: {twice[:5]}")
    if not ids:
        raise ExamError(f"{roster_file} lists no student")
    return ids


def exam_pool() -> list[dict]:
    """The validated cases an exam draws from, in cases.json's order: the fast templates and their surface variants
    (the same bug with the script's own names renamed: another script to read)."""
    from torchdoctor.clinic.practice import available
    from torchdoctor.clinic.surface import base_template

    return [e for e in available() if base_template(e["template"]) in FAST_TEMPLATES]


def _digest(seed: str, text: str) -> bytes:
    return hmac.new(seed.encode(), text.encode(), hashlib.sha256).digest()


def _deal(seed: str, entries: list[dict]) -> list[dict]:
    """``entries`` in the order they are dealt: every bug once (shuffled by SEED) before any bug's second script (a
    surface variant), and so on."""
    from torchdoctor.clinic.surface import base_template

    def key(e: dict, what: str) -> bytes:
        return _digest(seed, f"{what}/{e['template']}/{e['operator']}")

    groups: dict[tuple[str, str], list[dict]] = {}
    for e in entries:
        groups.setdefault((base_template(e["template"]), e["operator"]), []).append(e)
    ordered = sorted(groups.values(), key=lambda g: key(g[0], "bug"))
    ordered = [sorted(g, key=lambda e: key(e, "script")) for g in ordered]
    return [g[i] for i in range(max(map(len, ordered), default=0)) for g in ordered if i < len(g)]


def assign(seed: str, students: list[str], pool: list[dict]) -> dict[str, tuple[dict, int]]:
    """Each student's case, as its cases.json entry and run seed, dealt so that a class has as many bugs that raise
    an error as silent ones (one more of either at most: the two kinds are read differently) and no two students
    the same script until every script of a kind is given out (60 scripts on the fast templates). Who gets which is
    an HMAC of the student id keyed by SEED; the deal depends on the whole class, so the roster is written once."""
    from torchdoctor.clinic.practice import MAX_SEED

    kinds = {kind: _deal(seed, [e for e in pool if e["kind"] == kind]) for kind in ("error", "silent")}
    kinds = {k: v for k, v in kinds.items() if v}
    order = sorted(students, key=lambda s: _digest(seed, f"student/{s}"))
    first = sorted(kinds, key=lambda k: _digest(seed, f"kind/{k}"))
    drawn = {}
    for i, student in enumerate(order):
        dealt = kinds[first[i % len(first)]]
        run_seed = int.from_bytes(_digest(seed, f"seed/{student}")[:8], "big") % (MAX_SEED + 1)
        drawn[student] = (dealt[(i // len(first)) % len(dealt)], run_seed)
    return {student: drawn[student] for student in students}


def _cell(kind: str, cell_id: str, source: str, grade_id: str | None = None, solution: bool = False,
          points: int | None = None):
    cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
    cell.id = cell_id
    if grade_id is not None:
        cell.metadata["nbgrader"] = {"grade": points is not None, "grade_id": grade_id, "locked": not solution,
                                     "schema_version": 3, "solution": solution, "task": False}
        if points is not None:
            cell.metadata["nbgrader"]["points"] = points
    return cell


INTRO = """# Bug clinic exam

Your case is a small training script with **one** bug in it, injected by the bug clinic (`course/bug_clinic.ipynb`,
the same tool you practised with). Diagnose it (1 point) and fix it (2 points).

The next cell holds your case code, `CASE_CODE = "C-…"`. **Do not change it**: you are graded on the case you were
given, whatever this cell says; another code scores nothing. If it says `raise NotImplementedError()`, replace that
line with the `CASE_CODE = "…"` line your instructor gave you."""

LOOK = """Run the script and read what the clinic measures: add a cell with `case.run()` (a few seconds). The regions
marked `# --- protected: … ---` (the data split, the number of epochs, the evaluation) are part of the test: a fix
that changes them is refused.

**The exam's rules for your cells.** `case` offers `case.script`, `case.choices()`, `case.run()` and `case.code`,
nothing else (no `check_fix`: the grader runs your fix). Your cells use only these and plain Python: they import
nothing, hold no magic (`%`) or shell (`!`) line, and use no name or attribute that starts with `_`, no `getattr`,
`vars`, `eval`, `exec`, `open`, `get_ipython` and no `.format` (use an f-string). A notebook with a cell that breaks
a rule scores nothing."""

PART1 = """## Part 1: the diagnosis (1 point)

Set `DIAGNOSIS` to the number of the right choice above (0 to 3), or its text."""

PART2 = """## Part 2: the fix (2 points)

Set `FIX` to your fixed script: its text (for example `FIX = case.script.replace("…", "…")`), or the name of a `.py`
file you hand in with this notebook, beside it (a name, not a path). It passes when it runs without error and every
check of the clinic stays quiet. Fix the bug itself: the grader refuses, before running it, a script that changes a
protected region, imports anything the script did not import, adds numbers the script does not use (no hard-coded
epochs or weights), uses `try`, `while`, `break`, `eval`, `getattr`, `open` or private attributes, or moves what the
protected regions define elsewhere."""

OBSERVE = '''
### BEGIN HIDDEN TESTS
def _observe_{part}():
    # Observes only: the grader judges what you handed in outside this kernel, against your own case.
    from pathlib import Path

    from IPython.display import display

    from torchdoctor.observe import MIME, plain

    value = {name}
    if "{part}" == "fix" and isinstance(value, str) and "\\n" not in value and value.strip().endswith(".py") \\
            and Path(value.strip()).name == value.strip():  # a file beside the notebook, not a path elsewhere
        value = Path(value.strip()).read_text()
    display({{MIME: {{"kind": "clinic-exam", "part": "{part}", "code": plain(CASE_CODE), "{key}": plain(value)}}}},
            raw=True)


_observe_{part}()
### END HIDDEN TESTS'''


# The exam's locked cells: the student's cells are every other code cell (grading.exam_cells reads them).
CASE_CELL = ("from torchdoctor.clinic.exam import ExamCase\n\ncase = ExamCase(CASE_CODE)\nprint(case)\n"
             "print(case.script)")
CHOICES_CELL = "for number, text in enumerate(case.choices()):\n    print(number, text)"
TESTS = {
    "test_diagnosis": 'assert type(DIAGNOSIS) in (int, str), "DIAGNOSIS is the number of a choice or its text"\n'
                      + OBSERVE.format(part="diagnosis", name="DIAGNOSIS", key="answer"),
    "test_fix": 'assert isinstance(FIX, str), "FIX is your fixed script\'s text, or the name of its .py file"\n'
                + OBSERVE.format(part="fix", name="FIX", key="script"),
}
LOCKED_CELLS = (CASE_CELL, CHOICES_CELL, *TESTS.values())


def source_notebook(entry: dict) -> nbformat.NotebookNode:
    """The instructor's notebook: solved for the case of ``entry`` (of cases.json) at run seed 0, with the hidden
    tests that observe."""
    from torchdoctor.clinic.operators import get_operator
    from torchdoctor.clinic.practice import Case

    reference = Case(entry["template"], entry["operator"], 0)
    right = reference.choices().index(get_operator(entry["operator"]).description)
    cells = [
        _cell("markdown", "intro", INTRO),
        _cell("code", "case-code", f'### BEGIN SOLUTION\nCASE_CODE = "{reference.code}"\n### END SOLUTION',
              "case_code", solution=True),
        _cell("code", "case", CASE_CELL, "case"),
        _cell("markdown", "look", LOOK),
        _cell("code", "choices", CHOICES_CELL, "choices"),
        _cell("markdown", "part1", PART1),
        _cell("code", "diagnosis", f"### BEGIN SOLUTION\nDIAGNOSIS = {right}\n### END SOLUTION", "diagnosis",
              solution=True),
        _cell("code", "test-diagnosis", TESTS["test_diagnosis"], "test_diagnosis", points=POINTS["test_diagnosis"]),
        _cell("markdown", "part2", PART2),
        _cell("code", "fix", f"### BEGIN SOLUTION\nFIX = {reference.reference_fix()!r}\n### END SOLUTION", "fix",
              solution=True),
        _cell("code", "test-fix", TESTS["test_fix"], "test_fix", points=POINTS["test_fix"]),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def course_config(name: str, roster: dict[str, str]) -> str:
    """The course's own nbgrader configuration, with the exam's roster and limits."""
    return (COURSE / "nbgrader_config.py").read_text() + f"""

# --- The bug clinic exam {name!r}, written by `make clinic-exam` (course_tools/clinic_exam.py): do not edit. ---
# The roster (student id -> case code) is the grader's, course_tools.grading.exam_verdict: it stays in this course
# root, which no student receives.
c.ClinicExam.rosters = {{{name!r}: {json.dumps(roster, indent=1, sort_keys=True)}}}
c.SandboxedExecute.assignment_limits[{name!r}] = {LIMITS!r}
# What the feedback reads to name the section that teaches a bug (torchdoctor.clinic.pointers), read-only in the jail.
c.SandboxedKernelManager.extra_paths.extend({pointer_files()!r})
"""


def pointer_files() -> list[str]:
    """The course manifest and the chapter notebooks it names: where the clinic's hints find a chapter's sections."""
    from torchdoctor.manifest import load_manifest, manifest_path

    manifest = manifest_path().resolve()
    notebooks = [manifest.parent / chapter.notebook for chapter in load_manifest().chapters]
    return [str(manifest), *(str(path) for path in notebooks if path.is_file())]


def personal(release: nbformat.NotebookNode, code: str) -> nbformat.NotebookNode:
    """The released notebook with a student's case code filled in."""
    nb = nbformat.from_dict(json.loads(json.dumps(release)))
    cell = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "case_code")
    cell.source = f'CASE_CODE = "{code}"  # your case: do not change it'
    return nb


def build(students: list[str], seed: str, out: Path, name: str, force: bool = False) -> dict[str, str]:
    """Write the exam (see the module's docstring); the roster, student id -> case code."""
    if not seed.strip():
        raise ExamError("SEED is required: any text (keep it to yourself); it decides every student's case")
    if not STUDENT_ID.fullmatch(name):
        raise ExamError(f"{name!r} is not a valid assignment name")
    course = out / "course"
    if (course / "submitted").exists() and not force:
        raise ExamError(f"{course / 'submitted'} exists: an exam was handed in there, and a new SEED or roster "
                        "would grade it against other cases; choose another EXAM_DIR, or pass --force")
    from torchdoctor.clinic.practice import Case

    pool = exam_pool()
    drawn = assign(seed, students, pool)
    cases = {student: Case(entry["template"], entry["operator"], run_seed) for student, (entry, run_seed) in
             drawn.items()}
    roster = {student: case.code for student, case in cases.items()}
    source = course / "source" / name
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    nbformat.write(source_notebook(pool[0]), source / f"{name}.ipynb")
    (course / "nbgrader_config.py").write_text(course_config(name, roster))
    nbgrader("generate_assignment", name, "--force", course=course)
    release = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
    for student, code in roster.items():
        folder = out / "students" / student
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(personal(release, code), folder / f"{name}.ipynb")
    with open(out / "roster.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "case_code", "template", "bug", "run_seed"])
        writer.writerows([s, cases[s].code, entry["template"], entry["operator"], run_seed]
                         for s, (entry, run_seed) in drawn.items())
    return roster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, help="how many students: student01, student02, ...")
    parser.add_argument("--roster-file", type=Path, help="a file of student ids, one a line")
    parser.add_argument("--seed", default="", help="any text: with a student id, it decides the student's case")
    parser.add_argument("--out", type=Path, default=Path("build/clinic_exam"), help="default: build/clinic_exam")
    parser.add_argument("--name", default="clinic_exam", help="the assignment's name (default: clinic_exam)")
    parser.add_argument("--force", action="store_true", help="write it again over handed-in submissions")
    options = parser.parse_args(argv)
    try:
        students = student_ids(options.students, options.roster_file)
        roster = build(students, options.seed, options.out, options.name, options.force)
    except ExamError as exc:
        print(f"clinic-exam: {exc}", file=sys.stderr)
        return 2
    course = options.out / "course"
    print(f"{len(roster)} students, {len(set(roster.values()))} cases: {options.out / 'roster.csv'} (the key: keep "
          f"it)\nrelease: {course / 'release' / options.name} (nbgrader release_assignment {options.name}, in "
          f"{course});\n  each student's notebook with their case code: {options.out / 'students'}/<id>/\n"
          f"grade: cd {course} && nbgrader autograde {options.name}   (or python -m course_tools.grading.autograde "
          f"{options.name} --course {course})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
