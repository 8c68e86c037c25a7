"""Turn stock nbgrader hidden tests (plain asserts) into observed ones, judged by the grader outside the kernel.

A hidden test made of ``assert`` statements is judged where it runs, in the student's kernel, where student code can
make it pass (docs/security.md); this course grades such a test as nbgrader does and marks it "not protected".
This converter rewrites each hidden-tests block of a source notebook so that it observes instead:

- ``assert A == B`` records the values of both sides (``torchdoctor.observe.describe``: tensors by dtype, shape and
  values; numbers within the grader's tolerance), so the decision is the grader's comparison with the reference
  solution's values;
- any other ``assert`` records its truth value (computed in the kernel: better than nothing, weaker than values;
  rewrite such checks by hand as ``record.check`` of the values that matter);
- the block then displays one record (``Record.show()``); every check counts, all-or-nothing as in stock nbgrader.

Statements other than asserts run unchanged. Then regenerate the assignment (``nbgrader generate_assignment``), as
after any change of the source notebook.

Usage: python -m course_tools.grading.observe_asserts SOURCE.ipynb [--output OUT.ipynb]
(default output: SOURCE.observed.ipynb beside it; the source is never changed)
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MAX_NAME = 80

PRELUDE = '''\
from torchdoctor.observe import Record as _TdRecord, describe as _td_describe
_td_record = _TdRecord()


def _td_check(name, observe):
    taken = sum(1 for n in _td_record.checks if n == name or n.startswith(name + " #"))
    _td_record.check(name if not taken else f"{name} #{taken + 1}", observe)

'''
EPILOGUE = "\n_td_record.show()\n"


class _Asserts(ast.NodeTransformer):
    """Each ``assert`` becomes a ``_td_check`` of its values (``==``) or of its truth value."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.count += 1
        test = node.test
        name = f"line {node.lineno}: {ast.unparse(test)}"  # lines of the hidden block
        name = name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            observed = f"[_td_describe({ast.unparse(test.left)}), _td_describe({ast.unparse(test.comparators[0])})]"
        else:
            observed = f"bool({ast.unparse(test)})"
        call = ast.parse(f"_td_check({name!r}, lambda: {observed})").body[0]
        return ast.copy_location(call, node)


def convert_block(code: str) -> tuple[str, int]:
    """The observed version of a hidden-tests block's code, and how many asserts it converted (0: unchanged)."""
    tree = ast.parse(code)
    transformer = _Asserts()
    tree = ast.fix_missing_locations(transformer.visit(tree))
    if not transformer.count:
        return code, 0
    return PRELUDE + ast.unparse(tree) + EPILOGUE, transformer.count


def convert_cell(source: str) -> tuple[str, int]:
    """A test cell's source with its hidden-tests block converted (the visible part is left as it is)."""
    if BEGIN not in source or END not in source or "Record" in source:
        return source, 0
    head, rest = source.split(BEGIN, 1)
    block, tail = rest.split(END, 1)
    converted, count = convert_block(block)
    return (f"{head}{BEGIN}\n{converted.strip()}\n{END}{tail}", count) if count else (source, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="an nbgrader source notebook")
    parser.add_argument("--output", type=Path, help="where to write (default: SOURCE.observed.ipynb)")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"No such notebook: {args.source}", file=sys.stderr)
        return 2
    output = args.output or args.source.with_suffix(".observed.ipynb")
    nb = nbformat.read(args.source, as_version=4)
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "?")
        if cell.cell_type != "code":
            continue
        try:
            cell.source, count = convert_cell(cell.source)
        except SyntaxError as exc:
            print(f"{grade_id}: left as it is, its hidden tests do not parse ({exc.msg}, line {exc.lineno})")
            continue
        if count:
            print(f"{grade_id}: {count} assert(s) now observed")
    nbformat.write(nb, output)
    print(f"Wrote {output}; regenerate the assignment (nbgrader generate_assignment) before grading with it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
