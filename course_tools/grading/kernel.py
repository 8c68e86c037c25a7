"""A jupyter_client kernel manager whose kernels are forked, confined, by the zygote.

nbclient (and so nbgrader's Execute) only sees an ordinary ``AsyncKernelManager``: the connection file, the
ZeroMQ sockets (over ``ipc``: Unix sockets in a folder shared with the kernel, since the kernel has no network)
and a process handle. Only the launch differs: instead of ``Popen`` of the kernel spec's argv, the zygote forks a
kernel that confines itself, and the process handle is a pidfd on the kernel's keeper (the zygote's child, not
ours; killing it kills the kernel and everything the kernel spawned).

Each kernel gets a scratch folder: ``stage/`` (a copy of the notebook's folder without notebooks, hidden files
included, capped in size: ``files.copy_in``; the kernel copies it into its own private working copy), ``s/``
(sockets and connection file; read-only for the kernel once it has bound its sockets, and a 1 MB tmpfs when
grading as root) and ``root/`` (where its root file system is mounted, invisible from outside its mount
namespace). ``copy_back`` brings the files the notebook wrote back to the notebook's folder (``files.copy_out``).

The notebook's kernelspec is honoured: the course's default Python kernel (the kernelspec whose argv runs
``ipykernel_launcher`` with this Python) is forked by the zygote, already warm; any other kernelspec runs its own
argv in the same jail (its installation and ``extra_paths`` bound in read-only). Either way the kernel's environment
is the zygote's allow-list, the kernelspec's ``env`` and the variables nbgrader sets for a kernel
(``NBGRADER_EXECUTION``, ``NBGRADER_VALIDATING``), never the rest of the grader's.
"""

from __future__ import annotations

import asyncio
import os
import queue
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
import typing as t
from pathlib import Path

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Int, List, Type, Unicode, default

from course_tools.grading.files import copy_in, copy_out
from course_tools.grading.sandbox import Jail, Limits, mount_sockets_folder, unmount
from course_tools.grading.zygote import shared_zygote

WORKDIR = "/home/student"
# What nbgrader sets in the environment of the kernels it runs (autograde, validate): notebooks branch on them.
NBGRADER_ENV = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING")
BIND_TIMEOUT = 120  # seconds a kernel that is not the zygote's has to bind its sockets (the keeper's too)
SEALED = "sealed"  # in the scratch folder (outside the jail): the keeper sealed the socket folder


def zygote_kernel(kernel_cmd: list[str]) -> bool:
    """Whether a kernelspec's command is the course's default Python kernel, which the zygote forks already warm:
    ipykernel run by this very Python (jupyter_client turns a kernelspec's ``python`` into ``sys.executable``)."""
    return (len(kernel_cmd) >= 3 and os.path.abspath(kernel_cmd[0]) == os.path.abspath(sys.executable)
            and kernel_cmd[1:3] in (["-m", "ipykernel_launcher"], ["-m", "ipykernel"]))


def installation_of(program: str, path: str | None) -> list[str]:
    """The folders a kernel's program needs to be visible in the jail: the installation prefix it lies in (the
    folder above its ``bin/``), or its own folder. Nothing for the system's programs (under /usr, always bound)."""
    found = shutil.which(program, path=path) if os.sep not in program else program
    if not found:
        return []
    real = Path(os.path.realpath(found))
    folders = []
    for candidate in (Path(found), real):
        prefix = candidate.parent.parent if candidate.parent.name == "bin" else candidate.parent
        if not str(prefix).startswith("/usr") and str(prefix) != "/":
            folders.append(str(prefix))
    return sorted(set(folders))


