"""Confine a kernel before it runs student code, as root or, without root, through a user namespace.

A kernel is two processes, both forked from the zygote (see ``zygote``): a *keeper*, which builds the jail and
stays outside it, and the *kernel*, its child, which runs student code inside it.

The keeper (``enter``):

1. as root, uses its privileges; as an ordinary user, first creates a user namespace of its own (the grading user's
   uid and gid mapped to themselves, ``setgroups`` denied), which gives it, and only it, the rights over the
   namespaces it creates next (the "user namespace" route);
2. unshares the network, mount, IPC and PID namespaces: the only network device left is a loopback that is down,
   so every connection fails with "Network is unreachable"; the kernel is process 1 of a PID namespace, so it
   cannot see or signal any process outside it, and everything it spawns dies with it;
3. builds a new root file system on a tmpfs holding only read-only bind mounts of the system (/usr and the few
   /etc files the dynamic loader needs), the Python environment and the course's library, a private /tmp and
   /dev/shm, the kernel's socket folder, and a fresh size-capped working copy of the submission. The course
   folder (source/, the gradebook, other submissions) simply does not exist there;
4. once the kernel has bound its sockets (``seal``), remounts the socket folder read-only for it, so student code
   cannot write to the one folder it shares with the grader.

The kernel (``confine``) then chroots into that root, sets resource limits (private memory, CPU seconds, processes,
file size, open files, no core dumps), drops its privileges and sets ``no_new_privs``: as root, it becomes a uid of
its own without groups; in a user namespace it keeps the grading user's uid but drops every capability, so it
can neither leave the chroot nor create a namespace (a chrooted process may not), nor undo a read-only mount.

``probe`` finds out which route this machine allows, and which protections each gives; grading reports the ones
that are off. Resource limits need no privilege and are always on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import re
import resource
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x10000000,
                                                                     0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (1, 2, 4, 8, 32, 4096, 16384,
                                                                                     1 << 18)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 38, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MNT_DETACH = 2

ROOT_ROUTE, USERNS_ROUTE, NO_ROUTE = "root", "user namespace", "none"
# The protections a namespace gives; "unprivileged_user" (a uid of the kernel's own) needs the root route.
NAMESPACED = ("network", "filesystem", "processes")
CONSEQUENCES = {
    "network": "student code can use the network",
    "filesystem": "student code can read and write every file the grading user can (source/ and the gradebook "
                  "included)",
    "processes": "student code can see and signal the grading user's processes, and what it spawns can outlive "
                 "its kernel",
}

# The dynamic loader and a few libraries read these; nothing else of /etc is shown to student code.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf", "passwd", "group")
DEVICES = ("null", "zero", "full", "random", "urandom")
# torch's cpuinfo reads these at its first operation; without them it writes an error to stderr (a zero score).
PROC_FILES = ("cpuinfo", "meminfo", "stat")
EDITABLE_PACKAGES = ("torchdoctor",)
HOME_IN_JAIL = "/tmp/home"  # the course's library, installed editable: its folder is outside the venv

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one kernel. ``memory_mb`` caps the kernel's private writable memory (RLIMIT_DATA: heap,
    anonymous mappings, thread stacks), so an allocation past it raises MemoryError. Not the address space
    (RLIMIT_AS): torch's libraries alone map 3.3 GB of it, and every thread adds its stack and a malloc arena, so an
    address-space cap passes or fails the same notebook with the number of threads (Dask's workers set
    OMP_NUM_THREADS=1, a many-core node runs many)."""

    memory_mb: int = 4096
    cpu_seconds: int = 300
    processes: int = 64
    file_mb: int = 64
    open_files: int = 256
    workdir_mb: int = 256


@dataclass(frozen=True)
class Protections:
    """Which protections a kernel gets on this machine, through which ``route`` (``ROOT_ROUTE``,
    ``USERNS_ROUTE`` or ``NO_ROUTE``); ``off`` explains each missing one."""

    network: bool
    filesystem: bool
    unprivileged_user: bool
    processes: bool = False
    limits: bool = True
    route: str = NO_ROUTE
    off: list[str] = field(default_factory=list)

    def summary(self) -> str:
        names = ("network", "filesystem", "processes", "unprivileged_user", "limits")
        on = [name for name in names if getattr(self, name)]
        how = {ROOT_ROUTE: " (as root)", USERNS_ROUTE: " (through an unprivileged user namespace)"}.get(self.route, "")
        text = f"sandbox protections on: {', '.join(on) or 'none'}{how}"
        return text + "".join(f"\n  OFF: {reason}" for reason in self.off)

    @property
    def namespaced(self) -> bool:
        return self.route != NO_ROUTE

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
    env: dict[str, str] = field(default_factory=dict)  # added to the kernel's environment (nbgrader's, kernelspec's)
    extra_paths: list[str] = field(default_factory=list)  # bound read-only at the same path (data, a kernel's install)
    argv: list[str] | None = None  # a kernelspec's own command, exec'd in the jail; None: the zygote's ipykernel
    sealed: str = ""  # a file outside the jail the keeper creates once the socket folder is sealed


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {source} on {target}")


