"""Private services for testing distributed grading: a PostgreSQL instance and a Dask cluster, started as plain
processes in a scratch folder and always stopped (context managers).

- ``private_postgres(folder)``: ``initdb`` and ``pg_ctl`` (Debian's postgresql package keeps them in
  /usr/lib/postgresql/<version>/bin), trust authentication on 127.0.0.1 and a socket in the folder, a free port;
  as root it runs as the ``postgres`` account (PostgreSQL refuses to run as root). Yields a ``Postgres`` whose
  ``database(name)`` creates a database and gives its URL.
- ``dask_cluster(folder, workers=2, env=...)``: ``dask scheduler`` and ``workers`` separate ``dask worker``
  processes (one thread each, each under its nanny, which restarts a killed worker), every process in a session
  of its own and killed with its group on exit. Yields a ``DaskProcesses`` with the scheduler's address.

Used by tests/test_grading_distributed.py and by hand::

    python -m course_tools.grading_cluster   # starts both, prints SCHEDULER= and DB_URL=, stops on Enter
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import typing as t
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


@dataclass
class Postgres:
    bin: Path
    port: int
    as_user: list[str]

    def database(self, name: str) -> str:
        """Create a database; its URL (nbgrader's db_url)."""
        proc = subprocess.run([*self.as_user, str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                               "-U", "postgres", name], capture_output=True, text=True, cwd="/")
        if proc.returncode != 0:
            raise RuntimeError(f"createdb {name} failed: {proc.stderr.strip()}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def private_postgres(folder: Path) -> t.Iterator[Postgres]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL's initdb and pg_ctl were not found (Debian: apt-get install postgresql)")
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        os.chmod(folder, 0o755)
        for parent in folder.parents:  # the postgres account must reach its folder
            if parent == Path("/") or parent.stat().st_mode & 0o001:
                break
            os.chmod(parent, parent.stat().st_mode | 0o001)
    data.mkdir()
    if as_user:
        shutil.chown(data, "postgres", "postgres")
        shutil.chown(folder, "postgres", "postgres")
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                    "--no-sync", "-E", "UTF8"], check=True, capture_output=True)
    port = free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"),
                    "-w", "-t", "60", "start"], check=True, capture_output=True)
    try:
        yield Postgres(bin_dir, port, as_user)
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True)


@dataclass
class DaskProcesses:
    address: str
    scheduler_file: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def worker_pids(self) -> dict[str, int]:
        """Each worker's address -> its process id (not its nanny's)."""
        from distributed import Client

        with Client(self.address, timeout="30s") as client:
            return client.run(os.getpid)


def _dask() -> str:
    return str(Path(sys.executable).with_name("dask"))


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group: the nanny's worker and its zygote too
    proc.wait()


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2, env: dict[str, str] | None = None,
                 scheduler_env: dict[str, str] | None = None, timeout: float = 120,
                 worker_args: dict[int, list[str]] | None = None) -> t.Iterator[DaskProcesses]:
    """A scheduler and ``workers`` worker processes on this machine, stopped (process groups killed) on exit.
    ``worker_args``: more arguments for some workers, by number (``{1: ["--resources", "GPU=1"]}``)."""
    folder.mkdir(parents=True, exist_ok=True)
    scheduler_file = folder / "scheduler.json"
    base = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs: list[subprocess.Popen] = []

    def start(args: list[str], extra: dict[str, str] | None, log: str) -> None:
        out = open(folder / log, "w")  # noqa: SIM115 -- the process keeps it
        procs.append(subprocess.Popen([_dask(), *args], env={**base, **(extra or {})}, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True, cwd=folder))

    try:
        start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
               str(scheduler_file)], scheduler_env, "scheduler.log")
        deadline = time.monotonic() + timeout
        while not scheduler_file.is_file() and time.monotonic() < deadline:
            if procs[0].poll() is not None:
                raise RuntimeError("the Dask scheduler exited:\n" + (folder / "scheduler.log").read_text())
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for i in range(workers):
            start(["worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--name", f"w{i}",
                   "--local-directory", str(folder / f"w{i}"), *(worker_args or {}).get(i, [])], env, f"worker{i}.log")
        from distributed import Client

        with Client(address, timeout="60s") as client:
            client.wait_for_workers(workers, timeout=timeout)
        yield DaskProcesses(address, scheduler_file, procs)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="grading-services-") as scratch:
        with private_postgres(Path(scratch, "pg")) as pg, dask_cluster(Path(scratch, "dask")) as cluster:
            print(f"SCHEDULER={cluster.address} DB_URL={pg.database('course')}", flush=True)
            input("Enter stops both: ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
