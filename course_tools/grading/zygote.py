"""A pre-warmed process that forks one confined kernel per submission.

Starting a Python kernel and importing torch costs seconds; forking a process that has already done both costs
milliseconds. The zygote imports ipykernel once, and the modules it is asked to preload (its arguments; torch and
whatever else the instructor's source notebooks import: ``notebook_imports``), finds out which protections the
machine allows (``sandbox.probe``), then serves requests, one JSON line each on stdin, answered on stdout:

- ``{"preload": [module, ...]}``: import these too (one that does not import is left out), so that every kernel
  forked afterwards has them. A module whose import leaves a thread running is refused: the zygote runs itself again
  from scratch without it (its kernels import it themselves). Answer: ``{"preloaded": [...], "refused": [...]}``.

- ``{"jail": {...}, "connection_file": path}``: fork a keeper, which builds the kernel's namespaces and jail
  (``sandbox.enter``) and forks the kernel: it confines itself (``sandbox.confine``) and runs an IPython kernel on
  that connection file. Answer: ``{"pid": pid}``, the keeper's pid: the keeper lives as long as its kernel, and
  killing it kills the kernel and, through the PID namespace, everything the kernel spawned. A jail with an
  ``argv`` (a kernelspec that is not this Python's ipykernel) runs that command instead, confined the same way; the
  keeper seals its socket folder once the five sockets exist, then creates ``jail.sealed`` (outside the jail), which
  the grader waits for before it sends anything.
- ``{"reap": uid}``: kill every process left running as that kernel uid (as root, kernels without a PID namespace
  of their own could leave some behind). Answer: ``{"reaped": uid}``.

Before each fork the zygote freezes its objects (``gc.freeze``): a kernel's garbage collections then skip the
~350,000 objects that torch and its companions left in the zygote's memory. Without it, a kernel's first full
collection walked them all and wrote to each, copying every page they live on (copy-on-write): measured on the 2-core
machine, a forked child that starts an IPython shell, runs one cell and collects used 0.33-0.35 s of CPU, 0.06 s with
the freeze. A grading kernel seldom runs a full collection, so in grading the gain is small: the hw3 corpus's zygotes
and kernels used 10.5-11.3 s of CPU with the freeze, 12.6 s without (58 submissions, loaded machine; a sampler of
/proc). It is larger where a kernel walks the heap (``torchdoctor.memory``'s ``gc.get_objects``). Frozen objects are
also left out of ``gc.get_objects()`` in the kernel; they are the modules' own, and no
tensor a notebook creates is among them.

On one machine, the local workers of a run share one zygote (``MachineZygote``, started by ``autograde`` before
the workers): it imports once, listens on a Unix socket in a private folder, and forks, for each connection that
sends its token first, a zygote that serves that connection as above (its kernels die when the connection closes,
with the worker that held it). Each worker's ``Zygote`` connects to it instead of starting its own (``SOCKET_ENV``).

The zygote never runs student code itself, never imports a module a submission names, and holds no thread when it
forks (it checks ``/proc/self/task`` after every preload and before every fork; numpy's OpenBLAS pool is kept to
the calling thread, ``OPENBLAS_NUM_THREADS=1``). It exits when its stdin closes, and its kernels die with it
(``PR_SET_PDEATHSIG``). ``Zygote`` is the grader's side of that pipe; it refuses to start a kernel without the
namespaced protections unless the instructor allowed it (``ALLOW_UNPROTECTED_ENV``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

from course_tools.grading.sandbox import NAMESPACED, Jail, Limits, Protections, probe

REPO = Path(__file__).resolve().parents[2]
DISABLE_ENV = "TORCHDOCTOR_SANDBOX_DISABLE"  # comma-separated protections to turn off, or "all"
ALLOW_UNPROTECTED_ENV = "TORCHDOCTOR_ALLOW_UNPROTECTED"  # "1": grade even without network/filesystem/processes
SOCKET_ENV = "TORCHDOCTOR_ZYGOTE_SOCKET"  # the machine's zygote's socket (``MachineZygote``): connect, not start one
TOKEN_ENV = "TORCHDOCTOR_ZYGOTE_TOKEN"  # what a connection to it must send first
MACHINE_WAIT = 300  # seconds a worker waits for the machine's zygote to listen (its imports, on a loaded machine)
PREWARM_ENV = "TORCHDOCTOR_PREWARM"  # set: start the zygote as soon as nbgrader loads its configuration
# What DISABLE_ENV can name: the protections, and the unprivileged route (as if this machine refused user namespaces)
PROTECTION_NAMES = ("network", "filesystem", "processes", "unprivileged_user", "user_namespace")
# The only variables of the grader's environment the zygote (and so every kernel it forks) gets: a kernel's
# student code reads its whole memory, and prints land in the feedback, so the grader's tokens and credentials
# (JUPYTERHUB_API_TOKEN, cloud keys, ...) must never be in it, not even in the process's initial environment block.
KEPT_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH",
            DISABLE_ENV)
# What every zygote imports before it forks anything; the rest (torch included) only when a source notebook imports
# it (``notebook_imports``, ``Zygote.preload``): nbgrader's own notebooks pay no torch import.
# ipykernel.debugger too: every kernel imports it (and debugpy's pydevd) while it starts, 0.14 s of the 0.21 s a
# forked kernel took to initialise (measured; no thread started).
ALWAYS = ("ipykernel.ipkernel", "ipykernel.kernelapp", "IPython", "ipykernel.debugger")
# Preloaded whenever torch is: constructing any torch.optim optimizer imports torch._dynamo (and sympy) on first use,
# about 2 s of imports per kernel.
WITH_TORCH = ("torch._dynamo",)


def kernel_environment(environ: dict[str, str]) -> dict[str, str]:
    """The zygote's environment: an allow-list of the grader's, and this repository on PYTHONPATH."""
    kept = {k: v for k, v in environ.items() if k in KEPT_ENV or k.startswith("LC_")}
    return {**kept, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))}


def _run_kernel(jail: Jail, protections: Protections, connection_file: str) -> int:
    """In the forked keeper: build the jail, fork the kernel, make the socket folder read-only for it once it has
    bound its sockets, and wait for it; its exit status."""
    from course_tools.grading.sandbox import enter, seal

    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    log = os.open(os.path.join(jail.sockets, "kernel.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 1024)
    enter(jail, protections)
    bound_r, bound_w = os.pipe()
    sealed_r, sealed_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(bound_r)
        os.close(sealed_w)
        code = 0
        try:
            if jail.argv:
                os.close(bound_w)
                os.close(sealed_r)
                _exec_kernel(jail, protections)
            else:
                _serve_kernel(jail, protections, connection_file, bound_w, sealed_r)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 70
        os._exit(code)
    os.close(bound_w)
    os.close(sealed_r)
    signal.signal(signal.SIGINT, lambda *_: os.kill(pid, signal.SIGINT))  # jupyter's interrupt, for the kernel
    if (_sockets_bound(connection_file, pid) if jail.argv else os.read(bound_r, 1)):
        seal(jail, protections)
        if jail.sealed:
            Path(jail.sealed).touch()  # outside the jail: the grader starts talking to the kernel
        if not jail.argv:
            os.write(sealed_w, b"1")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _sockets_bound(connection_file: str, pid: int, timeout: float = 120) -> bool:
    """In the keeper of a kernel that is not the zygote's: wait until it has bound its five ipc sockets (their files
    exist); False when it ended or took too long."""
    import time

    info = json.loads(Path(connection_file).read_text())
    names = [f"{info['ip']}-{info[k]}" for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(os.path.exists(n) for n in names):
            return True
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:  # ended (not reaped)
            return False
        time.sleep(0.005)
    return False


def _exec_kernel(jail: Jail, protections: Protections) -> None:
    """In the kernel, for a kernelspec that is not the zygote's Python: confine, then run the kernelspec's argv. No
    student code runs before the keeper seals the socket folder: the grader sends none until then."""
    from course_tools.grading.sandbox import confine

    assert jail.argv
    confine(jail, protections)
    os.execvpe(jail.argv[0], jail.argv, dict(os.environ))


def _serve_kernel(jail: Jail, protections: Protections, connection_file: str, bound: int, sealed: int) -> None:
    """In the kernel: confine, bind the sockets, wait for the keeper to seal them, serve until shut down or killed."""
    from course_tools.grading.sandbox import confine

    confine(jail, protections)  # the kernel's working folder included
    if jail.torch_threads and "torch" in sys.modules:
        import torch

        torch.set_num_threads(jail.torch_threads)
    elif jail.torch_threads:  # torch not preloaded: it reads its threads from the environment when imported
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(jail.torch_threads)
    from ipykernel.kernelapp import IPKernelApp

    sys.argv = ["ipykernel", "-f", connection_file]
    app = IPKernelApp.instance()
    app.initialize(["-f", connection_file, "--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Plain"])
    os.write(bound, b"1")
    os.close(bound)
    if os.read(sealed, 1) != b"1":  # the keeper is gone
        raise RuntimeError("the kernel's keeper did not seal its socket folder")
    os.close(sealed)
    app.start()


def _reap(uid: int) -> None:
    """Kill every process of ``uid``: a child that becomes that uid and signals everything it may (-1)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def machine_protections() -> Protections:
    """The protections kernels get here: what the machine allows, less what DISABLE_ENV turns off."""
    return _probed(os.geteuid(), os.environ.get(DISABLE_ENV, ""))


