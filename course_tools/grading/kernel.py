"""A jupyter_client kernel manager whose kernels are forked, confined, by the zygote.

nbclient (and so nbgrader's Execute) only sees an ordinary ``AsyncKernelManager``: the connection file, the
ZeroMQ sockets (over ``ipc``: Unix sockets in a folder shared with the kernel, since the kernel has no network)
and a process handle. Only the launch differs: instead of ``Popen`` of the kernel spec's argv, the zygote forks a
kernel that confines itself, and the process handle is a pidfd on the kernel's keeper (the zygote's child, not
ours; killing it kills the kernel and everything the kernel spawned).

Each kernel gets a scratch folder: ``stage/`` (a copy of the notebook's folder without notebooks, which the kernel
copies into its own private working copy), ``s/`` (sockets and connection file; read-only for the kernel once
it has bound its sockets, and a 1 MB tmpfs when grading as root) and ``root/`` (where its root file system is
mounted, invisible from outside its mount namespace).
"""

from __future__ import annotations

import os
import queue
import secrets
import select
import shutil
import signal
import stat
import tempfile
import time
import typing as t
from pathlib import Path

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Int, Type, Unicode, default

from course_tools.grading.sandbox import Jail, Limits, mount_sockets_folder, unmount
from course_tools.grading.zygote import shared_zygote

WORKDIR = "/home/student"
_skip_by_name = shutil.ignore_patterns(".*", "*.ipynb")


def plain_files_only(folder: str, names: list[str]) -> set[str]:
    """copytree's ``ignore``: notebooks, hidden files, and anything that is not a plain file or folder. A symbolic
    link in a submission (``notes.txt -> /course/source/hw1/hw1.ipynb``) would otherwise be followed, as root, and
    hand the student's kernel whatever it points to; FIFOs and devices would block or leak the same way."""
    skipped = set(_skip_by_name(folder, names))
    for name in names:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            skipped.add(name)
    return skipped


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

    async def _async_pre_start_kernel(self, **kw: t.Any) -> tuple[list[str], dict[str, t.Any]]:
        self._scratch = tempfile.mkdtemp(prefix="tdk-", dir=self.scratch_root)
        os.chmod(self._scratch, 0o755)
        sockets = Path(self._scratch, "s")
        sockets.mkdir()
        if shared_zygote().protections.unprivileged_user:  # root: the kernel writes there as a uid of its own
            mount_sockets_folder(str(sockets))
            self._mounted = str(sockets)
        cwd = kw.get("cwd") or os.getcwd()
        # Notebooks stay out: the one being graded holds the hidden tests (its cells reach the kernel one by one).
        shutil.copytree(cwd, Path(self._scratch, "stage"), ignore=plain_files_only)
        self.transport = "ipc"
        self.ip = str(sockets / "k")
        self.connection_file = str(sockets / "kernel.json")
        self._uid = 1_000_000 + secrets.randbelow(1_000_000_000)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: t.Any) -> None:
        assert self.provisioner is not None and self._scratch is not None
        limits = Limits(memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds, processes=self.processes)
        jail = Jail(stage=f"{self._scratch}/stage", workdir=WORKDIR, sockets=f"{self._scratch}/s",
                    root=f"{self._scratch}/root", uid=self._uid, limits=limits, torch_threads=self.torch_threads)
        Path(jail.root).mkdir()
        pid = shared_zygote().spawn(jail, self.connection_file)
        provisioner = t.cast(t.Any, self.provisioner)
        provisioner.process = ForkedProcess(pid)
        provisioner.pid = provisioner.pgid = pid
        self._reconcile_connection_info(provisioner.connection_info)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._uid:  # cleanup_resources runs twice per kernel (nbclient, then the manager): reap once
            shared_zygote().reap(self._uid)
            self._uid = 0
        if self._mounted is not None:
            unmount(self._mounted)
            self._mounted = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    cleanup_resources = _async_cleanup_resources  # the async manager's public name for it
