"""Match an exception, an error message or a pasted traceback against the catalog."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torchdoctor.catalog import CATALOG, ErrorEntry, chapter_title
from torchdoctor.explain_i18n import layout, translate

__all__ = ["Diagnosis", "explain", "parse_error_text"]

_QUOTING = tuple(e for e in CATALOG if e.quotes_other_errors)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CHAIN = re.compile(
    r"^(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$",
    re.MULTILINE,
)
# A line that starts an exception report: "RuntimeError: message", "torch.OutOfMemoryError: ...", "EOFError".
_HEADER = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Exit|Interrupt|Iteration))"
    r"(?::[ \t]?(?P<msg>.*))?$"
)


@dataclass(frozen=True)
class Diagnosis:
    """What an error means and how to fix it, from the catalog entry that matched it."""

    id: str
    chapter: str
    title: str
    cause: str
    fix: str
    exception_type: str | None
    message: str
    details: dict[str, str] = field(default_factory=dict)

    @property
    def chapter_title(self) -> str:
        return chapter_title(self.chapter)

    def __str__(self) -> str:
        return layout(TEXT_LAYOUT, **self._fields())

    def _repr_markdown_(self) -> str:
        return layout(MARKDOWN_LAYOUT, **self._fields())

    def _fields(self) -> dict[str, str]:
        return {"title": self.title, "id": self.id, "cause": self.cause, "fix": self.fix, "chapter": self.chapter,
                "chapter_title": self.chapter_title}


# How a diagnosis prints; translated as a whole (torchdoctor/explain_i18n.py), like the catalog's texts.
TEXT_LAYOUT = ("torchdoctor: {title} [{id}]\n  cause: {cause}\n  fix:   {fix}\n"
               "  more:  chapter '{chapter}' ({chapter_title})")
MARKDOWN_LAYOUT = ("**torchdoctor: {title}** (`{id}`)\n\n- **Cause:** {cause}\n- **Fix:** {fix}\n"
                   "- **More:** chapter `{chapter}` — {chapter_title}\n")


def parse_error_text(text: str) -> list[tuple[str | None, str]]:
    """Split pasted error text into (exception type, message) candidates, the most recent exception first.

    Understands plain Python tracebacks, IPython/Jupyter tracebacks (with colour codes), chained exceptions
    and bare messages with or without a leading "Type:". The message of an exception runs from its header
    line to the end of its block, so multi-line messages (state_dict errors, worker tracebacks) stay whole;
    headers further down a block (a traceback quoted inside a message) follow as candidates of their own.
    The whole text comes last, typed like the most recent exception (untyped when there is no header).
    """
    text = _ANSI.sub("", text).strip("\n")
    candidates: list[tuple[str | None, str]] = []
    for block in reversed(_CHAIN.split(text)):
        lines = block.strip("\n").splitlines()
        for i, line in enumerate(lines):
            m = _HEADER.match(line)
            if m:
                msg = "\n".join([m.group("msg") or "", *lines[i + 1 :]]).strip()
                candidates.append((m.group("type").rsplit(".", 1)[-1], msg))
    # Last resort: the whole text, for messages whose first line is not a "Type:" header but that quote
    # another traceback (a DataLoader worker's message pasted on its own). It keeps the type of the most
    # recent exception, so words quoted in source lines cannot pass for an error of another type.
    candidates.append((candidates[0][0] if candidates else None, text.strip()))
    return candidates


def _type_ok(entry: ErrorEntry, type_names: tuple[str, ...] | None) -> bool:
    if not entry.exception_types or type_names is None:
        return True
    return any(name in type_names for name in entry.exception_types)


def _match(
    type_names: tuple[str, ...] | None, message: str, entries: tuple[ErrorEntry, ...] = CATALOG
) -> Diagnosis | None:
    if type_names is None and not message.strip():
        return None  # nothing to go on (an empty message is meaningful only with its type, e.g. EOFError)
    for entry in entries:
        if not _type_ok(entry, type_names):
            continue
        m = entry.regex.search(message)
        if m:
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            title, cause, fix = translate(entry, m.groupdict())  # English unless TORCHDOCTOR_LANG asks otherwise
            return Diagnosis(
                id=entry.id,
                chapter=entry.chapter,
                title=title,
                cause=cause,
                fix=fix,
                exception_type=type_names[0] if type_names else None,
                message=message,
                details=groups,
            )
    return None


def explain(error: BaseException | str) -> Diagnosis | None:
    """Diagnose an exception, an error message or a whole pasted traceback; None if the error is unknown.

    For exceptions the chain (``__cause__`` / ``__context__``) is searched too, newest first.
    """
    if isinstance(error, BaseException):
        seen: set[int] = set()
        exc: BaseException | None = error
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            names = tuple(c.__name__ for c in type(exc).__mro__)
            found = _match(names, str(exc))
            if found is not None:
                return found
            exc = exc.__cause__ or exc.__context__
        return None
    if not isinstance(error, str):
        raise TypeError(
            f"explain() takes an exception or the text of an error message/traceback, not {type(error).__name__}"
        )
    candidates = parse_error_text(error)
    # A message that quotes another traceback (a DataLoader worker's) quotes its chained exceptions too, which
    # parse_error_text takes for a chain of their own and lists first: as for exceptions, the quoting entries
    # are tried first.
    for entries in (_QUOTING, CATALOG):
        for type_name, message in candidates:
            found = _match((type_name,) if type_name else None, message, entries)
            if found is not None:
                return found
    return None
