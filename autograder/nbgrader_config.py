"""nbgrader configuration of the Torch Doctor course (this folder is the nbgrader course root)."""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- injected by nbgrader when it loads this file

c.CourseDirectory.course_id = "torch-doctor"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each cell gets this long to run; a cell that runs longer loses its kernel (and only its own tests).
c.ExecutePreprocessor.timeout = 300

# Hardened grading (course_tools/grading, README "Grading you can trust"): nbgrader's own autograde pipeline with
# tampered cells restored from the gradebook, each submission in a confined kernel forked by a pre-warmed zygote,
# and pass/fail taken by the grader from what the hidden tests observed. Named as strings, so that only autograde
# imports them; autograde fails loudly, rather than grade unprotected, when course_tools cannot be imported.
_repo = Path(__file__).resolve().parent.parent
if (_repo / "course_tools" / "grading").is_dir():
    if str(_repo) not in sys.path:
        sys.path.insert(0, str(_repo))
    # nbgrader collect copies links as the files they point to (the course's source, the gradebook); this one
    # copies plain files only. Set only where course_tools exists: scratch copies of the course lack it.
    c.ExchangeFactory.collect = "course_tools.grading.collect.SafeCollect"
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "course_tools.grading.restore.RestoreCells",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Autograde.autograde_preprocessors = [
    "course_tools.grading.execute.SandboxedExecute",
    "course_tools.grading.verdict.Verdicts",
    "nbgrader.preprocessors.IgnorePattern",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# Feedback shows each test's verdict, never the hidden tests' source.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
if os.environ.get("TORCHDOCTOR_PREWARM"):  # a worker of `make autograde`: import torch while nbgrader starts
    from course_tools.grading.zygote import shared_zygote

    shared_zygote()