def _mount_points_under(path: str) -> list[str]:
    """``path`` and every mount point below it, in this mount namespace (a recursive bind brings submounts)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
        if point == path or point.startswith(path.rstrip("/") + "/"):
            points.append(point)
    return points


def _remount(path: str, writable: bool) -> None:
    """Make the bind mount at ``path`` and every mount below it nosuid (and read-only unless ``writable``).

    In a user namespace the flags a mount came with from the host (nodev, noexec) are locked: a remount that
    leaves one out fails with EPERM, so each mount's own flags are kept. Read-only mounts get nodev too."""
    for point in _mount_points_under(path):
        kept = os.statvfs(point).f_flag & (os.ST_NODEV | os.ST_NOEXEC)
        flags = MS_REMOUNT | MS_BIND | MS_NOSUID | kept | (0 if writable else MS_RDONLY | MS_NODEV)
        _mount("none", point, None, flags)


def _bind(source: str, root: str, target: str | None = None, writable: bool = False) -> None:
    """Bind ``source`` at the same path (or ``target``) inside ``root``, read-only unless ``writable``."""
    inside = Path(root + (target or source))
    if Path(source).is_dir():
        inside.mkdir(parents=True, exist_ok=True)
    else:
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.touch()
    _mount(source, str(inside), None, MS_BIND | MS_REC)
    _remount(str(inside), writable)


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
    for path in jail.extra_paths:  # the instructor's read-only paths, a kernel's installation
        if os.path.exists(path) and not os.path.exists(root + path):
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
    """Mount a small tmpfs on a kernel's sockets folder, in the grader's own mount namespace (root only), before
    the kernel starts: the kernel's log goes there too, and its writes, however many, stay within 1 MB."""
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={SOCKETS_MB}m,nr_inodes=64,mode=0755")


def unmount(path: str) -> None:
    _libc.umount2(path.encode(), MNT_DETACH)


def _chown_tree(path: str, uid: int) -> None:
    for folder, _, files in os.walk(path):
        os.chown(folder, uid, uid)
        for name in files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def _enter_user_namespace() -> None:
    """A user namespace in which this process keeps its uid and gid, with every capability over the namespaces
    it creates next (and none over anything else)."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(user namespace)")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _unshare(protections: Protections) -> None:
    if protections.route == USERNS_ROUTE:
        _enter_user_namespace()
    flags = ((CLONE_NEWNET if protections.network else 0) | (CLONE_NEWPID if protections.processes else 0)
             | (CLONE_NEWNS | CLONE_NEWIPC if protections.filesystem else 0))
    if flags:
        _check(_libc.unshare(flags), "unshare")


def enter(jail: Jail, protections: Protections) -> None:
    """In the keeper: the namespaces, and the kernel's root file system (mounted at ``jail.root``). The keeper's
    next child, the kernel, is the first process of its PID namespace."""
    if hasattr(_libc, "prctl"):
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # the zygote gone, the keeper goes, and its kernel with it
    if not protections.namespaced:
        return
    _unshare(protections)
    if protections.filesystem:
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
        _build_root(jail)
        if protections.unprivileged_user:
            _chown_tree(jail.root + jail.workdir, jail.uid)
            _chown_tree(jail.sockets, jail.uid)


def seal(jail: Jail, protections: Protections) -> None:
    """In the keeper, once the kernel has bound its sockets: the socket folder becomes read-only for the kernel
    (the grader, outside its mount namespace, still reads and connects there)."""
    if protections.filesystem:
        _remount(jail.root + jail.sockets, writable=False)


def set_limits(limits: Limits, counted_per_kernel: bool) -> None:
    """Resource limits. The process limit counts the processes of the uid (in its user namespace), so it is only
    set where that is the kernel's alone: its own uid, or its own user namespace; for the grading user's uid it
    would count the user's other processes too."""
    mb = 1024 * 1024
    settings = [
        (resource.RLIMIT_DATA, limits.memory_mb * mb),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if counted_per_kernel:
        settings.append((resource.RLIMIT_NPROC, limits.processes))
    for which, value in settings:
        resource.setrlimit(which, (value, value))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Drop every capability this process holds (in its user namespace): effective, permitted, inheritable,
    ambient and the bounding set, so no later execve (a setuid binary, a uid-0 mapping) brings one back."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    _check(_libc.capset(ctypes.byref(_CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")


