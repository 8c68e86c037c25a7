"""nbgrader configuration of the Torch Doctor course (this folder is the nbgrader course root)."""

from pathlib import Path

c = get_config()  # noqa: F821 -- injected by nbgrader when it loads this file

c.CourseDirectory.course_id = "torch-doctor"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each notebook gets this long to run; one runaway submission must not stall the batch.
c.ExecutePreprocessor.timeout = 300
