"""Grading on Dask: one task per submission, on this machine, on an existing Dask cluster, or on Slurm.

Three places, one engine (``open_client``):

- ``local`` (the default): a Dask ``LocalCluster`` of worker processes, one per core, one thread each;
- ``dask``: an existing Dask cluster, by its scheduler's address (``tcp://host:8786``); its workers must run
  this course's environment (``make setup``), one thread each (``dask worker --nthreads 1``), as the grader account;
- ``slurm``: dask-jobqueue's ``SLURMCluster``: one Slurm job per worker (queue, cores, memory, walltime and
  ``--gres=gpu:N`` as set), scaled to ``jobs`` jobs.

Every worker starts its pre-warmed zygote when it joins (``ZygotePlugin``, a worker plugin: ipykernel, and what the
run's source notebooks import (torch...), imported once per worker) and closes it when it leaves or the run ends.
Local workers get theirs from the machine's zygote, which ``autograde`` starts before them (``zygote.MachineZygote``):
the imports are paid once per machine.
Each task (``grade_submission``) gets the assignment's template (``writer.assignment_template``: source folder,
configuration, a private gradebook with the assignment's definition only) and one submission's files, runs
nbgrader's hardened autograde on a private copy in a scratch folder, and returns a ``writer.Bundle``: the autograded
folder, the protections in force on that node, the timings. It writes nothing outside its scratch folder, so running
it twice is harmless (Dask recomputes the tasks a lost worker had finished). The driver (``grade``) records each
bundle as it arrives through the one ``writer.GradebookWriter``.

Failures: a lost worker's tasks are run again elsewhere by Dask; a submission whose task kills its worker more than
``allowed_failures`` times ends ungraded with that reason (Dask's ``KilledWorker``), the others are graded. A
sandbox timeout or crash is part of the grade (``execute``): the task returns normally. nbgrader giving up on a
submission is a result too ("failed", never retried).

GPU assignments (``GradingEngine.gpu_assignments`` in the course's nbgrader_config.py) run only on workers that
declare a GPU: their tasks ask for the Dask resource ``GPU=1``, which workers declare with ``--resources GPU=1``
(``slurm``: with ``gpus``; ``local``: when ``nvidia-smi`` lists one).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import typing as t
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from distributed import WorkerPlugin
from traitlets import Int, List, Unicode
from traitlets.config import Configurable

from course_tools.grading.sandbox import unmount
from course_tools.grading.writer import Bundle, load_config

ENGINES = ("local", "dask", "slurm")
PLUGIN = "torchdoctor-zygote"
GPU = "GPU"
# A test hook, honoured by workers only: a worker whose environment names a student dies (os._exit) when it grades
# that student's submission, as a worker would on a submission that crashes the grading host.
POISON_ENV = "TORCHDOCTOR_TEST_POISON"
# A scheduler always serves HTTP (health, metrics; the dashboard when asked): on a free port of localhost, not on
# 8787, which another cluster may hold (Dask then warns and takes another).
QUIET_SCHEDULER = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
SCRATCH_PREFIX = "tdw-"  # a worker's scratch root: /tmp/tdw-<pid>, swept by the next worker if it is left behind


class GradingEngine(Configurable):
    """Settings of distributed grading a course root keeps in its nbgrader_config.py."""

    gpu_assignments = List(Unicode(), help="Assignments whose submissions run only on workers that declare a GPU "
                           "(Dask resource GPU=1).").tag(config=True)
    allowed_failures = Int(2, help="Worker deaths one submission may cause before it is reported ungraded (Dask's "
                           "distributed.scheduler.allowed-failures, for local clusters).").tag(config=True)


@dataclass
class Settings:
    """Where to grade. ``workers``: local worker processes, or Slurm jobs; ``torch_threads``: torch's threads per
    kernel (0: cores // workers on a local cluster, else the node's cores)."""

    engine: str = "local"
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    scheduler: str | None = None
    torch_threads: int = 0
    queue: str | None = None
    cores: int = 1
    memory: str = "4GiB"
    walltime: str = "01:00:00"
    gpus: int = 0
    job_extra: list[str] = field(default_factory=list)
    python: str = sys.executable
    allowed_failures: int = 2


def local_gpus() -> int:
    """GPUs on this machine as ``nvidia-smi -L`` lists them (0 without the tool)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def prepare_environment() -> None:
    """Workers started from here inherit this: nbgrader calls alembic, which must be on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    if not os.environ.get("PATH", "").startswith(bin_dir):
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@contextlib.contextmanager
def open_client(settings: Settings) -> t.Iterator[t.Any]:
    """A Dask client on the cluster ``settings`` names, closed (and a cluster started here stopped) on exit."""
    import dask
    from distributed import Client

    prepare_environment()
    if settings.engine not in ENGINES:
        raise ValueError(f"unknown engine {settings.engine!r}; the engines are {', '.join(ENGINES)}")
    # For the schedulers started here (local, slurm): how many worker deaths a submission may cause, and no task
    # queued on a worker beside the one it runs (``grade`` keeps it so on any cluster).
    with dask.config.set({"distributed.scheduler.allowed-failures": settings.allowed_failures,
                          "distributed.scheduler.worker-saturation": 1.0, "distributed.admin.tick.limit": "60s"}):
        if settings.engine == "dask":
            if not settings.scheduler:
                raise ValueError("ENGINE=dask needs SCHEDULER=tcp://host:port (the Dask scheduler's address)")
            with Client(settings.scheduler, timeout="30s") as client:
                yield client
            return
        if settings.engine == "local":
            from distributed import LocalCluster

            gpus = local_gpus()
            cluster = LocalCluster(n_workers=max(1, settings.workers), threads_per_worker=1, processes=True,
                                   dashboard_address=None, scheduler_kwargs=QUIET_SCHEDULER, silence_logs=logging.ERROR,
                                   resources={GPU: 1} if gpus else None)
        else:
            cluster = slurm_cluster(settings)
            cluster.scale(jobs=max(1, settings.workers))
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()


def slurm_cluster(settings: Settings) -> t.Any:
    """dask-jobqueue's SLURMCluster: one job per worker process with one thread, ``cores`` cores for its kernels."""
    from dask_jobqueue import SLURMCluster

    extra = ["--output=/dev/null", *settings.job_extra]  # else every job leaves slurm-<id>.out where grading started
    resources = []
    if settings.gpus:
        extra.append(f"--gres=gpu:{settings.gpus}")
        resources = ["--resources", f"{GPU}={settings.gpus}"]
    return SLURMCluster(
        queue=settings.queue, cores=settings.cores, processes=1, memory=settings.memory, walltime=settings.walltime,
        python=settings.python, job_extra_directives=extra, worker_extra_args=["--nthreads", "1", *resources],
        scheduler_options=QUIET_SCHEDULER, log_directory=None, local_directory=tempfile.gettempdir())


def torch_threads(settings: Settings, client: t.Any) -> int:
    if settings.torch_threads:
        return settings.torch_threads
    if settings.engine == "local":
        return max(1, (os.cpu_count() or 1) // max(1, len(client.scheduler_info()["workers"])))
    if settings.engine == "slurm":
        return max(1, settings.cores)
    return 0  # a worker of someone else's cluster: one per core of its node


# ---- the worker's side -------------------------------------------------------------------------------------------

def _scratch_owner(path: str) -> int | None:
    """The pid in a worker scratch root's name (/tmp/tdw-<pid>/...), None for another path."""
    match = re.search(rf"/{SCRATCH_PREFIX}(\d+)(/|$)", path)
    return int(match.group(1)) if match else None


def _sweep_scratch(root: str) -> None:
    """Unmount and remove the scratch roots of workers that are gone (killed mid-run): kernels' socket folders
    are tmpfs mounts in the worker's mount namespace when grading as root."""
    for folder in glob.glob(os.path.join(root, f"{SCRATCH_PREFIX}*")):
        pid = _scratch_owner(folder)
        if pid is None or pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        for mount in left_mounts(folder):
            unmount(mount)
        shutil.rmtree(folder, ignore_errors=True)


def _drop_nanny_environment() -> None:
    """Dask's nanny starts each worker with OMP_NUM_THREADS=1 and the like (``distributed.nanny.pre-spawn-environ``);
    the zygote, and every kernel, would inherit them. A kernel's threads are the grader's ``torch_threads``, the same
    whichever engine runs it."""
    import dask

    for name in dask.config.get("distributed.nanny.pre-spawn-environ", {}):
        os.environ.pop(name, None)


def left_mounts(under: str) -> list[str]:
    """Mount points below ``under`` in this process's mount namespace, deepest first."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[1] for line in lines if len(line.split()) > 1]
    return sorted((p for p in points if p.startswith(under.rstrip("/") + "/")), key=len, reverse=True)


def worker_scratch() -> str:
    return os.path.join(tempfile.gettempdir(), f"{SCRATCH_PREFIX}{os.getpid()}")


class ZygotePlugin(WorkerPlugin):
    """A Dask worker plugin: the worker's zygote starts when the worker joins (or when the plugin is registered),
    and stops, with every kernel it forked, when the worker leaves or the run unregisters the plugin."""

    name = PLUGIN

    def __init__(self, preload: t.Iterable[str] = ()) -> None:
        self.preload = list(preload)  # what the run's source notebooks import (zygote.notebook_imports)

    def setup(self, worker: t.Any = None) -> None:
        from course_tools.grading.zygote import shared_zygote

        prepare_environment()
        _drop_nanny_environment()
        _sweep_scratch(tempfile.gettempdir())
        os.makedirs(worker_scratch(), exist_ok=True)
        # imports what the source notebooks do (torch...) in its own process while the worker waits for tasks
        shared_zygote(getattr(self, "preload", ()))
        # What the first task would import (the configured preprocessors, the exporter), while the zygote starts.
        import course_tools.grading.collect  # noqa: F401
        import course_tools.grading.compat  # noqa: F401
        import course_tools.grading.restore  # noqa: F401
        import course_tools.grading.verdict  # noqa: F401

    def teardown(self, worker: t.Any = None) -> None:
        from course_tools.grading import zygote

        if zygote._shared is not None:
            try:
                zygote._shared.close()
            except subprocess.TimeoutExpired:  # a loaded machine: it did not exit within close's wait
                zygote._shared._proc.kill()
                zygote._shared._proc.wait()
            zygote._shared = None
        for mount in left_mounts(worker_scratch()):
            unmount(mount)
        shutil.rmtree(worker_scratch(), ignore_errors=True)


def worker_state() -> dict[str, t.Any]:
    """What a worker has running and mounted besides itself: its child processes, and the mounts below its own
    scratch root or below one whose worker is gone (the tests check both are empty after a run). Mounts of another
    live worker's kernels are that worker's: as root they are visible machine-wide, and another grading run may be
    under way on the same machine."""
    me = str(os.getpid())
    children = []
    for proc_stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(proc_stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            children.append(int(proc_stat.split("/")[2]))
    mounts = [m for m in left_mounts(tempfile.gettempdir()) if (owner := _scratch_owner(m)) is not None
              and (owner == os.getpid() or not os.path.exists(f"/proc/{owner}"))]
    return {"pid": os.getpid(), "children": children, "mounts": mounts}


def _worker_name() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:  # not in a Dask worker (called directly)
        return ""


def _write_files(folder: Path, files: dict[str, t.Any], stand_in: Path | None = None) -> None:
    """A submission's files: bytes for a plain file; ("link", target) for a symbolic link or a special file, made a
    link to ``stand_in`` (an empty file): grading reports links and leaves them out, so their targets never matter,
    and on a worker they may not exist (another student's folder) or, worse, exist (the grader's own files)."""
    for name, data in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, tuple):
            assert stand_in is not None
            os.symlink(stand_in, target)
        else:
            target.write_bytes(data)


def _reference_runs(source: Path) -> dict[str, t.Any]:
    """The reference runs of these source notebooks (``references``) this worker has, by notebook digest."""
    from course_tools.grading import references

    found = {key: references._memo.get(key) for key in map(references.digest, sorted(source.glob("*.ipynb")))}
    return {key: run for key, run in found.items() if run is not None}


def _reference_problems(source: Path) -> list[str]:
    """The problems the reference runs of these source notebooks found (``references``), as this worker has them."""
    return sorted({p for r in _reference_runs(source).values() for p in getattr(r, "problems", [])})


def _seed_references(runs: dict[str, dict]) -> None:
    """Reference runs the driver kept from an earlier run (``references.cached``), for ``references_for``."""
    from course_tools.grading import references

    for key, run in runs.items():
        references._memo.setdefault(key, references.References(**run))


def grade_submission(template: dict[str, t.Any], job: dict[str, t.Any]) -> Bundle:
    """On a worker: nbgrader's hardened autograde of one submission in a private course; its bundle."""
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory

    from course_tools.grading import nbgrader_costs
    from course_tools.grading.execute import TIMINGS_ENV
    from course_tools.grading.zygote import shared_zygote

    nbgrader_costs.install()
    assignment, student = template["assignment"], job["student"]
    if os.environ.get(POISON_ENV) == student:
        os._exit(86)
    os.makedirs(worker_scratch(), exist_ok=True)
    bundle = Bundle(assignment=assignment, student=student, run=job["run"], status="failed", host=socket.gethostname(),
                    worker=_worker_name())
    log_lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: log_lines.append(f"{record.levelname} {record.getMessage()}")  # type: ignore
    with tempfile.TemporaryDirectory(prefix="tdgrade-", dir=worker_scratch()) as scratch:
        course = Path(scratch, "course")
        (course / "source" / assignment).mkdir(parents=True)
        (course / "nbgrader_config.py").write_text(template["config"])
        # One gradebook path per worker, written again for each submission: nbgrader's database engine, and the
        # statements it compiled, are kept per URL (nbgrader_costs).
        gradebook = Path(worker_scratch(), "gradebook.db")
        gradebook.write_bytes(template["gradebook"])
        _write_files(course / "source" / assignment, template["source"])
        _seed_references(template.get("references", {}))
        submitted = course / "submitted" / student / assignment
        submitted.mkdir(parents=True)
        stand_in = Path(scratch, "link-stand-in")
        stand_in.write_bytes(b"")
        _write_files(submitted, job["files"], stand_in)
        timings = Path(scratch, "timings.jsonl")
        config = load_config(course)
        config.CourseDirectory.root = str(course)
        config.CourseDirectory.student_id = student
        config.CourseDirectory.assignment_id = assignment
        config.CourseDirectory.db_url = f"sqlite:///{gradebook}"
        config.CourseDirectory.course_id = template["course_id"]
        config.BaseConverter.force = True
        config.SandboxedKernelManager.scratch_root = worker_scratch()
        if job.get("torch_threads"):
            config.SandboxedKernelManager.torch_threads = job["torch_threads"]
        os.environ[TIMINGS_ENV] = str(timings)  # one task at a time per worker process (one thread)
        cwd = os.getcwd()
        converter = Autograde(coursedir=CourseDirectory(config=config), config=config)
        converter.log.addHandler(handler)
        try:
            with warnings.catch_warnings():  # nbgrader's own SQLAlchemy warnings, printed by every nbgrader autograde
                warnings.filterwarnings("ignore", module="nbgrader.api")
                converter.start()
            done = True
        except (Exception, SystemExit) as exc:  # nbgrader gives up on a submission by raising
            done = False
            # nbgrader logs a traceback as one record: its last line says what went wrong
            lasts = [record.strip().splitlines()[-1] for record in log_lines if record.strip()]
            errors = [line for line in lasts if re.search(r"\w+(Error|Exception|Timeout)\b.*:", line)
                      and "NbGraderException" not in line]
            detail = errors[-1] if errors else ""
            bundle.reason = f"nbgrader gave up on it ({type(exc).__name__}: {exc}) {detail[:600]}".strip()
        finally:
            converter.log.removeHandler(handler)
            os.chdir(cwd)
            os.environ.pop(TIMINGS_ENV, None)
        graded = course / "autograded" / student / assignment
        if done and graded.is_dir():
            bundle.status = "graded"
            bundle.files = {str(p.relative_to(graded)): p.read_bytes() for p in sorted(graded.rglob("*"))
                            if p.is_file() and not p.is_symlink()}
        elif done:
            bundle.reason = "nbgrader gave up on it (no autograded notebook)"
        if timings.is_file():
            import json

            bundle.events = [json.loads(line) for line in timings.read_text().splitlines()]
        bundle.protections = shared_zygote().protections.to_dict()
        bundle.reference_problems = _reference_problems(course / "source" / assignment)
        bundle.references = {key: run.to_dict() for key, run in _reference_runs(course / "source" / assignment).items()}
        bundle.log = "\n".join(log_lines[-30:])
    return bundle


# ---- the driver's side -------------------------------------------------------------------------------------------

def submission_files(folder: Path) -> dict[str, t.Any]:
    """A submitted folder as ``_write_files`` takes it: plain files' bytes; links and special files (FIFOs, devices)
    as ("link", their target's text), never followed nor opened (grading reports them and leaves them out)."""
    files: dict[str, t.Any] = {}
    for current, dirs, names in os.walk(folder):  # never follows links to folders
        for name in sorted(dirs + names):
            path = Path(current, name)
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                continue
            relative = str(path.relative_to(folder))
            if stat.S_ISREG(mode):
                files[relative] = path.read_bytes()
            else:
                files[relative] = ("link", os.readlink(path) if path.is_symlink() else "")
    return files


def make_template(course: Path, assignment: str, db_url: str, course_id: str, scratch: Path,
                  references: dict[str, dict] | None = None) -> dict[str, t.Any]:
    """What every task of the assignment gets: its source folder, the configuration, a gradebook with the
    assignment's definition only, and the reference runs kept from an earlier run (by notebook digest)."""
    from course_tools.grading.writer import assignment_template

    target = scratch / f"{assignment}-template.db"
    target.unlink(missing_ok=True)
    assignment_template(db_url, course_id, assignment, target)
    source = course / "source" / assignment
    return {"assignment": assignment, "course_id": course_id, "gradebook": target.read_bytes(),
            "config": (course / "nbgrader_config.py").read_text(),
            "source": {k: v for k, v in submission_files(source).items() if not isinstance(v, tuple)},
            "references": references or {}}


def _template(template: dict[str, t.Any]) -> dict[str, t.Any]:
    return template


def is_gpu_assignment(course: Path, assignment: str) -> bool:
    config = load_config(course) if (course / "nbgrader_config.py").is_file() else None
    return config is not None and assignment in GradingEngine(config=config).gpu_assignments


@dataclass
class Outcome:
    """What one assignment's batch gave: the students left ungraded (student -> why), the bundles' protections
    by host, the timings events, the lines of dropped results, and when each worker received its last result."""

    ungraded: dict[str, str] = field(default_factory=dict)
    protections: dict[str, dict] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    graded_by: dict[str, str] = field(default_factory=dict)
    reference_problems: set[str] = field(default_factory=set)
    references: dict[str, dict] = field(default_factory=dict)
    workers: int = 0
    ended: dict[int, float] = field(default_factory=dict)


def grade(client: t.Any, course: Path, assignment: str, students: list[str], writer: t.Any, *, db_url: str,
          course_id: str, scratch: Path, threads: int = 0, gpu: bool = False,
          on_result: t.Callable[[str, int], None] | None = None, references: dict[str, dict] | None = None) -> Outcome:
    """Send one task per student, record each bundle as it arrives; every student ends recorded or ungraded.
    ``references``: reference runs kept from an earlier run (``references.cached``): the workers run no other."""
    from distributed import as_completed

    outcome = Outcome(workers=len(client.scheduler_info()["workers"]))
    # A task, not scattered data: scattered data lost with every worker that held it (a poison submission kills
    # them one after the other) could not be made again; a task's result is computed again from its arguments.
    template = client.submit(_template, make_template(course, assignment, db_url, course_id, scratch, references),
                             key=f"template-{assignment}-{writer.run}", pure=False)
    writer.expect(students)
    futures: dict[t.Any, str] = {}
    jobs: dict[str, dict] = {}
    resent: dict[str, int] = {}

    waiting = list(reversed(students))

    def send(student: str) -> t.Any:
        if student not in jobs:
            jobs[student] = {"student": student, "run": writer.run, "torch_threads": threads,
                             "files": submission_files(course / "submitted" / student / assignment)}
        key = (f"grade-{assignment}", student, f"{writer.run}-{resent.get(student, 0)}")
        future = client.submit(grade_submission, template, jobs[student], key=key, pure=False,
                               resources={GPU: 1} if gpu else None)
        futures[future] = student
        return future

    def fill(queue: t.Any) -> None:
        """Keep as many tasks in flight as the cluster has worker threads, no more: a worker then holds only the
        task it runs, and when it dies Dask counts that death against that task alone (it counts it against
        every task the worker held, and gives up on a task after allowed-failures deaths)."""
        slots = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        while waiting and queue.count() < max(1, slots):
            queue.add(send(waiting.pop()))

    done = 0
    queue = as_completed()
    fill(queue)
    try:
        for future in queue:
            fill(queue)
            student = futures[future]
            if future.status == "error":
                exc = future.exception()
                name = type(exc).__name__
                why = (f"it killed its worker repeatedly ({name}: {exc})" if name == "KilledWorker"
                       else f"its grading task failed ({name}: {exc})")
                outcome.ungraded[student] = why
                writer.give_up(student)
                continue
            if future.status != "finished":  # lost or cancelled on the scheduler's side: send it again, 3 times
                resent[student] = resent.get(student, 0) + 1
                if resent[student] > 3:
                    outcome.ungraded[student] = f"its grading task was lost {resent[student]} times ({future.status})"
                    writer.give_up(student)
                else:
                    waiting.append(student)
                    fill(queue)
                continue
            bundle = future.result()
            future.release()
            outcome.events += bundle.events
            outcome.protections.setdefault(bundle.host, bundle.protections)
            outcome.graded_by[student] = f"{bundle.worker}@{bundle.host}"
            outcome.reference_problems.update(bundle.reference_problems)
            for key, run in bundle.references.items():
                outcome.references.setdefault(key, run)
            for event in bundle.events:
                outcome.ended[event["pid"]] = time.time()
            why = writer.record(bundle)
            if why:
                outcome.ungraded[student] = why
            done += 1
            if on_result:
                on_result(student, done)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()
    outcome.dropped = list(writer.dropped)
    return outcome


@contextlib.contextmanager
def zygotes(client: t.Any, preload: t.Iterable[str] = ()) -> t.Iterator[None]:
    """The zygote plugin on every worker of the cluster for the run, unregistered at its end (each worker's
    zygote, and any kernel left, stop with it). Each zygote preloads ``preload`` (the modules the run's source
    notebooks import, ``zygote.notebook_imports``) before it is ready."""
    client.register_plugin(ZygotePlugin(preload), name=PLUGIN)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            client.unregister_worker_plugin(PLUGIN)
