"""The hardened grader as a drop-in for nbgrader (docs/instructors.md "A drop-in for nbgrader"): a kernel sees what a
stock kernel sees of its assignment (nbgrader's variables, the submission's hidden files, read-only paths the
instructor lists) and what it writes comes back; the notebook's kernelspec is honoured; a failing reference costs its
own cell only; feedback quotes no hidden line; a `locked` flag nbgrader ignores is no tampering; nothing is left
behind."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from traitlets.config import Config

from course_tools.grading import references
from course_tools.grading.execute import SandboxedExecute
from course_tools.grading.feedback import HIDDEN, ClearHiddenTracebacks
from course_tools.grading.files import copy_in, copy_out
from course_tools.grading.verdict import Verdicts
from course_tools.grading.zygote import Zygote, notebook_imports, shared_zygote, unprotected_refusal
from course_tools.release import REPO

pytestmark = pytest.mark.skipif(bool(unprotected_refusal()), reason=str(unprotected_refusal()))


def run(cells: list[str], folder: Path, config: Config | None = None, kernelspec: str = "python3",
        student: str | None = "s") -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": kernelspec, "display_name": kernelspec, "language": "python"}
    info = {"assignment": "ps1", **({"student": student} if student else {})}
    SandboxedExecute(config=config or Config()).preprocess(nb, {"metadata": {"path": str(folder)}, "nbgrader": info})
    return nb


def text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + o.get("ename", "") + o.get("evalue", "") for o in cell.outputs)


def test_the_kernel_sees_nbgraders_variables_and_hidden_files_and_its_writes_come_back(tmp_path, monkeypatch):
    (tmp_path / ".data").mkdir()
    (tmp_path / ".data" / "points.csv").write_text("1,2\n")
    (tmp_path / "p1.ipynb").write_text("{}")  # notebooks stay out of the kernel
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("GRADER_SECRET", "s3cret")
    nb = run(["import os; print(os.environ.get('NBGRADER_EXECUTION'), os.environ.get('GRADER_SECRET'))",
              "print(open('.data/points.csv').read().strip(), sorted(os.listdir('.')))",
              "os.makedirs('out', exist_ok=True)\nopen('out/plot.txt', 'w').write('drawn')\n"
              "open('.data/points.csv', 'w').write('changed')\nopen('p2.ipynb', 'w').write('{}')\n"
              "os.symlink('/etc/passwd', 'link.txt')"], tmp_path)
    assert text(nb.cells[0]) == "autograde None\n"
    assert text(nb.cells[1]) == "1,2 ['.data']\n"
    assert (tmp_path / "out" / "plot.txt").read_text() == "drawn"
    assert (tmp_path / ".data" / "points.csv").read_text() == "changed"
    assert not (tmp_path / "p2.ipynb").exists() and not (tmp_path / "link.txt").exists()


def test_what_comes_in_and_goes_out_is_capped(tmp_path):
    source, stage, out = tmp_path / "source", tmp_path / "stage", tmp_path / "out"
    source.mkdir()
    for name in ("a.bin", "b.bin", "c.bin"):
        (source / name).write_bytes(b"x" * 1000)
    os.symlink("/etc/passwd", source / "link")
    assert copy_in(str(source), str(stage), 2500) == ["c.bin"]
    assert sorted(p.name for p in stage.iterdir()) == ["a.bin", "b.bin"]
    kernel = tmp_path / "kernel"
    kernel.mkdir()
    for i in range(5):
        (kernel / f"new{i}.txt").write_text("y" * 100)
    (kernel / "a.bin").write_bytes(b"x" * 1000)  # unchanged: not copied
    out.mkdir()
    copied, skipped = copy_out(str(kernel), str(stage), str(out), max_files=3, max_bytes=10_000)
    assert copied == 3 and len(skipped) == 2 and sorted(p.name for p in out.iterdir()) == [
        "new0.txt", "new1.txt", "new2.txt"]
    os.symlink("/tmp", out / "sub")  # a link planted in the target is never written through
    (kernel / "sub").mkdir()
    (kernel / "sub" / "x.txt").write_text("z")
    assert copy_out(str(kernel), str(stage), str(out), 100, 100_000)[1] == ["sub/x.txt"]


def test_extra_paths_are_readable_and_read_only_in_the_jail(tmp_path):
    shared = tmp_path / "shared-data"
    shared.mkdir()
    (shared / "table.csv").write_text("42\n")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "gradebook.db").write_text("secret")
    config = Config()
    # the last one holds the notebook's folder (a course around it): refused
    config.SandboxedKernelManager.extra_paths = [str(shared), "/no/such/path", str(tmp_path)]
    probe = f"import os; print(open({str(shared / 'table.csv')!r}).read().strip())"
    write = f"open({str(shared / 'new.txt')!r}, 'w')"
    nb = run([probe, write, f"print(os.path.exists({str(tmp_path / 'gradebook.db')!r}))"], work, config)
    assert text(nb.cells[0]) == "42\n"
    assert "OSError" in text(nb.cells[1]) and "Read-only file system" in text(nb.cells[1])
    assert text(nb.cells[2]) == "False\n"
    assert "FileNotFoundError" in text(run([probe], work).cells[0])  # not listed: not there


@pytest.fixture
def other_kernel(tmp_path, monkeypatch):
    """A kernelspec that is not the course's default Python kernel: its own argv (through env), its own env."""
    spec = tmp_path / "kernels" / "other"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/usr/bin/env", sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Other", "language": "python", "env": {"FROM_KERNELSPEC": "yes"}}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return "other"


