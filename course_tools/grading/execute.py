"""nbgrader's Execute, with confined kernels and damage limited to the cell that did it.

Stock nbgrader stops a submission at the first kernel death (``os._exit``, a crash, a memory kill), leaving it
ungraded and failing the batch, and a cell that ignores the timeout's interrupt stalls every later cell for the
full timeout again. Here a cell that kills its kernel, runs past the timeout, or makes the kernel send a message the
grader cannot read (student code can write anything on the kernel's sockets), gets an error output saying so;
a new confined kernel re-runs the cells that had completed (outputs discarded) and execution goes on after the
culprit. So the submission loses the tests that culprit prevented and nothing else. After ``max_restarts``
the remaining cells are marked as not run.

The files the notebook wrote (plots, CSV files, checkpoints) are copied back to the notebook's folder in
``autograded/`` from the last kernel, while it still runs (``SandboxedKernelManager.copy_back``, capped): a stock
kernel writes there directly. A kernel that dies takes what it wrote with it, as its re-run starts afresh.

Output is capped per cell (``max_output_bytes``): a flood of prints cannot exhaust the grader's memory. The whole
notebook gets ``notebook_timeout`` seconds (re-runs included): without it, cells that each stay just under the cell
timeout would hold the grading worker, and the submissions queued behind it, as long as the student liked. Cells
left when it is spent are marked as not run.

Limits can differ per assignment (``assignment_limits``, keyed by assignment id, set in the course's
nbgrader_config.py): a homework that needs seconds gets a cell timeout of seconds, so an endless loop holds a
worker that long and no longer, while a training assignment gets minutes and more memory. What an assignment leaves
out comes from the global settings (``ExecutePreprocessor.timeout``, ``notebook_timeout``,
``SandboxedKernelManager.memory_mb`` and ``.cpu_seconds``). The reference run of an assignment gets its limits too.

When ``TIMINGS_ENV`` names a file, each notebook appends one JSON line to it (process, assignment, student, when it
started and ended, how long it waited for the zygote, its preloads included): ``course_tools.grading.autograde``
reports where a batch's time went from them.

Before its first kernel, a notebook has the zygote preload what its source notebook (the instructor's, in the
course's source/ folder) imports (``zygote.notebook_imports``): every kernel then starts with them imported.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import time
import typing as t
from pathlib import Path

from jupyter_core.utils import ensure_async
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Dict, Int, TraitError, default, validate

from course_tools.grading.kernel import SandboxedKernelManager
from course_tools.grading.zygote import notebook_imports, shared_zygote

TIMINGS_ENV = "TORCHDOCTOR_TIMINGS"
# What ``assignment_limits`` may set per assignment, and which object each one configures.
EXECUTE_LIMITS = ("timeout", "notebook_timeout")
KERNEL_LIMITS = ("memory_mb", "cpu_seconds")


class CellTimeout(Exception):
    """A cell ran past the timeout; its kernel is killed rather than interrupted."""

    def __init__(self, seconds: int) -> None:
        super().__init__(f"no reply in {seconds} s")
        self.seconds = seconds


def kernel_error(ename: str, message: str) -> NotebookNode:
    return new_output("error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


_reported = False


def _report_protections(log: t.Any) -> float:
    """Log, once per process, which protections the kernels get (a warning when some are off); the seconds spent
    waiting for the zygote to be ready."""
    global _reported
    if _reported:
        return 0.0
    started = time.monotonic()
    protections = shared_zygote().protections
    (log.warning if protections.off else log.info)(protections.summary())
    _reported = True
    return time.monotonic() - started


def _record_timing(**event: t.Any) -> None:
    path = os.environ.get(TIMINGS_ENV)
    if path:
        with open(path, "a") as out:  # one short line per write: appends from several workers do not interleave
            out.write(json.dumps(event) + "\n")


class SandboxedExecute(Execute):
    """Execute every cell in a confined kernel; contain kernel deaths and timeouts to their cell."""

    max_restarts = Int(3, help="Kernels started anew after a death or timeout, per notebook.").tag(config=True)
    max_output_bytes = Int(1_000_000, help="Output kept per cell; the rest is dropped.").tag(config=True)
    notebook_timeout = Int(1800, help="Seconds the whole notebook may run, re-runs after a kernel death included; "
                           "the cells left when they are spent are not run.").tag(config=True)
    assignment_limits = Dict(
        value_trait=Dict(value_trait=Int()),
        help="Limits per assignment id, each a dict of any of: timeout (seconds per cell), notebook_timeout (seconds "
             "per notebook), memory_mb and cpu_seconds (per kernel). What an assignment leaves out, and every "
             "assignment not listed, gets ExecutePreprocessor.timeout, notebook_timeout and "
             "SandboxedKernelManager's memory_mb and cpu_seconds.").tag(config=True)

    @validate("assignment_limits")
    def _check_assignment_limits(self, proposal: t.Any) -> dict[str, dict[str, int]]:
        known = EXECUTE_LIMITS + KERNEL_LIMITS
        for assignment, limits in proposal["value"].items():
            for name, value in limits.items():
                if name not in known:
                    raise TraitError(f"SandboxedExecute.assignment_limits[{assignment!r}]: unknown limit {name!r}; "
                                     f"the limits are {', '.join(known)}")
                if value <= 0:
                    raise TraitError(f"SandboxedExecute.assignment_limits[{assignment!r}][{name!r}] must be a "
                                     f"positive number, not {value}")
        return proposal["value"]

    def limits_for(self, assignment: str | None) -> dict[str, int]:
        """The limits a notebook of ``assignment`` runs under: its own, else the global ones. The kernel's are only
        present when the assignment sets them (otherwise SandboxedKernelManager's own settings apply)."""
        limits = {"timeout": self.timeout, "notebook_timeout": self.notebook_timeout}
        return {**limits, **self.assignment_limits.get(assignment or "", {})}

    def __init__(self, **kwargs: t.Any) -> None:
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(**kwargs)

    @default("shutdown_kernel")
    def _shutdown_kernel_default(self) -> str:
        return "immediate"

    _output_bytes: dict[int, int]
    _limits: dict[str, int] = {}  # replaced per notebook, never changed in place

    def create_kernel_manager(self) -> t.Any:
        """The kernel manager, with the assignment's memory and CPU limits for the kernels it starts."""
        km = super().create_kernel_manager()
        for name in KERNEL_LIMITS:
            if name in self._limits:
                setattr(km, name, self._limits[name])
        return km

    def source_notebook(self, resources: t.Any) -> Path | None:
        """The instructor's source notebook of the notebook being graded (source/<assignment>/<notebook>.ipynb in the
        course), None when nbgrader did not say which, or there is none."""
        from nbgrader.coursedir import CourseDirectory

        graded = (resources or {}).get("nbgrader", {})
        if not graded.get("assignment") or not graded.get("notebook"):
            return None
        coursedir = CourseDirectory(config=self.config)
        source = coursedir.format_path(coursedir.source_directory, ".", graded["assignment"])
        path = Path(source, f"{graded['notebook']}.ipynb")
        return path if path.is_file() else None

    def preprocess(self, nb: NotebookNode, resources: t.Any = None, km: t.Any = None) -> tuple[NotebookNode, t.Any]:
        waited = _report_protections(self.log)
        source = self.source_notebook(resources)
        if source is not None:  # what the instructor's notebook imports, imported once in the zygote, not per kernel
            preloading = time.monotonic()
            shared_zygote().preload(notebook_imports([source]))
            waited += time.monotonic() - preloading
        started = time.time()
        graded = (resources or {}).get("nbgrader", {})  # which assignment and student (none: a reference run)
        self._limits = self.limits_for(graded.get("assignment"))
        NotebookClient.__init__(self, nb, km)  # as ExecutePreprocessor.preprocess does: resets the client
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._output_bytes = {}
        completed: list[int] = []
        position, restarts = 0, 0
        self._deadline = time.monotonic() + self._limits["notebook_timeout"]
        started_once = False  # as stock nbgrader, a kernel starts even for a notebook without cells (NoSuchKernel)
        while position < len(nb.cells) or not started_once:
            started_once = True
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
                    if graded.get("student") is not None and hasattr(self.km, "copy_back"):
                        self.km.copy_back()  # what the notebook wrote, to autograded/ (as a stock kernel leaves it)
                except Exception as exc:
                    # DeadKernelError, CellTimeout, or a message the grader cannot read (student code can write
                    # anything on the kernel's sockets: a bad signature, unparseable JSON): the cell's fault.
                    restarts += 1
                    if replaying:  # not the next cell's fault: try again, within max_restarts
                        self.log.warning("the kernel failed while re-running completed cells; restarting it")
                        continue
                    if isinstance(exc, CellTimeout):
                        what = f"ran past the time limit ({exc.seconds} s)"
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
        self._deadline = float("inf")
        _record_timing(pid=os.getpid(), assignment=graded.get("assignment"), student=graded.get("student"),
                       start=started, end=time.time(), zygote_wait=waited)
        return self.nb, self.resources

    _deadline = float("inf")

    def _get_timeout(self, cell: NotebookNode | None) -> int | None:
        """The cell timeout (the assignment's), or less: what is left of the notebook's time."""
        if self._deadline == float("inf"):  # not in preprocess
            return super()._get_timeout(cell)
        timeout = super()._get_timeout(cell) if self.timeout_func is not None else self._limits["timeout"]
        if not timeout or timeout < 0:
            timeout = None
        left = max(1, int(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    async def _async_poll_kernel_alive(self) -> None:
        """nbclient's liveness poll for one cell, bound to that cell's reply task and kernel client, and ending
        with it. nbclient's reads ``self`` each second and is left running when the reply task fails on an unreadable
        message: it outlives its cell, then cancels whichever cell runs when it next finds ``self.kc`` dead, or fails
        on a reply task that is None (a new notebook's). Its first step runs once async_execute_cell has set the
        cell's reply task."""
        reply, kc = self.task_poll_for_reply, self.kc
        if reply is None or kc is None:
            return
        while not reply.done():
            await asyncio.sleep(1)
            if not reply.done() and not await ensure_async(kc.is_alive()):
                self.log.error("Kernel died while waiting for execute reply.")
                reply.cancel()
                return

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None:
        self.log.error("Cell ran past the timeout (%ss); killing its kernel", timeout)
        raise CellTimeout(timeout)

    def output(self, outs: list[NotebookNode], msg: dict, display_id: str | None, cell_index: int) -> t.Any:
        size = len(str(msg.get("content", "")))
        used = self._output_bytes.get(cell_index, 0)
        self._output_bytes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:
                outs.append(new_output("stream", name="stdout", text="\n[output truncated by the grader]\n"))
            return None
        return super().output(outs, msg, display_id, cell_index)
