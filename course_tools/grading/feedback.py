"""Feedback never shows a hidden test's lines: not in the source (nbgrader's ClearHiddenTests), nor in a traceback.

A test cell that keeps nbgrader's in-kernel verdict (visible asserts only, or a test whose reference run failed)
keeps the kernel's error output, and a Python traceback quotes the line that failed: for a failing hidden
``assert``, the hidden line itself. ``ClearHiddenTracebacks`` runs in ``generate_feedback`` before ClearHiddenTests
(it needs the hidden blocks to know their lines): every error output of the notebook loses the traceback lines
that quote a line of a hidden block, and an error message that quotes one is replaced.
"""

from __future__ import annotations

import re

from nbconvert.exporters.exporter import ResourcesDict
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
HIDDEN = "[a line of the hidden tests, not shown]"
MIN_LENGTH = 4  # shorter hidden lines (``)``, ``pass``) are too common to mean the hidden test


def hidden_lines(source: str, begin: str, end: str) -> list[str]:
    """The stripped lines between the hidden-test delimiters of a cell's source."""
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and len(line.strip()) >= MIN_LENGTH:
            lines.append(line.strip())
    return lines


class ClearHiddenTracebacks(NbGraderPreprocessor):
    """Remove the hidden tests' lines from every error output of the notebook."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        delimiters = ClearHiddenTests(config=self.config)
        begin, end = delimiters.begin_test_delimeter, delimiters.end_test_delimeter
        secret = {line for cell in nb.cells if cell.cell_type == "code" and begin in cell.source
                  for line in hidden_lines(cell.source, begin, end)}
        if not secret:
            return nb, resources
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if output.get("output_type") != "error":
                    continue
                output.traceback = [self._scrub(entry, secret) for entry in output.get("traceback", [])]
                if any(line in output.get("evalue", "") for line in secret):
                    output.evalue = HIDDEN
        return nb, resources

    @staticmethod
    def _scrub(entry: str, secret: set[str]) -> str:
        """A traceback entry (one or more lines) without the lines that quote a hidden line."""
        kept = [line if not any(s in ANSI.sub("", line) for s in secret) else HIDDEN for line in entry.split("\n")]
        return "\n".join(kept)
