"""nbgrader configuration of the Torch Doctor course (this folder is the nbgrader course root).

The folder grades wherever it is copied (a grader account, a grading server), as long as the Python that runs
nbgrader has the course installed: `make setup`, or `pip install -r requirements.txt` then
`pip install --no-deps <the course repository>`, which installs the grading plugins (the course_tools package)
beside nbgrader. Nothing here depends on where this file lies.
"""

import os
from pathlib import Path

c = get_config()  # noqa: F821 -- injected by nbgrader when it loads this file

c.CourseDirectory.course_id = "torch-doctor"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each cell gets this long to run; a cell that runs longer loses its kernel (and only its own tests).
c.ExecutePreprocessor.timeout = 300
# Limits per assignment (docs/instructors.md "Grading at speed"), so an endless loop costs what the assignment
# needs, not 300 s:
# timeout (per cell) and notebook_timeout in seconds of wall-clock time, memory_mb (private memory) and cpu_seconds
# per kernel. Unlisted assignments, and limits left out, get the global settings. hw1 measured on 2 cores: slowest
# cell 1.1 s of CPU (up to 5.8 s of wall-clock time on a machine loaded 5x over), whole notebook 1.2 s of CPU.
# hw2: reference run 2-3 s in the grader, slowest cell (best_lr, six short trainings) about 1 s.
c.SandboxedExecute.assignment_limits = {
    "hw1_dimensions": {"timeout": 30, "notebook_timeout": 120, "cpu_seconds": 60, "memory_mb": 4096},
    "hw2_gradients": {"timeout": 60, "notebook_timeout": 300, "cpu_seconds": 120, "memory_mb": 4096},
    # hw5: measured on 2 cores loaded 5x over: whole notebook 8 s in a plain kernel (import torch 4 s, the given
    # cell's short training 3.7 s, every test cell under 0.2 s); in the grader, references 6 s, 13-18 s per submission
    # per worker.
    "hw5_checkpoints": {"timeout": 60, "notebook_timeout": 300, "cpu_seconds": 120, "memory_mb": 4096},
    # hw3: every cell well under 0.1 s of CPU in a warm kernel; reference run 2.0-2.2 s in the grader, 5.4-5.9 s
    # per submission per worker with the machine loaded 5x over its 2 cores (corpus of 19, 2 workers).
    "hw3_dtypes": {"timeout": 30, "notebook_timeout": 120, "cpu_seconds": 60, "memory_mb": 4096},
    # hw4: ShuffleNet V2 on the CPU (a ResNet-50 until 2026-12-02: 13.4 s of CPU per notebook). Whole source
    # notebook about 5.5 s of CPU in a warm kernel, its measured steps about 0.4 s each. A model.half() answer runs
    # float16 on the CPU: about 4 s of CPU for its measured step at batch 128. The limits were set for the ResNet-50
    # (graded under a load average of 10-14: about 34 s per submission per worker, its float16 step 56 s of CPU)
    # and are kept: generous, so no grade depends on the machine's load.
    "hw4_memory": {"timeout": 300, "notebook_timeout": 900, "cpu_seconds": 300, "memory_mb": 8192},
    # hw6: digits trainings of 0.3-1.1 s of CPU each; slowest cell test_fixed_train (three of them) 1-3.5 s of CPU,
    # whole notebook about 5 s of CPU in a plain kernel (measured on 2 cores loaded 4-5x over).
    "hw6_convergence": {"timeout": 60, "notebook_timeout": 300, "cpu_seconds": 120, "memory_mb": 4096},
}

# Hardened grading (course_tools/grading, docs/security.md): nbgrader's own autograde pipeline with
# tampered cells restored from the gradebook, each submission in a confined kernel forked by a pre-warmed zygote,
# and pass/fail taken by the grader from what the hidden tests observed. The lists are nbgrader's own defaults with
# ours swapped in, so that every option of a default preprocessor keeps working (--ClearMetadataPreprocessor.enabled)
# and a default that a new nbgrader adds is not dropped (tests/test_grading_helpers.py checks both): Execute replaced
# by its subclass SandboxedExecute; RestoreCells added before OverwriteCells; Verdicts added after the execution and
# the cleaning steps (Execute, IgnorePattern, ClearMetadataPreprocessor), before LimitOutput and SaveAutoGrades;
# ClearHiddenTracebacks and ClearHiddenTests added to feedback after GetGrades. Named as strings, so that only the
# commands that use them import them. CheckedExporter is nbgrader's exporter, checking first that the Jupyter stack
# still has what grading overrides.
from nbgrader.converters import Autograde, GenerateFeedback  # noqa: E402 -- nbgrader is loading this very file


