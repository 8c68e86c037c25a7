"""The messages of other PyTorch releases: run every catalog reproducer under each supported release, record them.

``explain`` is tested against the pinned PyTorch only, but learners have other releases, which word many errors
differently. This collector installs each release from 2.6 (when ``torch.load`` became ``weights_only`` by default) to
the pinned one into a throwaway virtual environment outside the repository, runs every reproducer that can run on this
machine under it, and writes what each raised (type, the names of its classes, message, and the chained exceptions
Python prints with it) to tests/torchdoctor/message_corpus/<release>.json. tests/torchdoctor/test_message_corpus.py
then checks, with the pinned PyTorch only, that ``explain`` files every recorded message under its entry.

    python -m course_tools.message_corpus                      # every release of RELEASES, one at a time
    python -m course_tools.message_corpus --release 2.9.1      # one (the workflow's matrix runs one per job)

Installing: ``pip install --no-deps torch==X`` plus the few pure-Python packages torch imports. PyPI's Linux wheels are
CUDA builds whose ``import torch`` needs the NVIDIA libraries even on a machine without a GPU, so when the import fails
the collector installs the NVIDIA packages that release names into one folder per CUDA major version, shared by the
releases of that version (the newest release of each version is collected first, its libraries serve the older
ones); a CPU-only wheel (``+cpu``, as on this machine's wheel folder) needs none. The release the running
interpreter already has is collected with it, without a new environment.

The reproducers run in the old environment through this file's ``--run`` mode, which imports only torch and the
catalog's modules (``torchdoctor.catalog.<chapter>``, loaded without torchdoctor's ``__init__``, so that nothing of
``explain`` runs under an old release), all in one process, each entry once; an entry whose reproducer hangs (past
ENTRY_TIMEOUT_S) or crashes the process is recorded as such, and a new process goes on with the entries left.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "torchdoctor" / "message_corpus"
# The latest patch of each minor release from 2.6 to the pinned 2.14 that PyPI has for Python 3.11
# (`pip index versions torch`, December 2026), newest first: see the module docstring for why.
RELEASES = ("2.14.1", "2.13.0", "2.12.1", "2.11.0", "2.10.0", "2.9.1", "2.8.0", "2.7.1", "2.6.0")
PURE_DEPS = ("filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec", "numpy", "pillow")
RUN_TIMEOUT_S = 3600
ENTRY_TIMEOUT_S = 90
SHM_SIZE = "256m"


# --------------------------------------------------------------------------------------------- run inside the release
def _load_catalog_modules(repo: Path) -> list:
    """The catalog's chapter modules, imported without torchdoctor's and torchdoctor.catalog's ``__init__``."""
    import importlib
    import types

    packages = (("torchdoctor", repo / "torchdoctor"), ("torchdoctor.catalog", repo / "torchdoctor" / "catalog"))
    for name, folder in packages:
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    names = sorted(p.stem for p in (repo / "torchdoctor" / "catalog").glob("*.py") if not p.stem.startswith("_"))
    return [importlib.import_module(f"torchdoctor.catalog.{name}") for name in names]


def _not_run_reason(needs: str) -> str | None:
    import torch

    cuda_built = torch.backends.cuda.is_built()
    gpu = cuda_built and torch.cuda.is_available()
    if needs == "cuda" and not gpu:
        return "not run (needs CUDA)"
    if needs == "cuda-build-without-gpu" and (not cuda_built or gpu):
        return "not run (needs a CUDA build of PyTorch without a GPU)"
    if needs == "cpu-only-build" and cuda_built:
        return "not run (needs a CPU-only build of PyTorch)"
    return None


def _anonymous(message: str) -> str:
    """The message with the folders of this machine replaced: <site-packages> (torch's), <repo> (the course's)."""
    import torch

    site = str(Path(torch.__file__).resolve().parent.parent)
    return message.replace(site, "<site-packages>").replace(str(ROOT), "<repo>")


def _record_exception(exc: BaseException) -> list[dict]:
    """The chain Python prints for ``exc``, newest first; each item says how it relates to the next (older) one."""
    chain: list[dict] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        item = {
            "type": type(exc).__name__,
            "types": [c.__name__ for c in type(exc).__mro__ if c not in (object, BaseException)],
            "message": _anonymous(str(exc)),
        }
        older = exc.__cause__ or exc.__context__
        if older is not None:
            item["older"] = "cause" if exc.__cause__ is not None else (
                "suppressed-context" if exc.__suppress_context__ else "context")
        chain.append(item)
        exc = older
    return chain


