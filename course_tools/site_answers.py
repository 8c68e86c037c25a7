"""What the site shows of a check-yourself question: the question, never its answer.

The site's pages come from notebooks executed by the notebook runner, which puts each question's reference answer
into its answer cell and runs the check, so an executed notebook shows the answer and "Q1: correct." (with the
values the check prints for a right answer). ``hide_answers`` gives each answer cell back the source the learner
gets (``q1 = None  # your answer``) and drops the outputs of the cells that check a question.
"""

from __future__ import annotations

import re

from nbformat import NotebookNode

from course_tools.notebook_check import ANSWER_MARK

CHECK = re.compile(r"\b(?:check_answer|checking|answered)\(\s*[\"']Q\d+")


def hide_answers(executed: NotebookNode, source: NotebookNode) -> int:
    """Replace, in place, the filled-in answer cells of ``executed`` by ``source``'s cells of the same id, and clear
    the outputs of its check cells; return how many cells changed. A cell of ``executed`` missing from ``source``
    is an error: the executed copy is of another version of the notebook."""
    committed = {cell.get("id"): cell for cell in source.cells}
    changed = 0
    for cell in executed.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.startswith(ANSWER_MARK):
            if cell.get("id") not in committed:
                raise ValueError(f"answer cell {cell.get('id')!r} is not in the notebook: execute it again")
            cell.source = committed[cell.get("id")].source
        elif not CHECK.search(cell.source):
            continue
        cell.outputs, cell.execution_count = [], None
        changed += 1
    return changed