def confine(jail: Jail, protections: Protections) -> str:
    """In the kernel, a child of the keeper: into the jail, limits, no privileges. The working directory to run in."""
    linux = hasattr(_libc, "prctl")
    if linux:
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # the keeper killed, the kernel (and its PID namespace) dies
    os.setsid()  # its own process group: kill(0, ...) reaches no process outside the kernel
    workdir = jail.stage
    if protections.filesystem:
        os.chroot(jail.root)
        workdir = jail.workdir
    os.chdir(workdir)
    set_limits(jail.limits, counted_per_kernel=protections.namespaced)
    if protections.unprivileged_user:
        os.setgroups([])
        os.setresgid(jail.uid, jail.uid, jail.uid)
        os.setresuid(jail.uid, jail.uid, jail.uid)
    elif protections.namespaced:  # the keeper's rights over the namespaces (or root's): none of them in the jail
        drop_capabilities()
    if linux:
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # again: the uid change above cleared it (prctl(2))
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    os.environ.update(jail.env)
    os.environ.update(HOME=workdir, USER="student", LOGNAME="student")
    if protections.filesystem:
        # Caches that libraries keep under HOME (matplotlib's font list, torch's hub) go to the private /tmp, so that
        # the working folder holds only what the notebook wrote (copied back to autograded/).
        os.makedirs(HOME_IN_JAIL, mode=0o700, exist_ok=True)
        os.environ.update(HOME=HOME_IN_JAIL, TMPDIR="/tmp", IPYTHONDIR="/tmp/.ipython")
    return workdir


def _attempt(name: str, route: str, scratch: str) -> None:
    """In a throwaway child: what the keeper and its kernel do for protection ``name`` through ``route``."""
    _unshare(Protections(network=name == "network", filesystem=name == "filesystem", unprivileged_user=False,
                         processes=name == "processes", route=route))
    if name == "filesystem":
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
        _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        _bind("/usr", scratch)
        os.chroot(scratch)
    if name == "processes" and not _try_in_child(lambda: os.getpid() == 1 or _check(-1, "PID namespace")):
        raise OSError("no PID namespace")


def probe(disabled: frozenset[str] = frozenset()) -> Protections:
    """Find out, in throwaway children, which protections this machine allows and through which route: as root,
    its privileges; else an unprivileged user namespace. ``disabled`` turns protections (or the ``user_namespace``
    route) off on purpose: a test of the degraded mode, or ``TORCHDOCTOR_SANDBOX_DISABLE``."""
    off = [f"{name}: disabled by configuration" for name in sorted(disabled) if name != "user_namespace"]
    if not sys.platform.startswith("linux"):
        return Protections(network=False, filesystem=False, unprivileged_user=False,
                           off=[f"network, filesystem, processes, unprivileged_user: need Linux, this is "
                                f"{sys.platform}"])
    root = os.geteuid() == 0
    routes = [r for r, allowed in ((ROOT_ROUTE, root), (USERNS_ROUTE, "user_namespace" not in disabled)) if allowed]
    wanted = [name for name in NAMESPACED if name not in disabled]
    route, works = NO_ROUTE, dict.fromkeys(NAMESPACED, False)
    scratch = tempfile.mkdtemp(prefix="tdprobe-")
    try:
        for candidate in routes:
            found = {n: n in wanted and _try_in_child(lambda n=n, r=candidate: _attempt(n, r, scratch))
                     for n in NAMESPACED}
            if any(found.values()) and sum(found.values()) > sum(works.values()):
                route, works = candidate, found
            if all(works[n] for n in wanted):
                break
    finally:
        os.rmdir(scratch)
    if root:
        why = "grading runs as root but cannot create this namespace (a container without CAP_SYS_ADMIN?)"
    else:
        why = "grading does not run as root"
    if "user_namespace" in disabled:
        why += ", and user namespaces are disabled by configuration"
    else:
        why += (", and this machine refuses unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone, "
                "user.max_user_namespaces, or an AppArmor/SELinux restriction)")
    off += [f"{name}: {why}; {CONSEQUENCES[name]}" for name in wanted if not works[name]]
    unprivileged = route == ROOT_ROUTE and "unprivileged_user" not in disabled
    if "unprivileged_user" not in disabled and not unprivileged:
        if route == USERNS_ROUTE:
            off.append("unprivileged_user: grading does not run as root, so kernels keep the grading user's uid "
                       "(in a user namespace of their own, without any capability); the course folder stays out of "
                       "their mount namespace, and the grader's processes out of their PID namespace")
        else:
            off.append("unprivileged_user: kernels run as the grading user, with all of its rights (and without a "
                       "process-count limit)")
    return Protections(network=works["network"], filesystem=works["filesystem"], unprivileged_user=unprivileged,
                       processes=works["processes"], route=route, off=off)


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
