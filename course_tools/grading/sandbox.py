"""Confine the current process before it runs student code.

``confine`` is called in a freshly forked child (see ``zygote``), while it is still root, just before it starts
the student's kernel. In order it:

1. unshares the network, mount and IPC namespaces: the only network device left is a loopback that is down,
   so every connection fails with "Network is unreachable";
2. builds a new root file system on a tmpfs holding only read-only bind mounts of the system (/usr and the few
   /etc files the dynamic loader needs), the Python environment, a private /tmp and /dev/shm, the kernel's
   socket folder, and a fresh size-capped working copy of the submission; then chroots into it, so the course
   folder (source/, the gradebook, other submissions) simply does not exist there;
3. sets resource limits (address space, CPU seconds, processes, file size, open files, no core dumps);
4. drops to a uid of its own (no supplementary groups, ``no_new_privs``), so it cannot signal other kernels or
   regain root through a setuid binary.

Steps that need privileges the machine does not give (no root: a laptop) are skipped; ``probe`` says which,
and grading reports them as off. Resource limits need no privilege and are always on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import resource
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MNT_DETACH = 2

# The dynamic loader and a few libraries read these; nothing else of /etc is shown to student code.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf", "passwd", "group")
DEVICES = ("null", "zero", "full", "random", "urandom")
# torch's cpuinfo reads these at its first operation; without them it writes an error to stderr (a zero score).
PROC_FILES = ("cpuinfo", "meminfo", "stat")
EDITABLE_PACKAGES = ("torchdoctor",)  # the course's library, installed editable: its folder is outside the venv

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one kernel. ``memory_mb`` caps the address space, so torch raises MemoryError."""

    memory_mb: int = 4096
    cpu_seconds: int = 300
    processes: int = 64
    file_mb: int = 64
    open_files: int = 256
    workdir_mb: int = 256


@dataclass(frozen=True)
class Protections:
    """Which protections a kernel gets on this machine; ``off`` explains each missing one."""

    network: bool
    filesystem: bool
    unprivileged_user: bool
    limits: bool = True
    off: list[str] = field(default_factory=list)

    def summary(self) -> str:
        on = [name for name in ("network", "filesystem", "unprivileged_user", "limits") if getattr(self, name)]
        text = f"sandbox protections on: {', '.join(on) or 'none'}"
        return text + "".join(f"\n  OFF: {reason}" for reason in self.off)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Jail:
    """Where one kernel lives. ``stage`` holds the submission's files, copied into the working copy
    ``workdir``; ``sockets`` holds the kernel's IPC sockets and connection file (shared with the grader)."""

    stage: str
    workdir: str
    sockets: str
    root: str
    uid: int
    limits: Limits
    torch_threads: int = 0  # intra-op threads of torch in the kernel; 0 leaves torch's default (one per core)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {source} on {target}")


def _bind(source: str, root: str, target: str | None = None, writable: bool = False) -> None:
    """Bind ``source`` at the same path (or ``target``) inside ``root``, read-only unless ``writable``."""
    inside = Path(root + (target or source))
    if Path(source).is_dir():
        inside.mkdir(parents=True, exist_ok=True)
    else:
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.touch()
    _mount(source, str(inside), None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if writable else MS_RDONLY)
    _mount("none", str(inside), None, flags)


def python_paths() -> list[str]:
    """What the kernel must be able to read: the interpreter's prefix, the virtual environment and the folders
    of editable installs (the course's own library). Read-only inside the sandbox."""
    paths = {sys.base_prefix, sys.prefix}
    for name in EDITABLE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            paths.add(str(Path(spec.origin).parent))
    return sorted(p for p in paths if not p.startswith("/usr/"))


def _build_root(jail: Jail) -> None:
    root = jail.root
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    for entry in ("usr", "bin", "lib", "lib32", "lib64", "sbin"):
        host = Path("/", entry)
        if host.is_symlink():
            os.symlink(os.readlink(host), f"{root}/{entry}")
        elif host.is_dir():
            _bind(str(host), root)
    # The private /tmp first: what is bound below may live under the host's /tmp (a clone of the course there).
    for folder, size in (("/tmp", 64), ("/dev/shm", 64)):
        Path(root + folder).mkdir(parents=True, exist_ok=True)
        _mount("tmpfs", root + folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}m,mode=1777")
    for name in ETC_FILES:
        if Path("/etc", name).is_file():
            _bind(f"/etc/{name}", root)
    for path in python_paths():
        _bind(path, root)
    Path(root, "proc").mkdir()
    for name in PROC_FILES:
        Path(root, "proc", name).write_bytes(Path("/proc", name).read_bytes())
    if Path("/sys/devices/system/cpu").is_dir():
        _bind("/sys/devices/system/cpu", root)
    Path(root, "dev").mkdir(exist_ok=True)
    for name in DEVICES:
        _bind(f"/dev/{name}", root, writable=True)
    _bind(jail.sockets, root, writable=True)
    workdir = Path(root + jail.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(workdir), "tmpfs", MS_NOSUID | MS_NODEV, f"size={jail.limits.workdir_mb}m,mode=0700")
    shutil.copytree(jail.stage, workdir, dirs_exist_ok=True)