def _hardened(converter, trait, replace=None, before=None, after=None):
    """nbgrader's default list ``converter.trait`` as dotted names, with ``replace`` ({default: ours}) swapped in,
    ``before`` ({default: [ours]}) inserted before that default and ``after`` ({(default, ...): [ours]}) after the
    last of those defaults present. A default that is gone stops grading (an nbgrader upgrade to look at)."""
    names = [item if isinstance(item, str) else f"{item.__module__}.{item.__qualname__}"
             for item in converter.class_traits()[trait].default()]
    for anchors, ours, offset in ([((a,), o, 0) for a, o in (before or {}).items()]
                                  + [(a, o, 1) for a, o in (after or {}).items()]):
        present = [i for i, name in enumerate(names) if name in anchors]
        if not present:
            raise ValueError(f"nbgrader's {converter.__name__}.{trait} no longer has {anchors}; see course_tools")
        at = max(present) + offset
        names[at:at] = ours
    return [(replace or {}).get(name, name) for name in names]


_NBG = "nbgrader.preprocessors."
_OURS = "course_tools.grading."
c.Autograde.exporter_class = f"{_OURS}compat.CheckedExporter"
c.Autograde.sanitize_preprocessors = _hardened(
    Autograde, "sanitize_preprocessors",
    before={f"{_NBG}overwritecells.OverwriteCells": [f"{_OURS}restore.RestoreCells"]})
c.Autograde.autograde_preprocessors = _hardened(
    Autograde, "autograde_preprocessors",
    replace={f"{_NBG}execute.Execute": f"{_OURS}execute.SandboxedExecute"},
    after={(f"{_NBG}execute.Execute", f"{_NBG}ignorepattern.IgnorePattern",
            "nbconvert.preprocessors.clearmetadata.ClearMetadataPreprocessor"): [f"{_OURS}verdict.Verdicts"]})
# Feedback shows each test's verdict, never the hidden tests' source, nor their lines quoted in a traceback.
c.GenerateFeedback.preprocessors = _hardened(
    GenerateFeedback, "preprocessors",
    after={f"{_NBG}getgrades.GetGrades": [f"{_OURS}feedback.ClearHiddenTracebacks", f"{_NBG}ClearHiddenTests"]})
# nbgrader collect copies links as the files they point to (the course's source, the gradebook); this one copies
# plain files only.
c.ExchangeFactory.collect = "course_tools.grading.collect.SafeCollect"

try:
    import course_tools.grading  # noqa: F401 -- only the package's name: cheap, and no grading code runs
except ImportError:
    # Without the plugins, autograde and collect stop with one line that says what to install, instead of a
    # ModuleNotFoundError traceback per submission (or a collect that follows students' symbolic links).
    import sys

    from nbconvert.exporters import NotebookExporter
    from nbgrader.converters.base import NbGraderException
    from nbgrader.exchange.abc import ExchangeError
    from nbgrader.exchange.default.collect import ExchangeCollect

    MISSING = (f"The course's grading plugins (Python package course_tools) are not installed in {sys.prefix}: "
               "install the course there (`make setup` in its repository, or `pip install -r requirements.txt` and "
               "`pip install --no-deps <path to the course repository>`) and run this command again.")

    class PluginsMissing(NotebookExporter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.log.error(MISSING)
            raise NbGraderException(MISSING)

    class CollectPluginsMissing(ExchangeCollect):
        def start(self):
            self.log.error(MISSING)
            raise ExchangeError(MISSING)

    c.Autograde.exporter_class = PluginsMissing
    c.ExchangeFactory.collect = CollectPluginsMissing

if os.environ.get("TORCHDOCTOR_PREWARM"):  # a worker of `make autograde`: import torch while nbgrader starts
    from course_tools.grading.zygote import shared_zygote

    shared_zygote()