@functools.cache
def _probed(uid: int, requested: str) -> Protections:
    """``probe`` once per process, uid and DISABLE_ENV: it forks three children, and every nbgrader converter checks
    (``compat.CheckedExporter``), so a grading worker paid 0.17 s a submission for an answer that does not change."""
    disabled = frozenset(PROTECTION_NAMES if requested == "all" else filter(None, requested.split(",")))
    return probe(disabled)


def refusal(protections: Protections) -> str | None:
    """The one line that says why kernels may not start here, or None: a protection that namespaces give is off
    (no root, and no unprivileged user namespaces), and the instructor did not allow grading unprotected."""
    missing = [name for name in NAMESPACED if not getattr(protections, name)]
    if not missing or os.environ.get(ALLOW_UNPROTECTED_ENV) == "1":
        return None
    return (f"Grading refuses to run student code unprotected: {', '.join(missing)} isolation is off here (it needs "
            f"root or unprivileged user namespaces; see docs/security.md, 'Without root'). Enable user namespaces or "
            f"grade as root, or set {ALLOW_UNPROTECTED_ENV}=1 to grade anyway (trusted submissions only).")


def unprotected_refusal() -> str | None:
    """``refusal`` for this machine, found without starting the zygote: the check grading makes before it starts."""
    return refusal(machine_protections())


