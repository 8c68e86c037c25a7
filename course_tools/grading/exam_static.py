"""Refuse, before it runs, a bug-clinic exam fix that steps outside what the working script itself does.

The clinic's runner runs a fix in the same process as the measurements that judge it (losses, parameters, the
checkpoint's score), so a fix that could reach the interpreter's internals could forge them. An exam fix may
therefore use only what the working script (the case's template) or the buggy script uses: their imports, no
introspection or escape hatch (``eval``, ``getattr``, ``open``..., dunder or private attributes), no file access
beyond theirs, no new kind of control flow that swallows an error or cuts training short (``try``, ``while``,
``break``), and no attribute assigned but ``self.name``. The protected regions' values must be used as the working
script uses them (``range(EPOCHS)`` stays ``range(EPOCHS)``), the names only the protected regions use (the data
loader, the true weights) stay inside them, and no number appears that neither script has outside its protected
regions (no hard-coded epochs, weights or thresholds), except where the bug itself changed a number given by
keyword (a learning rate: any value there is judged by running the fix). The reference fix, the working script
itself, always passes.

Pure syntax analysis: it runs in the grader's process, never the student's code.
"""

from __future__ import annotations

import ast

from torchdoctor.clinic.regions import protected_regions

__all__ = ["refusals"]

FORBIDDEN_NAMES = {"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "hasattr", "globals",
                   "locals", "vars", "dir", "open", "input", "breakpoint", "exit", "quit", "help", "memoryview",
                   "type", "object", "id", "classmethod", "staticmethod", "property"}
FORBIDDEN_NODES = {ast.Try: "try/except", ast.TryStar: "try/except*", ast.While: "while", ast.Break: "break",
                   ast.Continue: "continue", ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Delete: "del",
                   ast.Lambda: "lambda", ast.AsyncFunctionDef: "async def", ast.Await: "await", ast.Yield: "yield",
                   ast.YieldFrom: "yield from", ast.AsyncFor: "async for", ast.AsyncWith: "async with",
                   ast.Match: "match", ast.NamedExpr: ":="}
# Whole modules' escape hatches and file access (dotted prefixes of resolved names).
DENIED = ("torch.utils.cpp_extension", "torch.ops", "torch.library", "torch.hub", "torch.package", "torch.jit",
          "torch.compile", "torch.from_file", "torch.multiprocessing", "torch.distributed", "torch.classes",
          "torch.backends", "torch.storage", "torch.UntypedStorage", "torch.TypedStorage", "torch.autograd.graph",
          "numpy.ctypeslib", "numpy.memmap", "numpy.fromfile", "numpy.load", "numpy.loadtxt", "numpy.genfromtxt",
          "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.lib", "numpy.testing",
          "numpy.f2py", "numpy.DataSource")
DENIED_METHODS = {"tofile", "from_file", "untyped_storage", "storage", "register_forward_hook",
                  "register_forward_pre_hook", "register_full_backward_hook", "register_hook"}
# Modules whose every use must be one the working script makes (os: environ.get and path.join).
EXACT_MODULES = ("os",)


class _Script:
    """What one script uses, outside and inside its protected regions."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.protected_lines = {n for r in protected_regions(source) for n in range(r.start, r.end + 1)}
        self.parents = {child: node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)}
        self.imports = {ast.dump(n) for n in ast.walk(self.tree) if isinstance(n, ast.Import | ast.ImportFrom)}
        self.bindings: dict[str, str] = {}
        self.modules: set[str] = set()  # names bound by a plain ``import X [as Y]``: a module, not a protected value
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self.bindings.update({a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                                      for a in node.names})
                self.modules.update(a.asname or a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                self.bindings.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})

    def inside(self, node: ast.AST) -> bool:
        return getattr(node, "lineno", 0) in self.protected_lines

    def chain(self, node: ast.Attribute) -> str | None:
        """``np.random.RandomState`` as ``numpy.random.RandomState``; None when not rooted at an imported name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and node.id in self.bindings):
            return None
        return ".".join([self.bindings[node.id], *reversed(parts)])

    def chains(self, protected: bool | None = None) -> set[str]:
        """Every longest resolved chain (``os.path.join``, not also ``os.path``), in or out of protected regions."""
        found = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute) and not isinstance(self.parents.get(node), ast.Attribute):
                name = self.chain(node)
                if name and (protected is None or self.inside(node) == protected):
                    found.add(name)
        return found

    def names(self, protected: bool) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and self.inside(n) == protected}

    def numbers(self, free: frozenset[tuple[str, str]] = frozenset()) -> set[complex]:
        """The numbers outside the protected regions, but those given to a keyword of ``free`` (a call, a keyword)."""
        given = {id(k.value) for key, k in self.keyword_numbers().items() if key in free} if free else set()
        return {n.value for n in ast.walk(self.tree) if isinstance(n, ast.Constant) and not self.inside(n)
                and type(n.value) in (int, float, complex) and id(n) not in given}

    def keyword_numbers(self) -> dict[tuple[str, str], ast.keyword]:
        """Each number given by keyword outside the protected regions, by (the call, the keyword): ``lr=0.05``."""
        found = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and not self.inside(node):
                for k in node.keywords:
                    if k.arg and isinstance(k.value, ast.Constant) and type(k.value.value) in (int, float):
                        found[(ast.unparse(node.func), k.arg)] = k
        return found

    def contexts(self, names: set[str]) -> set[str]:
        """How the script uses protected values outside the regions: each use with its enclosing expression."""
        found = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load) \
                    and not self.inside(node):
                parent = self.parents.get(node)
                found.add(ast.unparse(parent if isinstance(parent, ast.expr) else node))
        return found