def test_another_kernelspec_runs_its_own_argv_in_the_same_jail(tmp_path, other_kernel):
    work = tmp_path / "work"
    work.mkdir()
    nb = run(["import os, sys; print(os.environ.get('FROM_KERNELSPEC'), 'zygote' if 'course_tools.grading.sandbox' in "
              "sys.modules else 'own')",
              "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
              "except OSError as e:\n    print(e.strerror)",
              f"print(os.path.exists({str(REPO / 'autograder')!r}), os.getcwd())",
              "open('written.txt', 'w').write('x')"], work, kernelspec=other_kernel)
    assert text(nb.cells[0]) == "yes own\n"
    assert text(nb.cells[1]) == "Network is unreachable\n"
    assert text(nb.cells[2]) == "False /home/student\n"
    assert (work / "written.txt").read_text() == "x"


def test_the_default_kernel_gets_the_kernelspecs_env_and_stays_in_the_zygote(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Python 3",
        "language": "python", "env": {"FROM_KERNELSPEC": "too"}}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    nb = run(["import os, sys; print(os.environ.get('FROM_KERNELSPEC'), 'course_tools.grading.sandbox' in "
              "sys.modules)"], tmp_path)
    assert text(nb.cells[0]) == "too True\n"  # forked by the zygote (which imported the sandbox), not exec'd


def test_kernels_start_with_what_the_source_notebook_imports_never_with_what_a_submission_does(tmp_path):
    course, work = tmp_path / "course", tmp_path / "work"
    (course / "source" / "ps1").mkdir(parents=True)
    work.mkdir()
    nbformat.write(new_notebook(cells=[new_code_cell("import colorsys\nfrom json import tool")]),
                   course / "source" / "ps1" / "p1.ipynb")
    config = Config()
    config.CourseDirectory.root = str(course)
    probe = "import sys; print(sorted(m for m in ('colorsys', 'json.tool', 'wave') if m in sys.modules))"

    def graded(cells: list[str]) -> nbformat.NotebookNode:
        nb = new_notebook(cells=[new_code_cell(source) for source in cells])
        info = {"assignment": "ps1", "notebook": "p1", "student": "s"}
        resources = {"metadata": {"path": str(work)}, "nbgrader": info}
        SandboxedExecute(config=config).preprocess(nb, resources)
        return nb

    assert text(graded(["import wave", probe]).cells[1]) == "['colorsys', 'json.tool', 'wave']\n"
    assert text(graded([probe]).cells[0]) == "['colorsys', 'json.tool']\n"  # a new kernel, from the same zygote
    assert {"colorsys", "json.tool"} <= set(shared_zygote().preloaded)
    assert "wave" not in shared_zygote().preloaded