def notebook_imports(paths: t.Iterable[Path]) -> list[str]:
    """The modules the code cells of these notebooks import (absolute imports anywhere in a cell; for ``from m
    import n``, both ``m`` and ``m.n``, which may be a submodule), plus what ``WITH_TORCH`` adds when torch is among
    them: what a zygote preloads for them. Only ever for the instructor's source notebooks: the zygote is not
    confined, and it imports what these name. A worker asks for each submission of the same source notebook (a new
    copy each time): its imports are parsed once per content (0.1 s of CPU for hw1's)."""
    names: set[str] = set()
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest not in _imports_by_digest:
            _imports_by_digest[digest] = _imports_in(data)
        names |= _imports_by_digest[digest]
    if any(name == "torch" or name.startswith("torch.") for name in names):
        names.update(WITH_TORCH)
    return sorted(names, key=_torch_first)  # torch first: the rest of the course's imports build on it


_imports_by_digest: dict[str, frozenset[str]] = {}


def _imports_in(data: bytes) -> frozenset[str]:
    import ast

    try:
        cells = json.loads(data).get("cells", [])
    except ValueError:
        return frozenset()
    names: set[str] = set()
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        # IPython's magics and shell escapes are not Python: left out, line by line
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return frozenset(names)


def _torch_first(name: str) -> tuple[bool, str]:
    return name.split(".")[0] != "torch", name