def _run_entries(repo: Path, skip: set[str], out: Path) -> None:
    """Raise the reproducers of every chapter module, appending one JSON line per entry to ``out`` as each ends."""
    import faulthandler

    for module in _load_catalog_modules(repo):
        for entry in module.ENTRIES:
            if entry.id in skip:
                continue
            with open(out, "a", encoding="utf-8") as f:  # the entry that hangs is the one started and never ended
                f.write(json.dumps({"id": entry.id, "started": True}) + "\n")
            record: dict = {"id": entry.id, "needs": entry.needs}
            reason = _not_run_reason(entry.needs)
            if reason:
                record["status"] = reason
            else:
                faulthandler.dump_traceback_later(ENTRY_TIMEOUT_S, exit=True)
                try:
                    entry.reproducer()
                except BaseException as exc:  # noqa: BLE001 - a reproducer may raise anything, warnings included
                    record["status"] = "raised"
                    record["chain"] = _record_exception(exc)
                else:
                    record["status"] = "raised nothing"
                finally:
                    faulthandler.cancel_dump_traceback_later()
            with open(out, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


# ------------------------------------------------------------------------------------------------ the collector side
def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], check=True)


def _import_error(python: Path) -> str | None:
    out = subprocess.run([str(python), "-c", "import torch; torch.ones(2) @ torch.ones(2)"],
                         capture_output=True, text=True, timeout=600)
    return None if out.returncode == 0 else out.stderr.strip().splitlines()[-1]


def _cuda_requirements(python: Path) -> tuple[str | None, list[str]]:
    """The CUDA major version ('cu12', 'cu13') and the NVIDIA packages the installed torch asks for."""
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps([r.split(';')[0].replace(' ', '').replace('(', '').replace(')', '') "
            "for r in m.requires('torch') or [] if r.startswith(('nvidia-', 'cuda-'))]))")
    reqs = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)
    majors = {m for r in reqs for m in re.findall(r"-(cu\d+)\b", r)}
    return (majors.pop() if len(majors) == 1 else None), reqs


def _own_nvidia_libs(major: str) -> Path | None:
    """The NVIDIA libraries next to the running interpreter's torch, when that torch was built for CUDA ``major``."""
    try:
        import torch
    except ImportError:
        return None
    if torch.version.cuda is None or f"cu{torch.version.cuda.split('.')[0]}" != major:
        return None
    folder = Path(torch.__file__).parent.parent / "nvidia"
    return folder if folder.is_dir() else None


def _add_to_path(python: Path, folder: Path) -> None:
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "message_corpus_cuda_libs.pth").write_text(f"{folder}\n")


def prepare_environment(release: str, workdir: Path) -> Path:
    """A virtual environment under ``workdir`` with torch ``release`` that imports on CPU; its python."""
    venv = workdir / f"venv-{release}"
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip(python, "--no-deps", f"torch=={release}")
    _pip(python, *PURE_DEPS)
    error = _import_error(python)
    if error is None:
        print(f"[{release}] import torch works with --no-deps", flush=True)
        return python
    major, reqs = _cuda_requirements(python)
    print(f"[{release}] import torch failed without the NVIDIA libraries ({error}); CUDA {major}", flush=True)
    if major is None:
        raise RuntimeError(f"torch {release} does not import and names no single CUDA version: {reqs}")
    libs = workdir / f"cuda-libs-{major}"
    own = _own_nvidia_libs(major)
    if not libs.exists() and own is not None:  # the running interpreter's torch uses the same CUDA: share its libraries
        libs.mkdir(parents=True)
        (libs / "nvidia").symlink_to(own)
        print(f"[{release}] using the NVIDIA libraries of {own}", flush=True)
    if not libs.exists():
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--target", str(libs), *reqs], check=True)
    _add_to_path(python, libs)
    error = _import_error(python)
    if error is not None:
        raise RuntimeError(f"torch {release} does not import even with {libs}: {error}")
    return python


