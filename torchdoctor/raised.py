"""The errors a notebook's cells have raised in this session, so that a chapter's summary shows the messages the
learner actually met rather than the catalog's samples (issue 33).

Importing torchdoctor in IPython registers :func:`record` after every cell (once per session). Only the diagnosis id and
the message are kept, never the exception: an exception holds its traceback's frames and every tensor they reference.
"""

from __future__ import annotations

import sys

__all__ = ["RAISED", "raised_message", "record", "track"]

RAISED: list[tuple[str, str]] = []  # (catalog id, "Type: message"), in the order the cells raised them


def record(result: object) -> None:
    """IPython's post_run_cell callback: keep the diagnosis of the error a cell raised, if explain() knows it. Never
    raises and never prints (a grade cell that writes to stderr scores nothing)."""
    error = getattr(result, "error_in_exec", None)
    if error is None:
        return
    try:
        from torchdoctor.explain import explain

        diagnosis = explain(error)
        if diagnosis is not None:
            RAISED.append((diagnosis.id, f"{diagnosis.exception_type or type(error).__name__}: {diagnosis.message}"))
    except Exception:  # noqa: BLE001, S110  (a summary without this message is better than a broken cell)
        pass


def track() -> None:
    """Register :func:`record` with the running IPython, once; nothing outside IPython (which it never imports: a
    script or a grading zygote that imports torchdoctor does not pay for IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    callbacks = shell.events.callbacks["post_run_cell"]
    if not any(getattr(cb, "__qualname__", "") == record.__qualname__ and getattr(cb, "__module__", "") == __name__
               for cb in callbacks):
        shell.events.register("post_run_cell", record)


def raised_message(entry_id: str) -> str | None:
    """The first message of this session's errors that explain() files under ``entry_id``, or None."""
    return next((message for found, message in RAISED if found == entry_id), None)