def _threads() -> int:
    """Threads of this process (the zygote must hold only its own when it forks)."""
    return len(os.listdir("/proc/self/task"))


def _preload(modules: list[str], refused: set[str]) -> tuple[list[str], str | None]:
    """Import each module (one that fails to import is left out): those imported, and the first whose import left
    a thread running (None when none did: then the zygote still holds no thread)."""
    import importlib

    loaded = []
    for name in modules:
        if name in refused:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # not a module (``from m import function``), or not installed: the kernel will say so
            continue
        if _threads() > 1:
            return loaded, name
        loaded.append(name)
    return loaded, None


def _restart_without(out: t.TextIO, modules: list[str], refused: set[str], answer: str,
                     listen: str | None = None) -> t.NoReturn:
    """A preload left a thread running: this process runs the zygote again, from scratch (same pid, same pipes),
    preloading ``modules`` but the refused ones, and answers ``answer`` once it is ready."""
    sys.stderr.write(f"grading zygote: importing {sorted(refused)} starts a thread; it is not preloaded\n")
    sys.stderr.flush()
    out.flush()
    os.dup2(out.fileno(), 1)  # the answers' pipe is stdout again in the new image
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an ignored SIGCHLD would survive exec: probe waits for children
    argv = [sys.executable, "-m", "course_tools.grading.zygote", *modules, f"--refused={','.join(sorted(refused))}",
            f"--answer={answer}", *([f"--listen={listen}"] if listen else [])]
    os.execv(sys.executable, argv)


def serve(argv: list[str] | None = None) -> None:
    """The zygote: ``argv`` names modules to preload before it announces itself ready; ``--refused=a,b`` modules
    never to preload (their import starts a thread), ``--answer=preload`` to announce itself with a preload's
    answer (after a restart, ``_restart_without``) instead of the protections."""
    args = sys.argv[1:] if argv is None else argv
    refused = {n for a in args if a.startswith("--refused=") for n in a.split("=", 1)[1].split(",") if n}
    answer = next((a.split("=", 1)[1] for a in args if a.startswith("--answer=")), "protections")
    modules = [a for a in args if not a.startswith("--")]
    # numpy's OpenBLAS starts a pool of threads when loaded (torch loads numpy): one thread, kernels' numpy included.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pydevd (ipykernel.debugger) warns on stderr, when imported, that Python's frozen modules may hide breakpoints.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # The answers go through a descriptor of their own: whatever an import prints to stdout goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for name in ALWAYS:
        __import__(name)
    listen = next((a.split("=", 1)[1] for a in args if a.startswith("--listen=")), None)
    loaded, threaded = _preload(modules, refused)
    if threaded:
        _restart_without(out, modules, refused | {threaded}, answer, listen)

    protections = machine_protections()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels are reaped by the system; the grader holds pidfds
    first = {"protections": protections.to_dict()} if answer == "protections" else {}
    if listen:
        _serve_machine(listen, {**first, "preloaded": loaded, "refused": sorted(refused)}, loaded, refused,
                       protections)
        return
    out.write(json.dumps({**first, "preloaded": loaded, "refused": sorted(refused)}) + "\n")
    _serve_requests(sys.stdin, out, loaded, refused, protections)


def _serve_requests(requests: t.Iterable[str], out: t.TextIO, loaded: list[str], refused: set[str],
                    protections: Protections) -> None:
    """Answer each request line (module docstring) until ``requests`` ends."""
    for line in requests:
        request = json.loads(line)
        if "preload" in request:
            more, threaded = _preload([n for n in request["preload"] if n not in loaded], refused)
            if threaded:
                _restart_without(out, loaded + request["preload"], refused | {threaded}, "preload")
            loaded += more
            out.write(json.dumps({"preloaded": loaded, "refused": sorted(refused)}) + "\n")
            continue
        if "reap" in request:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _reap(int(request["reap"]))
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
            out.write(json.dumps({"reaped": request["reap"]}) + "\n")
            continue
        if _threads() > 1:  # never fork with another thread running (a lock it holds stays held in the kernel)
            out.write(json.dumps({"error": f"the grading zygote holds {_threads()} threads; it forks with one"})
                      + "\n")
            continue
        jail = Jail(**{**request["jail"], "limits": Limits(**request["jail"]["limits"])})
        gc.freeze()  # what the zygote holds is never collected in the kernel: no copy-on-write of it (docstring)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                code = _run_kernel(jail, protections, request["connection_file"]) & 0xFF
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 70
            os._exit(code)
        out.write(json.dumps({"pid": pid}) + "\n")