class ForkedProcess:
    """The subset of ``subprocess.Popen`` that jupyter_client's provisioner uses, for a process we did not fork."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._fd: int | None = None
        if hasattr(os, "pidfd_open"):  # Linux: a handle immune to pid reuse
            try:
                self._fd = os.pidfd_open(pid)
            except ProcessLookupError:  # already gone
                self.returncode = -1

    def poll(self) -> int | None:
        if self.returncode is None:
            if self._fd is not None:
                gone = bool(select.select([self._fd], [], [], 0)[0])
            else:
                try:
                    os.kill(self.pid, 0)
                    gone = False
                except ProcessLookupError:
                    gone = True
            if gone:
                self.returncode = -1  # the zygote reaps it; its real status is not ours to read
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None and (deadline is None or time.monotonic() < deadline):
            if self._fd is not None:
                select.select([self._fd], [], [], timeout)
            else:
                time.sleep(0.05)
        return -1 if self.returncode is None else self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                if self._fd is not None:
                    signal.pidfd_send_signal(self._fd, signum)
                else:
                    os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL, then wait (a moment at most) until the process is gone: jupyter_client polls for the end of a
        killed kernel every 0.1 s, and each submission's kernel would otherwise cost that poll."""
        self.send_signal(signal.SIGKILL)
        self.wait(timeout=1)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class SandboxedKernelClient(AsyncKernelClient):
    """A client whose ``wait_for_ready`` skips jupyter_client's final 0.2 s wait for stray IOPub messages (paid once
    per submission): nbclient ignores any output that does not answer its own request."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except queue.Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply":
                    try:  # IOPub connected: the kernel's status message for this request arrives
                        await self.iopub_channel.get_msg(timeout=0.2)
                    except queue.Empty:
                        pass
                    else:
                        self._handle_kernel_info_reply(msg)
                        return
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")


class SandboxedKernelManager(AsyncKernelManager):
    """Kernels forked by the zygote, confined, with their own working copy of the notebook's folder."""

    memory_mb = Int(Limits.memory_mb, help="Address-space limit of a kernel (MiB).").tag(config=True)
    cpu_seconds = Int(Limits.cpu_seconds, help="CPU-time limit of a kernel (seconds).").tag(config=True)
    processes = Int(Limits.processes, help="Process and thread limit of a kernel.").tag(config=True)
    torch_threads = Int(0, help="torch's intra-op threads per kernel; 0: one per core. Parallel grading sets "
                        "cores // workers, so that kernels side by side do not fight over cores.").tag(config=True)
    scratch_root = Unicode(help="Where kernels' scratch folders go (short paths: Unix sockets).").tag(config=True)
    extra_paths = List(Unicode(), help="Folders and files outside the course that kernels may read (shared data "
                       "sets, a kernel's installation): each is bound read-only at the same path in the jail. A path "
                       "that does not exist is left out, with a warning.").tag(config=True)
    max_copied_mb = Int(128, help="Of the notebook's folder (the submission's files, hidden ones included, without "
                        "notebooks), what a kernel's working copy gets, in MiB; files beyond it are left out, with a "
                        "warning.").tag(config=True)
    max_written_files = Int(100, help="Files the notebook wrote (new or changed) copied back to its folder "
                            "(autograded/); the rest are left out, with a warning.").tag(config=True)
    max_written_mb = Int(64, help="MiB of files the notebook wrote copied back to its folder.").tag(config=True)
    max_message_bytes = Int(32 * 1024 * 1024, help="Largest message the grader accepts from a kernel; a larger one "
                            "is dropped unread. Student code can write anything on its kernel's sockets, and parsing "
                            "JSON costs ~30 times its size in memory: one 700 MB message would take 20 GB of the "
                            "grader's.").tag(config=True)

    client_class = DottedObjectName("course_tools.grading.kernel.SandboxedKernelClient", config=True)
    client_factory = Type(SandboxedKernelClient, klass=AsyncKernelClient, config=True)

    def client(self, **kwargs: t.Any) -> t.Any:
        """A client whose sockets (opened later, by start_channels) refuse oversized messages."""
        kc = super().client(**kwargs)
        kc.context.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        # The client connects while the kernel is still starting: retry its not yet bound sockets every 10 ms, not
        # ZeroMQ's default 100 ms, or each submission waits for the next retry.
        kc.context.setsockopt(zmq.RECONNECT_IVL, 10)
        return kc

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("scratch_root")
    def _scratch_root_default(self) -> str:
        return tempfile.gettempdir()

    _scratch: str | None = None
    _mounted: str | None = None
    _uid: int = 0
    _cwd: str | None = None
    _jail: Jail | None = None

    async def _async_pre_start_kernel(self, **kw: t.Any) -> tuple[list[str], dict[str, t.Any]]:
        _ = self.kernel_spec  # NoSuchKernel before anything is created, as stock nbgrader fails
        self._scratch = tempfile.mkdtemp(prefix="tdk-", dir=self.scratch_root)
        try:
            os.chmod(self._scratch, 0o755)
            sockets = Path(self._scratch, "s")
            sockets.mkdir()
            if shared_zygote().protections.unprivileged_user:  # root: the kernel writes there as a uid of its own
                mount_sockets_folder(str(sockets))
                self._mounted = str(sockets)
            self._cwd = kw.get("cwd") or os.getcwd()
            skipped = copy_in(self._cwd, str(Path(self._scratch, "stage")), self.max_copied_mb * 1024 * 1024)
            if skipped:
                self.log.warning("The kernel's working copy of %s leaves out %d file(s) beyond %d MiB "
                                 "(SandboxedKernelManager.max_copied_mb): %s", self._cwd, len(skipped),
                                 self.max_copied_mb, ", ".join(skipped[:10]))
            self.transport = "ipc"
            self.ip = str(sockets / "k")
            self.connection_file = str(sockets / "kernel.json")
            self._uid = 1_000_000 + secrets.randbelow(1_000_000_000)
            return await super()._async_pre_start_kernel(**kw)
        except BaseException:
            self._remove_scratch()
            raise

    def _kernel_env(self, env: dict[str, str]) -> dict[str, str]:
        """What the kernel adds to the zygote's allow-listed environment: nbgrader's variables and the kernelspec's
        own ``env`` (as jupyter_client substituted it)."""
        spec_env = getattr(self.kernel_spec, "env", None) or {}
        return {k: env[k] for k in (*NBGRADER_ENV, *spec_env) if k in env}

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: t.Any) -> None:
        assert self.provisioner is not None and self._scratch is not None
        limits = Limits(memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds, processes=self.processes)
        env = kw.get("env") or dict(os.environ)
        warm = zygote_kernel(kernel_cmd)
        readable = [p for p in self.extra_paths if os.path.exists(p)]
        for missing in sorted(set(self.extra_paths) - set(readable)):
            self.log.warning("SandboxedKernelManager.extra_paths: %s does not exist; left out", missing)
        if not warm:
            readable += installation_of(kernel_cmd[0], env.get("PATH"))
            resource_dir = getattr(self.kernel_spec, "resource_dir", "")
            if resource_dir:
                readable.append(resource_dir)
        for path in [p for p in readable if self._shows_the_course(p)]:
            self.log.warning("Not bound in the kernel's jail: %s holds the notebook's folder (the course, the "
                             "gradebook, other submissions)", path)
            readable.remove(path)
        jail = Jail(stage=f"{self._scratch}/stage", workdir=WORKDIR, sockets=f"{self._scratch}/s",
                    root=f"{self._scratch}/root", uid=self._uid, limits=limits, torch_threads=self.torch_threads,
                    env=self._kernel_env(env), extra_paths=sorted(set(readable)),
                    argv=None if warm else list(kernel_cmd), sealed=f"{self._scratch}/{SEALED}")
        Path(jail.root).mkdir()
        pid = shared_zygote().spawn(jail, self.connection_file)
        self._jail = jail
        provisioner = t.cast(t.Any, self.provisioner)
        process = provisioner.process = ForkedProcess(pid)
        provisioner.pid = provisioner.pgid = pid
        if not warm:  # no student code before the socket folder is sealed: the grader sends none until then
            deadline = time.monotonic() + BIND_TIMEOUT
            while not os.path.exists(jail.sealed) and process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        self._reconcile_connection_info(provisioner.connection_info)

    def _shows_the_course(self, path: str) -> bool:
        """Whether binding ``path`` would show the notebook's folder, and so the course around it, to the kernel."""
        here = os.path.realpath(self._cwd or os.getcwd())
        there = os.path.realpath(path)
        return here == there or here.startswith(there.rstrip(os.sep) + os.sep)

    def copy_back(self) -> None:
        """Copy the files the running kernel wrote (new or changed, plain files only) to the notebook's folder, within
        ``max_written_files`` and ``max_written_mb``. Reads the kernel's working folder through its keeper's view
        (``/proc/<keeper>/root``: the jail's mounts exist only in its mount namespace), never following a link."""
        process = getattr(self.provisioner, "process", None)
        if self._jail is None or self._cwd is None or not isinstance(process, ForkedProcess):
            return
        if process.poll() is not None:  # the kernel is gone, and its working copy with it
            return
        if shared_zygote().protections.filesystem:
            kernel_dir = f"/proc/{process.pid}/root{self._jail.root}{self._jail.workdir}"
        else:
            kernel_dir = self._jail.stage  # no jail: the kernel ran in the stage folder itself
            self.log.warning("No filesystem isolation: files the notebook wrote are compared with its own folder")
        copied, skipped = copy_out(kernel_dir, self._jail.stage if kernel_dir != self._jail.stage else self._cwd,
                                   self._cwd, self.max_written_files, self.max_written_mb * 1024 * 1024)
        if copied:
            self.log.info("Copied %d file(s) the notebook wrote to %s", copied, self._cwd)
        if skipped:
            self.log.warning("Left out %d file(s) the notebook wrote, beyond %d files or %d MiB "
                             "(SandboxedKernelManager.max_written_files, .max_written_mb), or not plain files: %s",
                             len(skipped), self.max_written_files, self.max_written_mb, ", ".join(skipped[:10]))

    def _remove_scratch(self) -> None:
        if self._mounted is not None:
            unmount(self._mounted)
            self._mounted = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        """Until the killed kernel is gone, looking every 5 ms: jupyter_client looks every 0.1 s, and a kernel dies
        within milliseconds of its SIGKILL, so each submission paid most of a 0.1 s sleep (measured: 0.118 s from
        the last cell's reply to the kernel's end, 0.04 s with this)."""
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._uid:  # cleanup_resources runs twice per kernel (nbclient, then the manager): reap once
            shared_zygote().reap(self._uid)
            self._uid = 0
        self._jail = None
        self._remove_scratch()

    cleanup_resources = _async_cleanup_resources  # the async manager's public name for it
