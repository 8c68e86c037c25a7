"""The offline GPU check (issue 38): the notebooks on CUDA and every CUDA test, next to a machine's own PyTorch.

University GPUs sit on compute nodes without internet, each with a torch of its own (a module, a conda
environment). ``make wheelhouse PYTHON_VERSION=3.12`` gathers, where there is a network, the wheels the check needs
beyond torch and torchvision: every pin of requirements.txt but LEFT_OUT, for that CPython on manylinux x86_64, with
their dependencies, into a folder (build/wheelhouse/). Copy the repository and that folder to the node; there
``make test-gpu WHEELHOUSE=... PYTHON=...`` makes a virtual environment that sees PYTHON's packages (so its torch),
installs the wheelhouse into it with ``pip --no-index``, and runs, in it, the notebooks with DEVICE=cuda and the tests
marked ``cuda`` (each skips off CUDA; here none may), then the catalog's reproducers on that torch. It prints a table
per notebook, which torch ran against the pinned one and the wordings the message corpus recorded that differ
between the two releases. Without a usable CUDA device it says so and exits with NO_CUDA.

Stages (each a subcommand): ``wheelhouse`` (any Python with pip), ``install`` (run by PYTHON: creates the environment
and runs ``check`` in it), ``check`` (in an environment that has everything: the workflow's gpu job runs it in .venv).
Only ``check`` imports more than the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "requirements.txt"
# Pins the wheelhouse leaves out. torch and torchvision are the machine's own: a wheel of them (or of what only torch
# pulls in) would replace its torch. mdpo and pymd4c only extract the Chinese edition's catalogues (`make i18n-update`,
# imported lazily), and pymd4c has no wheel past CPython 3.11.
LEFT_OUT = ("torch", "torchvision", "mdpo", "pymd4c")
NOT_ALLOWED = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia[-_].*)-", re.I)
MANYLINUX = "2_28"  # torch 2.14's wheels are manylinux_2_28, so is any node that runs it
NO_CUDA = 3  # the exit status when no CUDA device is usable
# The tests that need a GPU (marker `cuda`, tests/conftest.py skips them off CUDA) and every catalog reproducer,
# whose messages are the torch release's own.
PYTEST_RUNS = {
    "CUDA tests": ["tests", "-m", "cuda"],
    "catalog reproducers": ["tests/torchdoctor", "-k", "reproducer"],
}
SKIPPED_FOR_NO_GPU = "needs a CUDA GPU"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheelhouse_requirements(requirements: Path = REQUIREMENTS) -> list[str]:
    """The pins of requirements.txt the check installs from the wheelhouse: all but those of LEFT_OUT."""
    pins = []
    for line in requirements.read_text(encoding="utf-8").splitlines():
        pin = line.split("#", 1)[0].strip()
        if pin and canonical(re.split(r"[\s=<>!~;\[]", pin, maxsplit=1)[0]) not in LEFT_OUT:
            pins.append(pin)
    return pins


def manylinux_platforms(glibc: str = MANYLINUX) -> list[str]:
    """pip download's --platform values for a manylinux x86_64 machine with this glibc: pip does not widen
    manylinux_2_28 to the older tags by itself."""
    newest = int(glibc.split("_")[1])
    return [f"manylinux_2_{minor}_x86_64" for minor in range(newest, 16, -1)] + ["manylinux2014_x86_64"]


def pip_python(python_version: str) -> str | None:
    """A Python of ``python_version`` (with pip) to download with: this one, python3.X on PATH or one of pyenv's.
    pip download's --python-version picks the wheels for that version, but reads their dependencies' environment
    markers for the Python that runs pip: papermill needs aiohttp where python_version == "3.12" only."""
    wanted = [int(part) for part in python_version.split(".")]
    candidates = [sys.executable, shutil.which(f"python{python_version}"),
                  *sorted(Path.home().glob(f".pyenv/versions/{python_version}.*/bin/python{python_version}"))]
    for candidate in filter(None, candidates):
        probe = subprocess.run([str(candidate), "-c", "import sys, pip; print(*sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and [int(part) for part in probe.stdout.split()] == wanted:
            return str(candidate)
    return None


def build_wheelhouse(dest: Path, python_version: str, glibc: str = MANYLINUX) -> int:
    """pip download the wheels into ``dest``, with requirements.txt (the pins to install) and wheelhouse.json."""
    if (sys.platform, platform.machine()) != ("linux", "x86_64"):
        return refuse("build the wheelhouse on Linux x86_64, as the nodes are: pip reads the dependencies' "
                      "environment markers for the machine it runs on", what="make wheelhouse")
    python = pip_python(python_version)
    if python is None:
        return refuse(f"no Python {python_version} with pip here (python{python_version} on PATH, or pyenv's). pip "
                      f"reads the dependencies' environment markers for the Python that runs it, so only a Python "
                      f"{python_version} gathers them all: install one and pass it, make wheelhouse "
                      f"PYTHON=/path/to/python{python_version}", what="make wheelhouse")
    dest.mkdir(parents=True, exist_ok=True)
    pins = wheelhouse_requirements()
    (dest / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
    command = [python, "-m", "pip", "download", "--disable-pip-version-check", "--dest", str(dest),
               "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version,
               *[f"--platform={p}" for p in manylinux_platforms(glibc)], "-r", str(dest / "requirements.txt")]
    print("+", " ".join(command), flush=True)
    if subprocess.run(command).returncode:
        print(f"pip download failed: no wheelhouse for Python {python_version} in {dest}", file=sys.stderr)
        return 1
    intruders = sorted(p.name for p in dest.glob("*.whl") if NOT_ALLOWED.match(p.name))
    if intruders:
        print(f"The wheelhouse must not hold torch or its CUDA libraries (the node's own torch would be replaced): "
              f"{', '.join(intruders)}; a pin of requirements.txt pulls them in.", file=sys.stderr)
        return 1
    (dest / "wheelhouse.json").write_text(json.dumps({"python": python_version, "glibc": glibc}) + "\n")
    wheels = sorted(dest.glob("*.whl"))
    size = sum(p.stat().st_size for p in wheels) / 2**20
    print(f"{len(wheels)} wheels ({size:.0f} MiB) for CPython {python_version} manylinux_{glibc} x86_64 in {dest}; "
          f"copy it with the repository and run: make test-gpu WHEELHOUSE={dest} PYTHON=<a python with torch>")
    return 0


def refuse(message: str, status: int = 2, what: str = "make test-gpu") -> int:
    print(f"{what}: {message}", file=sys.stderr)
    return status


def install_and_check(wheelhouse: Path, env: Path, build: Path, jobs: int) -> int:
    """Run by PYTHON: check its torch, make ``env`` over its packages, install the wheelhouse offline, then run
    ``check`` in ``env``."""
    me = f"PYTHON={sys.executable} (Python {sys.version_info[0]}.{sys.version_info[1]})"
    found = subprocess.run([sys.executable, "-c", "import torch, torchvision; print(torch.__version__)"],
                           capture_output=True, text=True)
    if found.returncode:
        last = (found.stderr.strip().splitlines() or ["?"])[-1]
        return refuse(f"{me} cannot import torch and torchvision ({last}). Pass the Python of the machine's "
                      "PyTorch (after `module load ...` or `conda activate ...`): make test-gpu PYTHON=$(which python)")
    described = wheelhouse / "wheelhouse.json"
    if not described.is_file():
        return refuse(f"{wheelhouse} is no wheelhouse (no wheelhouse.json): build one with `make wheelhouse "
                      f"PYTHON_VERSION={sys.version_info[0]}.{sys.version_info[1]}` where there is a network")
    made_for = json.loads(described.read_text())["python"]
    if made_for != f"{sys.version_info[0]}.{sys.version_info[1]}":
        return refuse(f"{wheelhouse} holds wheels for Python {made_for}, but {me}: build one with "
                      f"`make wheelhouse PYTHON_VERSION={sys.version_info[0]}.{sys.version_info[1]}`")
    print(f"torch {found.stdout.strip()} of {me}; environment {env}, wheels from {wheelhouse}", flush=True)
    python = make_environment(env)
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-index",
               "--find-links", str(wheelhouse), "-r", str(wheelhouse / "requirements.txt")]
    print("+", " ".join(command), flush=True)
    if subprocess.run(command).returncode:
        return refuse(f"installing from {wheelhouse} failed (above); was it built for this machine's Python?", 1)
    check = [str(python), "-m", "course_tools.gpu_check", "check", "--build", str(build), "--jobs", str(jobs)]
    print("+", " ".join(check), flush=True)
    return subprocess.run(check, cwd=REPO).returncode


def make_environment(env: Path) -> Path:
    """A virtual environment that sees this Python's packages and the repository (as `pip install -e .` would,
    without building anything). When this Python is itself a virtual environment, --system-site-packages would see
    only its base Python: a .pth file adds its own site-packages after the new environment's."""
    python, made_by = env / "bin" / "python", env / "made-by"
    if not python.exists() or not made_by.exists() or made_by.read_text() != sys.executable:
        venv.EnvBuilder(system_site_packages=True, with_pip=True, clear=True, symlinks=True).create(env)
        made_by.write_text(sys.executable)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    lines = [str(REPO)]
    if sys.prefix != sys.base_prefix:
        lines += [p for p in dict.fromkeys([*site.getsitepackages(), sysconfig.get_path("platlib")])]
    (Path(purelib) / "torch_doctor_gpu_check.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return python


def pinned_torch() -> str:
    return next(p.split("==")[1] for p in REQUIREMENTS.read_text().splitlines() if p.startswith("torch=="))


def release_of(version: str) -> str:
    """'2.11.0+cu130' -> '2.11.0'."""
    return version.split("+")[0]


def wording_differences(release: str, pinned: str) -> list[tuple[str, str, str]] | None:
    """(entry, wording under ``release``, under ``pinned``) for every catalog entry whose last recorded message
    differs between the two releases' message corpus files; None when the corpus has no file for ``release``."""
    corpus = REPO / "tests" / "torchdoctor" / "message_corpus"
    files = [corpus / f"{r}.json" for r in (release, pinned)]
    if not all(f.is_file() for f in files):
        return None
    theirs, ours = (json.loads(f.read_text())["entries"] for f in files)

    def message(record: dict | None) -> str:
        chain = (record or {}).get("chain") or []
        return chain[-1]["message"] if chain else f"({(record or {}).get('status', 'not recorded')})"

    return [(entry, message(theirs.get(entry)), message(ours.get(entry))) for entry in sorted(set(theirs) | set(ours))
            if message(theirs.get(entry)) != message(ours.get(entry))]


def describe_torch() -> tuple[dict, str | None]:
    """What torch this is; the second value is why CUDA cannot be used, or None when it can."""
    import torch

    facts = {"python": sys.version.split()[0], "torch": torch.__version__, "torch at": str(Path(torch.__file__).parent),
             "CUDA build": torch.version.cuda or "no (a CPU-only build)", "pinned torch": pinned_torch()}
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        return facts, (f"no CUDA device: torch {torch.__version__} ({build}) says torch.cuda.is_available() is False "
                       f"here{hint}. The check runs the notebooks and tests that need a GPU: run it on a GPU node "
                       "(docs/instructors.md, 'Checking the course on a GPU node'). Nothing was run.")
    facts["device"] = f"{torch.cuda.get_device_name(0)} (of {torch.cuda.device_count()})"
    return facts, None


def run_logged(command: list[str], log: Path) -> tuple[int, str]:
    """Run ``command`` in the repository, its output both printed and written to ``log``."""
    print("+", " ".join(command), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out, subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                                                 stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
    return proc.returncode, log.read_text(encoding="utf-8")


def check(build: Path, jobs: int) -> int:
    """The notebooks on CUDA, the CUDA tests and the catalog reproducers; then the release report. Exit status 0
    only when all of it passed and nothing skipped for want of a GPU."""
    facts, no_cuda = describe_torch()
    for key, value in facts.items():
        print(f"{key:>13}: {value}")
    if no_cuda:
        return refuse(no_cuda, NO_CUDA)
    results = {}
    status, _ = run_logged([sys.executable, "-m", "course_tools.run_notebooks", "--device", "cuda", "--jobs", str(jobs),
                            "--build", str(build / "notebooks")], build / "notebooks.log")
    results["notebooks on CUDA"] = "ok" if status == 0 else "FAILED (the FAIL lines above)"
    for name, args in PYTEST_RUNS.items():
        log = build / f"{name.replace(' ', '-')}.log"
        status, text = run_logged([sys.executable, "-m", "pytest", *args, "-rs", "-p", "no:cacheprovider"], log)
        skipped = [line for line in text.splitlines() if SKIPPED_FOR_NO_GPU in line]
        results[name] = ("ok" if status == 0 else f"FAILED (pytest exit {status}, {log})") + (
            f"; {len(skipped)} skipped for want of a GPU" if skipped else "")
    release, pinned = release_of(facts["torch"]), facts["pinned torch"]
    print(f"\n{'part':<20}  result")
    for name, verdict in results.items():
        print(f"{name:<20}  {verdict}")
    print_release_report(release, pinned)
    return 0 if all(v == "ok" for v in results.values()) else 1


def print_release_report(release: str, pinned: str) -> None:
    if release == pinned:
        print(f"\ntorch {release} is the pinned release: no difference comes from the release.")
        return
    print(f"\ntorch {release} is not the pinned {pinned}: a failure above may come from the release, not the "
          "course.")
    differences = wording_differences(release, pinned)
    if differences is None:
        print(f"The message corpus has no file for {release} (tests/torchdoctor/message_corpus/; `make "
              f"message-corpus RELEASE={release}` records one).")
        return
    print(f"Messages the corpus recorded on CPU that {release} words otherwise than {pinned} ({len(differences)}):")
    for entry, theirs, ours in differences:
        print(f"  {entry}\n    {release}: {theirs[:150]}\n    {pinned}: {ours[:150]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stages = parser.add_subparsers(dest="stage", required=True)
    wheels = stages.add_parser("wheelhouse", help="download the wheels the check installs, for another Python")
    wheels.add_argument("--python-version", default=f"{sys.version_info[0]}.{sys.version_info[1]}")
    wheels.add_argument("--dest", type=Path, default=REPO / "build" / "wheelhouse")
    wheels.add_argument("--glibc", default=MANYLINUX, help=f"the nodes' oldest glibc, as 2_28 (default {MANYLINUX})")
    install = stages.add_parser("install", help="run by the Python that has torch: environment, wheels, check")
    install.add_argument("--wheelhouse", type=Path, default=REPO / "build" / "wheelhouse")
    install.add_argument("--env", type=Path, default=REPO / "build" / "gpu-env")
    for stage in (install, stages.add_parser("check", help="the check itself, in an environment with everything")):
        stage.add_argument("--build", type=Path, default=REPO / "build" / "gpu")
        stage.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.stage == "wheelhouse":
        return build_wheelhouse(args.dest.resolve(), args.python_version, args.glibc)
    if args.stage == "install":
        return install_and_check(args.wheelhouse.resolve(), args.env.resolve(), args.build.resolve(), args.jobs)
    return check(args.build.resolve(), args.jobs)


if __name__ == "__main__":
    sys.exit(main())