def _read_line(fd: int, most: int = 256) -> str:
    """One line from ``fd``, read a byte at a time: nothing after it is consumed."""
    data = b""
    while not data.endswith(b"\n") and len(data) < most:
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


def _serve_machine(path: str, ready: dict, loaded: list[str], refused: set[str], protections: Protections) -> None:
    """The machine's zygote (``MachineZygote``): listen on the Unix socket ``path``; each connection that starts
    with the token (the first line on stdin) gets a zygote of its own, forked from this one with everything imported
    (``ready`` is its first answer), serving that connection as a worker's own zygote serves its pipe: its kernels
    die with it, when the connection closes. Ends when stdin closes."""
    import select
    import socket
    import struct

    token = _read_line(0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is the grader's only
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    listener.listen(64)
    while True:
        readable, _, _ = select.select([listener, 0], [], [])
        if 0 in readable and not os.read(0, 4096):
            break
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        if _threads() > 1 or os.fork() != 0:
            conn.close()
            continue
        listener.close()
        # The token within 30 s (a blocking read with a receive timeout: settimeout would make the descriptor
        # non-blocking, and a read before the token arrived would fail at once).
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 30, 0))
        try:
            if _read_line(conn.fileno()) != token:
                os._exit(0)
        except OSError:
            os._exit(0)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
        os.dup2(conn.fileno(), 0)  # as a worker's zygote: requests on stdin, answers on a descriptor of their own
        out = os.fdopen(os.dup(conn.fileno()), "w", buffering=1)
        conn.close()
        out.write(json.dumps(ready) + "\n")
        _serve_requests(os.fdopen(0, "r", buffering=1), out, loaded, refused, protections)
        os._exit(0)
    listener.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


