"""Command line: ``python -m torchdoctor explain [MESSAGE]``.

Without MESSAGE the error text (a message or a whole traceback) is read from stdin. Exit status 0 means the
error was recognised, 1 that it was not, 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys

from torchdoctor.explain import explain
from torchdoctor.explain_i18n import layout

# The command's own messages, translated like explain()'s (TORCHDOCTOR_LANG; torchdoctor/explain_i18n.py).
NO_TEXT = "torchdoctor: no error text given; pass a message or pipe a traceback into stdin"
NOT_FOUND = "torchdoctor: this error is not in the catalog (see course/cheatsheet.ipynb for the known ones)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchdoctor", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_explain = sub.add_parser("explain", help="diagnose an error message or a pasted traceback")
    p_explain.add_argument("message", nargs="*", help="the error message; read from stdin when omitted")
    args = parser.parse_args(argv)

    text = " ".join(args.message) if args.message else sys.stdin.read()
    if not text.strip():
        print(layout(NO_TEXT), file=sys.stderr)
        return 2
    diagnosis = explain(text)
    if diagnosis is None:
        print(layout(NOT_FOUND))
        return 1
    print(diagnosis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
