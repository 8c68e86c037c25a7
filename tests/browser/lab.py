"""What the browser tests need around Chromium: the browser itself, a scratch copy of the course, and a JupyterLab
started on a free port in one of the course's views (views/student, views/instructor) and always stopped.

Used by tests/browser/conftest.py; importable on its own to look at the course by hand:
`.venv/bin/python -m tests.browser.lab student` starts a student view on a scratch copy and prints its URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VIEWS = REPO / "views"
SCREENSHOTS = REPO / "build" / "screenshots"
# Debian's package installs /usr/bin/chromium; other systems name it otherwise.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Generous: the tests run beside the notebooks and the grading corpus on two loaded cores.
SERVER_START_S = 120


def find_chromium() -> str | None:
    """The Chromium to drive: $CHROMIUM if set, else the first of CHROMIUM_NAMES on PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scratch_course(root: Path) -> Path:
    """A copy of what a student's or an instructor's clone holds that JupyterLab and nbgrader use: the chapters,
    the exercises, and the nbgrader course root (configuration and source, no gradebook or generated folders).
    JupyterLab saves and grading writes there, never in the repository."""
    root.mkdir(parents=True, exist_ok=True)
    for folder in ("course", "exercises"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "autograder").mkdir()
    shutil.copy2(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    shutil.copytree(REPO / "autograder" / "source", root / "autograder" / "source",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy2(REPO / "nbgrader_config.py", root)
    shutil.copy2(REPO / "course.toml", root)
    return root


@dataclass
class Lab:
    """A running JupyterLab: its URL, token, root folder and log file."""

    url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen

    def page_url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.url}{path}{sep}token={self.token}"

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(f"{self.url}api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def shut_down_sessions(self) -> None:
        """Close every notebook's kernel, as File ▸ Shut Down would: the next test opens a notebook afresh."""
        for session in self.api("GET", "sessions"):
            self.api("DELETE", f"sessions/{session['id']}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def lab_environment(view: str, home: Path) -> dict[str, str]:
    """The environment of a JupyterLab in `view`: the view's config folder first on JUPYTER_CONFIG_PATH (as
    `make lab` and `make lab-instructor` do), and the user's own configuration, settings and runtime files
    replaced by empty folders under `home`, so that neither the tester's home affects the test nor the reverse."""
    env = dict(os.environ)
    env["JUPYTER_CONFIG_PATH"] = str(VIEWS / view)
    for name, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                      ("IPYTHONDIR", "ipython"), ("JUPYTER_DATA_DIR", "data")):
        env[name] = str(home / sub)
        (home / sub).mkdir(parents=True, exist_ok=True)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # nbgrader calls alembic
    env.pop("JUPYTER_PREFER_ENV_PATH", None)
    return env


@contextlib.contextmanager
def running_lab(view: str, root: Path, home: Path) -> Iterator[Lab]:
    """Start JupyterLab in `view` on `root` (also its working folder: nbgrader reads nbgrader_config.py there) on
    a free port; stop it, and everything it started, whatever happens."""
    token = secrets.token_hex(16)
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    # The tester's only setting: every cell in the page, so that prompts and outputs can be read off the page
    # (JupyterLab's default, windowing, leaves cells out of view empty).
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text('{"windowingMode": "none"}')
    log = home / f"jupyterlab-{view}.log"
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}",
               f"--LabApp.user_settings_dir={home / 'settings'}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
               "--ServerApp.port_retries=0", "--ServerApp.disable_check_xsrf=False"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=root, env=lab_environment(view, home), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(url=f"http://127.0.0.1:{port}/", token=token, root=root, log=log, process=process)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"JupyterLab ({view}) exited with {process.returncode}:\n{lab.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(lab.page_url("api/status"), timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab ({view}) did not answer in {SERVER_START_S} s:\n"
                                   f"{lab.log_text()[-3000:]}")
            time.sleep(0.5)
        yield lab
    finally:
        stop(process)
        kill_leftovers(home / "runtime")


def stop(process: subprocess.Popen) -> None:
    """End JupyterLab and its kernels (its own process group), politely first."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


def kill_leftovers(runtime: Path) -> None:
    """Kernels run in sessions of their own, so a JupyterLab killed before it could stop them leaves them behind:
    end every process whose command line names this lab's runtime folder (their connection files lie there)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    marker = str(runtime).encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)


if __name__ == "__main__":
    view = sys.argv[1] if len(sys.argv) > 1 else "student"
    with tempfile.TemporaryDirectory(prefix="torchdoctor-lab-") as tmp:
        course = scratch_course(Path(tmp) / "course")
        with running_lab(view, course, Path(tmp) / "home") as lab:
            print(lab.page_url(), flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                lab.process.wait()
