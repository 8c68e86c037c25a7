"""Match an exception, an error message or a pasted traceback against the catalog."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from torchdoctor.catalog import CATALOG, ErrorEntry, chapter_title
from torchdoctor.explain_i18n import layout, translate

__all__ = ["Diagnosis", "explain", "parse_error_text"]

_QUOTING = tuple(e for e in CATALOG if e.quotes_other_errors)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The lines that join the tracebacks of a chain. "During handling ...": the next exception was raised by the code that
# handled the one above it (implicit, ``__context__``); "direct cause": it was raised from it on purpose (``raise ...
# from``, ``__cause__``). The group keeps the separator in re.split's result.
_IMPLICIT = "During handling of the above exception, another exception occurred:"
_CHAIN = re.compile(
    rf"^({re.escape(_IMPLICIT)}"
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
    # The last exception of the chain ("Type: message", shortened) when it was raised by the code that handled the
    # one diagnosed ("During handling of the above exception, another exception occurred"); None otherwise.
    handler_error: str | None = None

    @property
    def chapter_title(self) -> str:
        return chapter_title(self.chapter)

    def __str__(self) -> str:
        text = layout(TEXT_LAYOUT, **self._fields())
        if self.handler_error is not None:
            text += "\n" + layout(HANDLED_TEXT, handler_error=self.handler_error)
        return text

    def _repr_markdown_(self) -> str:
        text = layout(MARKDOWN_LAYOUT, **self._fields())
        if self.handler_error is not None:
            text += layout(HANDLED_MARKDOWN, handler_error=self.handler_error.replace("`", "'"))
        return text

    def _fields(self) -> dict[str, str]:
        return {"title": self.title, "id": self.id, "cause": self.cause, "fix": self.fix, "chapter": self.chapter,
                "chapter_title": self.chapter_title}


# How a diagnosis prints; translated as a whole (torchdoctor/explain_i18n.py), like the catalog's texts.
TEXT_LAYOUT = ("torchdoctor: {title} [{id}]\n  cause: {cause}\n  fix:   {fix}\n"
               "  more:  chapter '{chapter}' ({chapter_title})")
MARKDOWN_LAYOUT = ("**torchdoctor: {title}** (`{id}`)\n\n- **Cause:** {cause}\n- **Fix:** {fix}\n"
                   "- **More:** chapter `{chapter}` — {chapter_title}\n")
# The line added under a diagnosis of an exception that another one followed while it was being handled.
HANDLED_TEXT = ("  note:  this error happened first; the last one in the traceback ({handler_error}) came from the "
                "code that handled it")
HANDLED_MARKDOWN = ("- **Note:** this error happened first; the last one in the traceback (`{handler_error}`) came "
                    "from the code that handled it\n")


def _short(type_name: str | None, message: str, width: int = 72) -> str:
    """An exception in one short line, for the note: "RuntimeError: view size is not compatible with…"."""
    line = message.strip().split("\n", 1)[0].strip()
    text = f"{type_name}: {line}" if type_name and line else (type_name or line)
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _in_order(newest: list, links: list[bool]) -> list[tuple[object, bool]]:
    """The exceptions of a chain, newest first (``links[i]``: True when ``newest[i]`` was raised while ``newest[i + 1]``
    was being handled), in the order explain tries them, each with whether it comes before the newest.

    While handling an exception, code that raises another leaves the first as the real error: it comes before the
    newer one (with all that led to it). An exception raised *from* another on purpose (``raise ... from``, a
    wrapper that names what it was doing) comes before its cause, as does one whose context was suppressed.
    """
    order = [len(newest) - 1]
    for i in range(len(newest) - 2, -1, -1):
        order = [*order, i] if links[i] else [i, *order]
    first = order.index(0)
    return [(newest[i], position < first) for position, i in enumerate(order)]


def parse_error_text(text: str) -> list[tuple[str | None, str]]:
    """Split pasted error text into (exception type, message) candidates, in the order explain tries them.

    Understands plain Python tracebacks, IPython/Jupyter tracebacks (with colour codes), chained exceptions
    and bare messages with or without a leading "Type:". The message of an exception runs from its header
    line to the end of its block, so multi-line messages (state_dict errors, worker tracebacks) stay whole;
    headers further down a block (a traceback quoted inside a message) follow as candidates of their own.
    The most recent exception comes first, except after "During handling of the above exception, another
    exception occurred": there the exception being handled comes before the one its handler raised, as in
    explain(). The whole text comes last, typed like the most recent exception (untyped when there is no
    header).
    """
    blocks, links, whole = _text_chain(text)
    return [candidate for headers, _ in _in_order(blocks, links) for candidate in headers] + [whole]


def _text_chain(text: str) -> tuple[list[list[tuple[str, str]]], list[bool], tuple[str | None, str]]:
    """The exceptions of pasted text block by block, the most recent block first (each block's headers in the order
    they appear), whether each link between blocks is implicit ("During handling ..."), and the whole text."""
    text = _ANSI.sub("", text).strip("\n")
    parts = _CHAIN.split(text)  # block, separator, block, ..., oldest first
    blocks: list[list[tuple[str, str]]] = []
    for block in parts[::-1][::2]:
        lines = block.strip("\n").splitlines()
        blocks.append([])
        for i, line in enumerate(lines):
            m = _HEADER.match(line)
            if m:
                msg = "\n".join([m.group("msg") or "", *lines[i + 1 :]]).strip()
                blocks[-1].append((m.group("type").rsplit(".", 1)[-1], msg))
    links = [separator == _IMPLICIT for separator in parts[-2::-2]]
    # Last resort: the whole text, for messages whose first line is not a "Type:" header but that quote
    # another traceback (a DataLoader worker's message pasted on its own). It keeps the type of the most
    # recent exception, so words quoted in source lines cannot pass for an error of another type.
    latest_type = next((type_name for headers in blocks for type_name, _ in headers), None)
    return blocks, links, (latest_type, text.strip())


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


def _exception_chain(error: BaseException) -> tuple[list[BaseException], list[bool]]:
    """The chain Python prints for ``error``, newest first (``__cause__``, else ``__context__``, as before a
    suppressed context too), and for each link whether it is implicit: raised while handling the older one,
    "During handling of the above exception, another exception occurred"."""
    chain, links, seen = [error], [], {id(error)}
    exc = error
    while True:
        older = exc.__cause__ or exc.__context__
        if older is None or id(older) in seen:
            return chain, links
        links.append(exc.__cause__ is None and not exc.__suppress_context__)
        chain.append(older)
        seen.add(id(older))
        exc = older


def explain(error: BaseException | str) -> Diagnosis | None:
    """Diagnose an exception, an error message or a whole pasted traceback; None if the error is unknown.

    For exceptions the chain (``__cause__`` / ``__context__``) is searched too, and so are the exceptions of a pasted
    chained traceback. An exception raised while another was being handled ("During handling of the above
    exception, another exception occurred": ``__context__``) is usually a failure of the handling code, so the
    exception it handled is tried first, and the diagnosis names the newer one as coming from the code that handled
    it (``handler_error``). An exception raised *from* another on purpose (``raise ... from``: ``__cause__``) was
    worded by code that knew what it was doing, so it is tried before its cause, newest first, as are exceptions
    whose context was suppressed.
    """
    if isinstance(error, BaseException):
        chain, links = _exception_chain(error)
        for exc, before_newest in _in_order(chain, links):
            names = tuple(c.__name__ for c in type(exc).__mro__)
            found = _match(names, str(exc))
            if found is not None and before_newest:
                return replace(found, handler_error=_short(type(error).__name__, str(error)))
            if found is not None:
                return found
        return None
    if not isinstance(error, str):
        raise TypeError(
            f"explain() takes an exception or the text of an error message/traceback, not {type(error).__name__}"
        )
    blocks, links, whole = _text_chain(error)
    # A message that quotes another traceback (a DataLoader worker's "Caught ... in DataLoader worker process")
    # quotes its chained exceptions too, which the text splits as a chain of its own: as for exceptions, the
    # quoting entries are tried first, on every exception of the text, most recent first.
    for type_name, message in [candidate for headers in blocks for candidate in headers] + [whole]:
        found = _match((type_name,) if type_name else None, message, _QUOTING)
        if found is not None:
            return found
    latest = _short(*blocks[0][0]) if blocks[0] else None
    for headers, before_latest in [*_in_order(blocks, links), ([whole], False)]:
        for type_name, message in headers:
            found = _match((type_name,) if type_name else None, message)
            if found is not None and before_latest and latest is not None:
                return replace(found, handler_error=latest)
            if found is not None:
                return found
    return None