def _private_shm() -> list[str]:
    """A command prefix that gives the runner a /dev/shm of its own, SHM_SIZE big, where this is possible (root and
    unshare): shm-no-space's reproducer asks for more than /dev/shm holds, and releases before 2.10 do not reserve
    it first but fill it until the worker dies, which on the machine's shared /dev/shm takes everyone's."""
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    mount = f'mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"]


def collect(python: Path, release: str, out_dir: Path = CORPUS) -> Path:
    """Run every reproducer under ``python`` and write <release>.json."""
    info = json.loads(subprocess.run(
        [str(python), "-c", "import json, platform, torch; print(json.dumps([torch.__version__, "
         "platform.python_version(), torch.backends.cuda.is_built(), torch.cuda.is_available()]))"],
        capture_output=True, text=True, check=True).stdout)
    records: dict[str, dict] = {}
    done: set[str] = set()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp, "entries.jsonl")
        while True:  # one process for all entries; after a hang or a crash, a new one for the entries left
            lines.unlink(missing_ok=True)
            # stdout and stderr go to a file, not a pipe: a DataLoader worker left behind by a reproducer that hung
            # would hold a pipe open, and the collector would wait for it after the runner itself has ended.
            with open(Path(tmp, "stderr.txt"), "w+", encoding="utf-8") as log:
                proc = subprocess.run(
                    [*_private_shm(), str(python), str(Path(__file__).resolve()), "--run",
                     "--skip", ",".join(sorted(done)), "--out", str(lines)],
                    cwd=tmp, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S,
                    env={**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"},
                )
                log.seek(0)
                stderr = log.read()
            started = None
            for line in lines.read_text(encoding="utf-8").splitlines() if lines.exists() else []:
                record = json.loads(line)
                if record.get("started"):
                    started = record["id"]
                    continue
                started = None
                done.add(record["id"])
                records[record.pop("id")] = record
            if proc.returncode == 0 and started is None:
                break
            if started is None:  # it failed before any entry (a catalog module does not import under this release)
                raise RuntimeError(f"the reproducers failed to start under torch {release}: {stderr[-2000:]}")
            # the process died inside this entry's reproducer (a hang past ENTRY_TIMEOUT_S, or a crash)
            print(f"[{release}] {started}: the process ended in its reproducer (exit {proc.returncode})", flush=True)
            records[started] = {"status": f"process ended inside the reproducer (exit {proc.returncode})",
                                "output_tail": stderr[-1500:]}
            done.add(started)
    print(f"[{release}] {len(records)} entries in {time.monotonic() - start:.0f} s", flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{release}.json"
    data = {
        "release": release,
        "torch": info[0],
        "python": info[1],
        "cuda_build": info[2],
        "gpu": info[3],
        "platform": f"{platform.system()} {platform.machine()}",
        "entries": dict(sorted(records.items())),
    }
    # Messages this corpus files under another entry than the one whose reproducer raised them, kept across runs.
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        for entry_id, record in old.get("entries", {}).items():
            if "expected" in record and entry_id in data["entries"]:
                data["entries"][entry_id]["expected"] = record["expected"]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    counts: dict[str, int] = {}
    for record in records.values():
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    print(f"[{release}] wrote {path}: {counts}", flush=True)
    return path


def _installed_release(python: Path) -> str | None:
    out = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return out.stdout.strip().split("+")[0] if out.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append",
                        help=f"a torch release (repeatable); default: {', '.join(RELEASES)}")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "torchdoctor-message-corpus",
                        help="where the throwaway environments go (outside the repository)")
    parser.add_argument("--keep", action="store_true", help="keep each environment (default: delete it once collected)")
    parser.add_argument("--out", type=Path, default=CORPUS)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:  # inside the release's environment
        _run_entries(ROOT, {s for s in args.skip.split(",") if s}, args.out)
        return 0
    releases = args.release or list(RELEASES)
    here = _installed_release(Path(sys.executable))
    args.workdir.mkdir(parents=True, exist_ok=True)
    for release in releases:
        if release == here:
            print(f"[{release}] the running interpreter's torch", flush=True)
            collect(Path(sys.executable), release, args.out)
            continue
        python = prepare_environment(release, args.workdir)
        try:
            collect(python, release, args.out)
        finally:
            if not args.keep:
                shutil.rmtree(args.workdir / f"venv-{release}", ignore_errors=True)
    if not args.keep:
        for libs in args.workdir.glob("cuda-libs-*"):
            shutil.rmtree(libs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
