"""nbgrader's Execute, with confined kernels and damage limited to the cell that did it.

Stock nbgrader stops a submission at the first kernel death (``os._exit``, a crash, a memory kill), leaving it
ungraded and failing the batch, and a cell that ignores the timeout's interrupt stalls every later cell for the
full timeout again. Here a cell that kills its kernel, runs past the timeout, or makes the kernel send a message the
grader cannot read (student code can write anything on the kernel's sockets), gets an error output saying so;
a new confined kernel re-runs the cells that had completed (outputs discarded) and execution goes on after the
culprit. So the submission loses the tests that culprit prevented and nothing else. After ``max_restarts``
the remaining cells are marked as not run.

Output is capped per cell (``max_output_bytes``): a flood of prints cannot exhaust the grader's memory. The whole
notebook gets ``notebook_timeout`` seconds (re-runs included): without it, cells that each stay just under the cell
timeout would hold the grading worker, and the submissions queued behind it, as long as the student liked. Cells
left when it is spent are marked as not run.
"""

from __future__ import annotations

import copy
import time
import typing as t

from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Int, default

from course_tools.grading.kernel import SandboxedKernelManager
from course_tools.grading.zygote import shared_zygote


class CellTimeout(Exception):
    """A cell ran past the timeout; its kernel is killed rather than interrupted."""


def kernel_error(ename: str, message: str) -> NotebookNode:
    return new_output("error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


_reported = False


def _report_protections(log: t.Any) -> None:
    """Log, once per process, which protections the kernels get (a warning when some are off)."""
    global _reported
    if not _reported:
        protections = shared_zygote().protections
        (log.warning if protections.off else log.info)(protections.summary())
        _reported = True


class SandboxedExecute(Execute):
    """Execute every cell in a confined kernel; contain kernel deaths and timeouts to their cell."""

    max_restarts = Int(3, help="Kernels started anew after a death or timeout, per notebook.").tag(config=True)
    max_output_bytes = Int(1_000_000, help="Output kept per cell; the rest is dropped.").tag(config=True)
    notebook_timeout = Int(1800, help="Seconds the whole notebook may run, re-runs after a kernel death included; "
                           "the cells left when they are spent are not run.").tag(config=True)

    def __init__(self, **kwargs: t.Any) -> None:
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(**kwargs)

    @default("shutdown_kernel")
    def _shutdown_kernel_default(self) -> str:
        return "immediate"

    _output_bytes: dict[int, int]

    def preprocess(self, nb: NotebookNode, resources: t.Any = None, km: t.Any = None) -> tuple[NotebookNode, t.Any]:
        _report_protections(self.log)
        NotebookClient.__init__(self, nb, km)  # as ExecutePreprocessor.preprocess does: resets the client
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._output_bytes = {}
        completed: list[int] = []
        position, restarts = 0, 0
        self._deadline = time.monotonic() + self.notebook_timeout
        while position < len(nb.cells):
            spent = time.monotonic() >= self._deadline
            if restarts > self.max_restarts or spent:
                why = "the notebook used up its time" if spent else "the kernel died or timed out too often"
                for cell in nb.cells[position:]:
                    if cell.cell_type == "code":
                        cell.outputs = [kernel_error("NotRun", f"not run: {why}")]
                break
            with self.setup_kernel():
                replaying = True
                try:
                    info = self.wait_for_reply(self.kc.kernel_info())
                    self.nb.metadata["language_info"] = info["content"]["language_info"]
                    for index in completed:
                        self.execute_cell(copy.deepcopy(nb.cells[index]), index, store_history=True)
                    replaying = False
                    while position < len(nb.cells) and time.monotonic() < self._deadline:
                        self.preprocess_cell(nb.cells[position], resources, position)
                        completed.append(position)
                        position += 1
                except Exception as exc:
                    # DeadKernelError, CellTimeout, or a message the grader cannot read (student code can write
                    # anything on the kernel's sockets: a bad signature, unparseable JSON): the cell's fault.
                    restarts += 1
                    if replaying:  # not the next cell's fault: try again, within max_restarts
                        self.log.warning("the kernel failed while re-running completed cells; restarting it")
                        continue
                    if isinstance(exc, CellTimeout):
                        what = "ran past the time limit"
                    elif isinstance(exc, DeadKernelError):
                        what = "ended the kernel"
                    elif isinstance(exc, CellTimeoutError):  # the kernel's output stopped short of "idle"
                        what = "left its output unfinished (oversized or lost messages)"
                    else:
                        self.log.warning("cell %d: unreadable kernel message: %r", position, exc)
                        what = f"made its kernel send what the grader cannot read ({type(exc).__name__})"
                    nb.cells[position].setdefault("outputs", []).append(kernel_error(
                        type(exc).__name__, f"this cell {what}; grading went on in a new kernel without it"))
                    self.log.warning("cell %d %s; restarting the kernel", position, what)
                    position += 1
        self.set_widgets_metadata()
        return self.nb, self.resources

    _deadline = float("inf")

    def _get_timeout(self, cell: NotebookNode | None) -> int | None:
        """The cell timeout, or less: what is left of the notebook's time."""
        timeout = super()._get_timeout(cell)
        if self._deadline == float("inf"):  # not in preprocess
            return timeout
        left = max(1, int(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None:
        self.log.error("Cell ran past the timeout (%ss); killing its kernel", timeout)
        raise CellTimeout(f"no reply in {timeout} s")

    def output(self, outs: list[NotebookNode], msg: dict, display_id: str | None, cell_index: int) -> t.Any:
        size = len(str(msg.get("content", "")))
        used = self._output_bytes.get(cell_index, 0)
        self._output_bytes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:
                outs.append(new_output("stream", name="stdout", text="\n[output truncated by the grader]\n"))
            return None
        return super().output(outs, msg, display_id, cell_index)