def test_a_kernel_starts_with_the_zygotes_objects_frozen(tmp_path):
    """The zygote's objects (ipykernel's here: about 37,000; with torch about 350,000) are frozen before the fork, so
    the kernel's garbage collections do not walk them and copy their pages (zygote.py's docstring has the
    measurement); the kernel's own are not."""
    nb = run(["import gc\nprint(gc.get_freeze_count() > 10_000, gc.get_objects()[-1:] != [])"], tmp_path)
    assert text(nb.cells[0]) == "True True\n"


def test_the_zygote_preloads_the_courses_imports_and_refuses_a_module_that_starts_a_thread(tmp_path, monkeypatch):
    (tmp_path / "threaded_module.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    modules = notebook_imports(sorted((REPO / "autograder" / "source").glob("*/*.ipynb")))
    assert {"torch", "torch._dynamo", "torchdoctor.observe"} <= set(modules)  # dynamo: any optimizer imports it
    zygote = Zygote(["threaded_module", *modules, "colorsys"])
    try:
        zygote.protections  # noqa: B018 -- ready: preloaded
        assert zygote.refused == ["threaded_module"]
        assert {"torch", "torch._dynamo", "torchdoctor.observe", "colorsys"} <= set(zygote.preloaded)
        assert len(os.listdir(f"/proc/{zygote._proc.pid}/task")) == 1  # it forks with its own thread only
        assert zygote.preload(["threaded_module", "wave"]) == [*zygote.preloaded] and "wave" in zygote.preloaded
        assert len(os.listdir(f"/proc/{zygote._proc.pid}/task")) == 1
    finally:
        zygote.close()


def _test_cell(grade_id: str, source: str) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": grade_id, "points": 1, "schema_version": 3}})


def test_a_test_failing_on_the_reference_costs_its_own_cell_and_keeps_nbgraders_verdict(tmp_path):
    nb = new_notebook(cells=[
        _test_cell("observed", "### BEGIN HIDDEN TESTS\nfrom torchdoctor.observe import Record\n"
                               "rec = Record()\nrec.value('x', 1)\nrec.show()\n### END HIDDEN TESTS"),
        _test_cell("outside", "assert open('/srv/not/in/the/jail.csv').read()"),
        _test_cell("twice", "from torchdoctor.observe import Record\nRecord().show()\nRecord().show()"),
    ])
    path = tmp_path / "p1.ipynb"
    nbformat.write(nb, path)
    found = references.reference_run(path, Config())
    assert found.records == {"observed": {"checks": {"x": 1}}}
    assert set(found.failed) == {"outside", "twice"} and "FileNotFoundError" in found.failed["outside"]
    assert all("nbgrader's in-kernel verdict stands" in p for p in found.problems)
    verdicts = Verdicts()
    verdicts._references = found
    passed = _test_cell("outside", "assert True")
    passed.outputs = []
    assert verdicts.preprocess_cell(passed, {}, 1)[0].outputs == []  # the kernel's verdict: passed
    failed = _test_cell("outside", "assert False")
    failed.outputs = [new_output("error", ename="AssertionError", evalue="", traceback=[])]
    assert verdicts.preprocess_cell(failed, {}, 1)[0].outputs[0].ename == "AssertionError"


def test_feedback_quotes_no_hidden_line_even_in_a_traceback():
    cell = _test_cell("t", "assert f(1) == 1\n### BEGIN HIDDEN TESTS\nassert f(3) == 9, 'f(3) == 9 fails'\n"
                           "### END HIDDEN TESTS")
    cell.outputs = [new_output("error", ename="AssertionError", evalue="assert f(3) == 9, 'f(3) == 9 fails'",
                               traceback=["Traceback (most recent call last):\n",
                                          '  File "<cell>", line 3\n    \x1b[0;32massert\x1b[0m f(3) == 9, '
                                          "'f(3) == 9 fails'\n", "AssertionError: f(3) == 9 fails"])]
    nb = new_notebook(cells=[cell])
    nb, _ = ClearHiddenTracebacks().preprocess(nb, {})
    shown = json.dumps(nb.cells[0].outputs)
    assert "f(3) == 9, " not in shown and HIDDEN in shown and 'line 3' in shown


def test_grading_as_an_ordinary_user_leaves_nothing_behind():
    """As an ordinary user (the user namespace route), on the normal and the NoSuchKernel path: no scratch folder, no
    mount, no process is left. The user runs the system's Python 3.11 with this environment's packages on
    PYTHONPATH (the venv's own interpreter lies under root's home), and lists them in extra_paths for the kernels."""
    import pwd

    system_python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if os.geteuid() != 0 or not system_python.exists():
        pytest.skip("needs root, to become the test user tdtest, and a system Python of this version")
    try:
        user = pwd.getpwnam("tdtest")
    except KeyError:
        pytest.skip("no user tdtest on this machine (`.ci/grading_services.sh install`, as root, adds it)")
    scratch = Path(tempfile.mkdtemp(prefix="td-tdtest-"))  # pytest's own folders are root's only
    try:
        os.chown(scratch, user.pw_uid, user.pw_gid)
        _as_ordinary_user(scratch, user, system_python)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _as_ordinary_user(scratch, user, system_python):
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    work, kernels = scratch / "work", scratch / "kernels"
    for folder in (work, kernels):
        folder.mkdir()
        os.chown(folder, user.pw_uid, user.pw_gid)
    script = textwrap.dedent(f"""
        import sys
        from traitlets.config import Config
        from jupyter_client.kernelspec import NoSuchKernel
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_grading_dropin import run
        config = Config()
        config.SandboxedKernelManager.scratch_root = {str(kernels)!r}
        config.SandboxedKernelManager.extra_paths = [{site!r}]
        nb = run(["import subprocess; subprocess.Popen(['sleep', '600'], start_new_session=True)",
                  "open('w.txt', 'w').write('1'); print('ran')"], {str(work)!r}, config)
        print(nb.cells[1].outputs[0]["text"].strip())
        try:
            run(["1"], {str(work)!r}, config, kernelspec="no-such-kernel")
        except NoSuchKernel:
            print("no such kernel")
    """)
    env = {"PATH": os.environ["PATH"], "HOME": str(scratch), "PYTHONPATH": f"{site}:{REPO}"}
    proc = subprocess.run(["runuser", "-u", "tdtest", "--", str(system_python), "-c", script], capture_output=True,
                          text=True, cwd="/", env=env, timeout=600)
    assert proc.stdout.split("\n")[:2] == ["ran", "no such kernel"], proc.stdout + proc.stderr[-3000:]
    assert sorted(p.name for p in work.iterdir()) == ["w.txt"] and list(kernels.iterdir()) == []
    assert str(scratch) not in Path("/proc/self/mountinfo").read_text()
    left = subprocess.run(["pgrep", "-u", "tdtest", "-a"], capture_output=True, text=True).stdout
    assert "sleep 600" not in left and "zygote" not in left, left


def test_the_no_such_kernel_path_leaves_no_folder_or_mount(tmp_path):
    from jupyter_client.kernelspec import NoSuchKernel

    config = Config()
    config.SandboxedKernelManager.scratch_root = str(tmp_path)
    with pytest.raises(NoSuchKernel):
        run(["1"], tmp_path, config, kernelspec="no-such-kernel")
    assert list(tmp_path.iterdir()) == []
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()


@pytest.mark.parametrize(("flags", "reported"), [
    ({"locked": False}, []),  # nbgrader locks a grade cell that is not a solution whatever the flag says
    ({"locked": True}, []),
    ({"solution": True}, ["metadata changed"]),
    ({"grade": False, "locked": False}, ["metadata changed"]),
])
def test_only_metadata_changes_nbgrader_acts_on_count_as_tampering(tmp_path, monkeypatch, flags, reported):
    from nbgrader.api import Gradebook

    from course_tools.grading.restore import RestoreCells

    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # alembic
    with Gradebook(db) as gb:
        gb.add_assignment("ps1")
        gb.add_notebook("p1", "ps1")
        gb.add_grade_cell("t", "p1", "ps1", max_score=1, cell_type="code")
        gb.add_source_cell("t", "p1", "ps1", cell_type="code", locked=True, source="assert True", checksum="x")
    cell = _test_cell("t", "assert True")
    cell.metadata.nbgrader.update(flags)
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    nb, _ = RestoreCells(config=config).preprocess(new_notebook(cells=[cell]), {"nbgrader": {
        "db_url": db, "notebook": "p1", "assignment": "ps1", "student": "s"}})
    assert [t["what"] for t in nb.metadata.torchdoctor.tampering] == reported


BADLY_SIGNED_OUTPUT = """
_kernel = get_ipython().kernel
_msg = _kernel.session.msg("stream", {"name": "stdout", "text": "x"}, parent=_kernel.get_parent("shell"))
_frames = _kernel.session.serialize(_msg)
_frames[_frames.index(b"<IDS|MSG>") + 1] = b"0" * 64
_kernel.iopub_socket.send_multipart(_frames)
"""


def test_a_cells_liveness_poll_ends_with_its_cell_even_when_its_output_was_unreadable(tmp_path):
    """nbclient's poll was left running after an unreadable message and cancelled later cells (the attack corpus's
    output_flood lost its part 1 in a CI run, beside an AssertionError from such a poll)."""
    import gc
    import types

    nb = run([BADLY_SIGNED_OUTPUT, "import time\ntime.sleep(2.5)\nprint('slept')"], tmp_path)
    assert [o.get("ename") for o in nb.cells[0].outputs] == ["ValueError"]
    assert text(nb.cells[1]) == "slept\n"
    polls = [o for o in gc.get_objects() if type(o) is types.CoroutineType
             and o.cr_code.co_name == "_async_poll_kernel_alive" and o.cr_frame is not None]
    assert polls == []


def _children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_local_workers_share_the_machines_zygote_each_through_a_zygote_of_its_own(tmp_path):
    """``MachineZygote`` imports once for the machine; each ``Zygote`` made while it runs (as a local worker makes
    its own) is a connection to it, served by a zygote forked from it with everything imported, which ends when the
    connection closes. A connection without the token gets nothing."""
    import socket
    import time

    from course_tools.grading.zygote import MachineZygote

    folder = tmp_path / "machine"
    folder.mkdir(mode=0o700)
    with MachineZygote(["colorsys"], folder) as machine:
        first, second = Zygote(["colorsys"]), Zygote(["colorsys"])
        try:
            assert first.preload(["wave"]) == ["colorsys", "wave"]  # in its own zygote only
            assert second.preload([]) == ["colorsys"]
            assert first.protections == second.protections
            assert len(_children(machine._proc.pid)) == 2 and first._proc is None
            late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a token that comes late is still read
            late.connect(machine.path)
            time.sleep(0.5)
            late.sendall(machine._token.encode() + b"\n")
            late.settimeout(30)
            assert b'"protections"' in late.recv(4096)
            late.close()
            intruder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            intruder.connect(machine.path)
            intruder.sendall(b"not the token\n")
            intruder.settimeout(30)
            assert intruder.recv(100) == b""
            intruder.close()
        finally:
            first.close()
        deadline = time.monotonic() + 10
        while len(_children(machine._proc.pid)) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_children(machine._proc.pid)) == 1  # the closed connection's zygote is gone
        second.close()
    assert machine._proc.poll() is not None and not (folder / "zygote.sock").exists()
    assert "TORCHDOCTOR_ZYGOTE_SOCKET" not in os.environ