class Zygote:
    """The grader's handle on one zygote. Started at once (importing ``preload`` before it is ready), waited for on
    first use. Where the machine's zygote listens (``SOCKET_ENV``, ``MachineZygote``), a connection to it instead: a
    zygote of this handle's own, forked from the machine's with everything imported."""

    def __init__(self, preload: t.Iterable[str] = ()) -> None:
        self._requested = set(preload)
        self._proc: subprocess.Popen | None = None
        self._socket: t.Any = None
        self._lock = threading.Lock()
        if os.environ.get(SOCKET_ENV):
            self._send = self._receive = None  # connected on first use: the machine's zygote may still be importing
        else:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "course_tools.grading.zygote", *sorted(self._requested, key=_torch_first)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=kernel_environment(dict(os.environ)), cwd="/",
                text=True, bufsize=1)
            self._send, self._receive = self._proc.stdin, self._proc.stdout
        self._protections: Protections | None = None
        self.preloaded: list[str] = []  # what kernels forked from now on have imported already
        self.refused: list[str] = []  # requested, but their import starts a thread: never preloaded

    def _connect(self) -> None:
        """Connect to the machine's zygote, waiting (MACHINE_WAIT seconds at most) for it to listen."""
        import socket

        path, deadline = os.environ[SOCKET_ENV], time.monotonic() + MACHINE_WAIT
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the machine's grading zygote did not listen on {path} within "
                                       f"{MACHINE_WAIT} s") from None
                time.sleep(0.02)
        sock.sendall((os.environ.get(TOKEN_ENV, "") + "\n").encode())
        self._socket = sock
        self._send, self._receive = sock.makefile("w", buffering=1), sock.makefile("r")

    def _request(self, message: dict) -> dict:
        assert self._send is not None
        self._send.write(json.dumps(message) + "\n")
        self._send.flush()
        return self._answer()

    def _answer(self) -> dict:
        if self._receive is None:
            self._connect()
        line = self._receive.readline()
        if not line:
            status = f"status {self._proc.wait()}" if self._proc else "its connection closed"
            raise RuntimeError(f"the grading zygote exited ({status})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        if "preloaded" in answer:
            self.preloaded, self.refused = answer["preloaded"], answer["refused"]
        return answer

    def preload(self, modules: t.Iterable[str]) -> list[str]:
        """Have the zygote import ``modules`` (those it lacks; a module that does not import is left out), so that
        the kernels it forks from now on have them: only modules the instructor's source notebooks name
        (``notebook_imports``), never a submission's. What it has preloaded."""
        self.protections  # noqa: B018 -- the zygote is ready
        with self._lock:
            new = sorted(set(modules) - self._requested, key=_torch_first)
            if new:
                self._requested.update(new)
                self._request({"preload": new})
            return list(self.preloaded)

    @property
    def protections(self) -> Protections:
        with self._lock:
            if self._protections is None:
                self._protections = Protections(**self._answer()["protections"])
            return self._protections

    def spawn(self, jail: Jail, connection_file: str) -> int:
        """Fork a confined kernel; its keeper's pid. RuntimeError (``refusal``) where kernels would be unprotected."""
        line = refusal(self.protections)  # waits until the zygote is ready
        if line:
            raise RuntimeError(line)
        jail_dict = {**jail.__dict__, "limits": jail.limits.__dict__}
        with self._lock:
            return int(self._request({"jail": jail_dict, "connection_file": connection_file})["pid"])

    def reap(self, uid: int) -> None:
        """Kill whatever the kernel that ran as ``uid`` left behind; nothing to do where kernels have a PID namespace
        of their own (what they spawn dies with them)."""
        if self.protections.unprivileged_user and not self.protections.processes:
            with self._lock:
                self._request({"reap": uid})

    def close(self) -> None:
        if self._socket is not None:  # the connection's zygote ends, and its kernels with it
            for stream in (self._send, self._receive, self._socket):
                stream.close()
            self._socket = self._send = self._receive = None
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a loaded machine: end it (its kernels die with it, PDEATHSIG)
                self._proc.kill()
                self._proc.wait()


class MachineZygote:
    """One zygote for every local worker of a run (``autograde``, the local engine): it imports ``preload`` once
    for the machine while the workers start, then forks each worker's zygote from itself (``Zygote`` connects to it
    through ``SOCKET_ENV``, which this sets for the processes started from here, and ``TOKEN_ENV``). Closed, with
    the environment restored, on exit; each worker's zygote ends when its worker closes its connection."""

    def __init__(self, preload: t.Iterable[str], folder: str | os.PathLike) -> None:
        import secrets

        self.path = os.path.join(folder, "zygote.sock")
        self._token = secrets.token_hex(16)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "course_tools.grading.zygote", *sorted(set(preload), key=_torch_first),
             f"--listen={self.path}"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=kernel_environment(dict(os.environ)), cwd="/",
            text=True, bufsize=1)
        assert self._proc.stdin is not None
        self._proc.stdin.write(self._token + "\n")  # not in its arguments or environment: kernels see neither
        self._proc.stdin.flush()
        self._saved = {name: os.environ.get(name) for name in (SOCKET_ENV, TOKEN_ENV)}
        os.environ[SOCKET_ENV], os.environ[TOKEN_ENV] = self.path, self._token

    def __enter__(self) -> MachineZygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


_shared: Zygote | None = None
_shared_lock = threading.Lock()


def shared_zygote(preload: t.Iterable[str] = ()) -> Zygote:
    """This process's zygote, started on first call (importing ``preload`` before it is ready) and closed at
    exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Zygote(preload)
            atexit.register(_shared.close)
        return _shared


if __name__ == "__main__":
    serve()
