"""A chapter's summary shows the messages its cells raised in the session (issue 33), through torchdoctor.raised, and
the catalog's samples where a cell has not run."""

import subprocess
import sys

from torchdoctor.cheatsheet import chapter_summary
from torchdoctor.raised import RAISED, record

SESSION = r'''
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
shell.run_cell("import torch, torchdoctor")
shell.run_cell("torch.nn.Linear(20, 3)(torch.ones(7, 33))")  # raises: a session's own numbers
shell.run_cell("import torchdoctor")  # imported again: recorded once, not twice
shell.run_cell("x = 1")
from torchdoctor.raised import RAISED
from torchdoctor.cheatsheet import chapter_summary
print(RAISED)
print(str(chapter_summary("dimensions")))
'''


def test_the_summary_shows_the_message_a_cell_raised_in_this_session():
    done = subprocess.run([sys.executable, "-c", SESSION], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[('mat1-mat2-shapes', 'RuntimeError: mat1 and mat2 shapes cannot be multiplied (7x33 and 20x3)')]" in \
        done.stdout
    assert "message: RuntimeError: mat1 and mat2 shapes cannot be multiplied (7x33 and 20x3)" in done.stdout


def test_outside_a_session_the_summary_shows_the_catalog_s_samples():
    summary = chapter_summary("dimensions")
    assert summary.messages == {} or all(m in [x for _, x in RAISED] for m in summary.messages.values())


def test_recording_never_raises_and_keeps_no_exception():
    class Result:
        error_in_exec = ValueError("nothing torchdoctor knows")

    before = list(RAISED)
    record(Result())
    record(object())  # not a result at all
    assert RAISED == before
