"""``%load_ext torchdoctor``: show a diagnosis under the traceback of every failing cell.

The handler prints the normal traceback first, through IPython's own ``showtraceback``, so the cell still
counts as failed for the kernel, papermill and nbgrader; the diagnosis is an extra output after it.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from torchdoctor.explain import explain
from torchdoctor.explain_i18n import translator

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

tr = translator("ipython")
_saved: dict[int, tuple[tuple[type[BaseException], ...], Any]] = {}


def _handler(
    shell: Any,
    etype: type[BaseException],
    value: BaseException,
    tb: TracebackType | None,
    tb_offset: int | None = None,
) -> None:
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    try:
        diagnosis = explain(value)
    except Exception as exc:  # a broken diagnosis must never hide the user's own error
        print(tr("torchdoctor: could not diagnose this error ({error})", error=f"{type(exc).__name__}: {exc}"))
        return
    if diagnosis is None:
        return
    from IPython.display import display

    display({"text/plain": str(diagnosis), "text/markdown": diagnosis._repr_markdown_()}, raw=True)


def load_ipython_extension(ipython: Any) -> None:
    """Install the handler for every ``Exception``; loading twice is harmless."""
    if id(ipython) not in _saved:
        _saved[id(ipython)] = (ipython.custom_exceptions, ipython.CustomTB)
    ipython.set_custom_exc((Exception,), _handler)


def unload_ipython_extension(ipython: Any) -> None:
    """Restore the exception handling that was in place before loading."""
    if id(ipython) not in _saved:
        return
    exceptions, custom_tb = _saved.pop(id(ipython))
    ipython.custom_exceptions = exceptions
    ipython.CustomTB = custom_tb
