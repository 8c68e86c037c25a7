"""Refuse to grade when an upgrade removed or changed a private part of the Jupyter stack that grading relies on.

``execute``, ``kernel`` and ``collect`` override or call private methods of nbclient, nbconvert, jupyter_client
and nbgrader (pinned in requirements.txt). A new version that renames one would not fail: the override would
simply never be called, and grading would go on with a protection silently gone (kernels no longer forked into
the sandbox, timeouts no longer contained). So grading checks them first and stops with one line instead:
``CheckedExporter`` (nbgrader's ``Autograde.exporter_class``, created once before any submission is touched)
and ``course_tools.grading.autograde``.
"""

from __future__ import annotations

import inspect
import typing as t
from importlib.metadata import version

from jupyter_client.client import KernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from nbclient import NotebookClient
from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import ExecutePreprocessor
from nbgrader.converters.base import NbGraderException
from nbgrader.exchange.default.collect import ExchangeCollect

from course_tools.grading.collect import SafeCollect
from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.kernel import SandboxedKernelManager
from course_tools.grading.zygote import unprotected_refusal

# (distribution, class, the names grading overrides or uses that are not public API)
RELIED_ON: tuple[tuple[str, type, tuple[str, ...]], ...] = (
    ("nbclient", NotebookClient, ("_get_timeout", "_async_handle_timeout", "reset_execution_trackers",
                                  "setup_kernel", "wait_for_reply", "execute_cell", "set_widgets_metadata", "output")),
    ("nbconvert", ExecutePreprocessor, ("_check_assign_resources",)),
    ("jupyter_client", AsyncKernelManager, ("_async_pre_start_kernel", "_async_launch_kernel",
                                            "_async_cleanup_resources", "_reconcile_connection_info", "provisioner",
                                            "transport", "ip", "connection_file")),
    ("jupyter_client", LocalProvisioner, ("process", "pid", "pgid", "connection_info")),
    ("jupyter_client", KernelClient, ("_handle_kernel_info_reply",)),
    ("nbgrader", ExchangeCollect, ("do_copy", "get_size")),
)
OVERRIDES = (SandboxedExecute, SandboxedKernelManager, SafeCollect)


def _accepts(ours: t.Any, base: t.Any) -> bool:
    """Whether our override takes what callers of the base method pass: the same positional parameters, and every
    keyword-only one (by name or through ``**kwargs``)."""
    mine, theirs = inspect.signature(ours).parameters, inspect.signature(base).parameters
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if [n for n, p in mine.items() if p.kind in positional] != [n for n, p in theirs.items() if p.kind in positional]:
        return False
    catch_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in mine.values())
    return all(catch_all or n in mine for n, p in theirs.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)


def problems() -> list[str]:
    """What is missing or changed, one phrase each; empty when grading can run."""
    found = []
    for dist, cls, names in RELIED_ON:
        missing = [name for name in names if not hasattr(cls, name)]
        if missing:
            found.append(f"{dist} {version(dist)} has no {cls.__name__}.{', .'.join(missing)}")
    for ours in OVERRIDES:  # a private method we override must still take what its callers pass
        for name, function in vars(ours).items():
            if not (name.startswith("_") and not name.startswith("__") and inspect.isfunction(function)):
                continue
            base = next((vars(b)[name] for b in ours.__mro__[1:] if name in vars(b)), None)
            if base is not None and callable(base) and not _accepts(function, base):
                found.append(f"{base.__module__.split('.')[0]} changed {ours.__mro__[1].__name__}.{name}"
                             f"{inspect.signature(base)}")
    return found


def refusal() -> str | None:
    """The one line that says why grading cannot run here, or None."""
    found = problems()
    if not found:
        return unprotected_refusal()  # neither root nor unprivileged user namespaces here (zygote.refusal)
    return (f"Grading refuses to start: {'; '.join(found)} (course_tools/grading overrides it). Install the pinned "
            "Jupyter stack of requirements.txt (make setup), or port course_tools/grading to the new version.")


class CheckedExporter(NotebookExporter):
    """nbgrader's default exporter for autograde, created before any submission is graded: it stops the run
    (one error line, exit status 1) when ``refusal`` finds a problem."""

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        line = refusal()
        if line:
            self.log.error(line)
            raise NbGraderException(line)