SOCKETS_MB = 1  # the sockets folder: connection file, sockets, the kernel's log; capped (it is on the host)


def mount_sockets_folder(path: str) -> None:
    """Mount a small tmpfs on a kernel's sockets folder, in the grader's own mount namespace, before the kernel
    starts. The folder is shared with the kernel and writable by it: on the host's /tmp, student code could fill
    the grader's disk there, file after file (each capped by RLIMIT_FSIZE only)."""
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={SOCKETS_MB}m,nr_inodes=64,mode=0755")


def unmount(path: str) -> None:
    _libc.umount2(path.encode(), MNT_DETACH)


def _chown_tree(path: str, uid: int) -> None:
    for folder, _, files in os.walk(path):
        os.chown(folder, uid, uid)
        for name in files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def set_limits(limits: Limits, own_uid: bool) -> None:
    """Resource limits. The process limit counts every process of the uid, so it is only set for a kernel with a
    uid of its own: for the grading user's uid it would count the user's other processes too."""
    mb = 1024 * 1024
    settings = [
        (resource.RLIMIT_AS, limits.memory_mb * mb),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if own_uid:
        settings.append((resource.RLIMIT_NPROC, limits.processes))
    for which, value in settings:
        resource.setrlimit(which, (value, value))


def confine(jail: Jail, protections: Protections) -> str:
    """Confine this process as ``protections`` allow; return the working directory to run in."""
    linux = hasattr(_libc, "prctl")
    if linux:
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    workdir = jail.stage
    if protections.network or protections.filesystem:
        flags = (CLONE_NEWNET if protections.network else 0) | (CLONE_NEWNS | CLONE_NEWIPC
                                                                 if protections.filesystem else 0)
        _check(_libc.unshare(flags), "unshare")
    if protections.filesystem:
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
        _build_root(jail)
        if protections.unprivileged_user:
            _chown_tree(jail.root + jail.workdir, jail.uid)
            _chown_tree(jail.sockets, jail.uid)
        os.chroot(jail.root)
        workdir = jail.workdir
    os.chdir(workdir)
    set_limits(jail.limits, own_uid=protections.unprivileged_user)
    if protections.unprivileged_user:
        os.setgroups([])
        os.setresgid(jail.uid, jail.uid, jail.uid)
        os.setresuid(jail.uid, jail.uid, jail.uid)
    if linux:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    os.environ.update(HOME=workdir, USER="student", LOGNAME="student")
    if protections.filesystem:
        os.environ.update(TMPDIR="/tmp", IPYTHONDIR="/tmp/.ipython")
    return workdir


def probe(disabled: frozenset[str] = frozenset()) -> Protections:
    """Find out, in a throwaway child, which protections this machine allows. ``disabled`` turns protections off
    on purpose (a test of the degraded mode, or ``TORCHDOCTOR_SANDBOX_DISABLE``)."""
    off = [f"{name}: disabled by configuration" for name in sorted(disabled)]
    if not sys.platform.startswith("linux"):
        return Protections(network=False, filesystem=False, unprivileged_user=False,
                           off=[f"network, filesystem, unprivileged_user: need Linux, this is {sys.platform}"])
    root = os.geteuid() == 0
    network = "network" not in disabled and _try_in_child(lambda: _check(_libc.unshare(CLONE_NEWNET), "unshare"))
    if not network and "network" not in disabled:
        off.append("network: cannot unshare a network namespace (needs root); student code can use the network")
    filesystem = "filesystem" not in disabled and _try_in_child(
        lambda: (_check(_libc.unshare(CLONE_NEWNS), "unshare"), _mount("none", "/", None, MS_REC | MS_PRIVATE)))
    if not filesystem and "filesystem" not in disabled:
        off.append("filesystem: cannot unshare a mount namespace (needs root); student code can read every file "
                   "this user can (the course's source/ and gradebook included)")
    unprivileged = "unprivileged_user" not in disabled and root
    if not unprivileged and "unprivileged_user" not in disabled:
        off.append("unprivileged_user: grading does not run as root, so kernels run as the grading user "
                   "(and without a process-count limit)")
    return Protections(network=network, filesystem=filesystem, unprivileged_user=unprivileged, off=off)


def _try_in_child(step) -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            step()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