def _bound(script: _Script) -> set[str]:
    """The names the protected regions bind (EPOCHS, X_train, predict...)."""
    names = set()
    for node in ast.walk(script.tree):
        if not script.inside(node):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def refusals(clean: str, buggy: str, source: str) -> list[str]:
    """Why ``source`` (a fix of ``buggy``, whose working script is ``clean``) may not run; empty when it may."""
    try:
        ours = _Script(source)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: {exc.msg}"]
    known = [_Script(clean), _Script(buggy)]
    found: list[str] = []

    def refuse(message: str) -> None:
        if message not in found:
            found.append(message)

    allowed_imports = set().union(*(s.imports for s in known))
    allowed_attrs = {n.attr for s in known for n in ast.walk(s.tree) if isinstance(n, ast.Attribute)}
    allowed_dunders = {n.id for s in known for n in ast.walk(s.tree) if isinstance(n, ast.Name)}
    allowed_dunders |= {n.name for s in known for n in ast.walk(s.tree) if isinstance(n, ast.FunctionDef)}
    exact = {c for s in known for c in s.chains() if c.split(".")[0] in EXACT_MODULES}
    for node in ast.walk(ours.tree):
        line = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom) and ast.dump(node) not in allowed_imports:
            refuse(f"{line}: `{ast.unparse(node)}`: the exam allows only the working script's imports")
        elif type(node) in FORBIDDEN_NODES:
            refuse(f"{line}: `{FORBIDDEN_NODES[type(node)]}` is not allowed in an exam fix (fix the bug itself)")
        elif isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or
                                             (node.id.startswith("__") and node.id not in allowed_dunders)):
            refuse(f"{line}: `{node.id}` is not allowed in an exam fix")
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith("__") \
                and node.name not in allowed_dunders:
            refuse(f"{line}: defining `{node.name}` is not allowed in an exam fix")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_") and node.attr not in allowed_attrs:
                refuse(f"{line}: `.{node.attr}`: private and special attributes are not allowed in an exam fix")
            if node.attr in DENIED_METHODS:
                refuse(f"{line}: `.{node.attr}` is not allowed in an exam fix")
            if isinstance(node.ctx, ast.Store | ast.Del) and not (isinstance(node.value, ast.Name)
                                                                 and node.value.id == "self"):
                refuse(f"{line}: `{ast.unparse(node)} = ...`: an exam fix assigns no attribute but self.name")
            name = ours.chain(node)
            if name and any(name == d or name.startswith(d + ".") for d in DENIED):
                refuse(f"{line}: `{ast.unparse(node)}` is not allowed in an exam fix")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            root = node.value
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ours.bindings:
                refuse(f"{line}: `{ast.unparse(node)} = ...` changes a module's state")
        elif isinstance(node, ast.keyword) and node.arg == "weights_only" and not (
                isinstance(node.value, ast.Constant) and node.value.value is True):
            refuse(f"{line}: `weights_only` other than True is not allowed in an exam fix")
    for name in sorted(c for c in ours.chains() if c.split(".")[0] in EXACT_MODULES and c not in exact):
        refuse(f"`{name}` is not allowed in an exam fix (the working script uses {', '.join(sorted(exact))})")

    clean_script = known[0]
    # A module the working script uses only in a protected region (numpy, for the split) is still free to use
    # elsewhere (``np.float32``); what that region uses of it (``numpy.random.RandomState``) is not.
    only_protected = (clean_script.names(True) - clean_script.names(False) - clean_script.modules) | (
        clean_script.chains(True) - clean_script.chains(False))
    used_outside = ours.names(False) | ours.chains(False)
    for name in sorted(only_protected & used_outside - known[1].names(False) - known[1].chains(False)):
        refuse(f"`{name}` belongs to a protected region (the data or the evaluation); use it only there")
    # A number the bug itself changed (a learning rate) may take any value: it is judged by running the fix
    # (issue 36: a right learning rate other than the working script's own was refused).
    keywords = [{key: k.value.value for key, k in s.keyword_numbers().items()} for s in known]
    tuned = frozenset(key for key in keywords[0].keys() & keywords[1].keys() if keywords[0][key] != keywords[1][key])
    numbers = set().union(*(s.numbers() for s in known)) | {0, 1}
    for value in sorted(ours.numbers(tuned) - numbers, key=repr):
        refuse(f"the number {value!r} is in neither the buggy script nor the working one: no hard-coded epochs, "
               "weights or thresholds")
    protected_names = _bound(clean_script)
    for use in sorted(clean_script.contexts(protected_names) & known[1].contexts(protected_names)
                      - ours.contexts(protected_names)):
        refuse(f"`{use}` is gone: the protected values (epochs, data, evaluation) must be used as the working "
               "script uses them")
    return found
