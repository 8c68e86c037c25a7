"""The bug clinic (issue 25): working training scripts, bugs injected into them by exact anchored edits, and the
validation that offers a case only when its bug shows a symptom that an oracle detects on every seed.

``python -m torchdoctor.clinic validate`` prints the matrix (docs/authors.md, "Bug clinic"). The package lives in
torchdoctor, not course_tools, because students (the clinic notebook) and the grading sandbox (an exam's hidden
test regenerates a case) import it, and the sandbox exposes the installed torchdoctor only.
"""

from torchdoctor.clinic.operators import OPERATORS, ORACLES, Edit, Operator, apply_operator, get_operator, revert
from torchdoctor.clinic.oracles import accuracy_threshold, clean_problems, fired, symptoms
from torchdoctor.clinic.templates import TEMPLATES, ClinicError, template_path, template_source
from torchdoctor.clinic.validate import CaseResult, Matrix, run_script, validate

__all__ = [
    "OPERATORS",
    "ORACLES",
    "TEMPLATES",
    "CaseResult",
    "ClinicError",
    "Edit",
    "Matrix",
    "Operator",
    "accuracy_threshold",
    "apply_operator",
    "clean_problems",
    "fired",
    "get_operator",
    "revert",
    "run_script",
    "symptoms",
    "template_path",
    "template_source",
    "validate",
]
