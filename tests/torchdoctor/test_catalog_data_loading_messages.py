"""The data-loading messages of torch 2.14 that chapter 06 teaches, raised for real (in a subprocess where only a
separate process shows them) and recognised by ``explain``: a full /dev/shm, too many open files, a script
without a main guard under spawn, and what a pickling failure under spawn does on Linux."""

import errno
import functools
import multiprocessing.util
import os
import pickle
import resource
import shutil
import subprocess
import sys
import traceback

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from torchdoctor import explain
from torchdoctor.catalog import data_loading

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="these messages are Linux's (/dev/shm, fork, fds)")


def test_a_batch_bigger_than_dev_shm_fails_in_the_worker_and_leaves_an_empty_file(raised):
    size = data_loading._shm_size()
    if size is None:
        pytest.skip("/dev/shm is not a tmpfs with a size limit here")
    loader = DataLoader(data_loading._BiggerThanShmDataset(size), batch_size=2, num_workers=1)
    exc = raised(lambda: data_loading._first_batch(loader))
    message = str(exc)
    assert type(exc) is RuntimeError and message.startswith("Caught RuntimeError in DataLoader worker process 0.")
    assert "collate_tensor_fn" in message and "_new_shared" in message     # raised where the worker collates
    assert message.rstrip().endswith("No space left on device (28)")
    diagnosis = explain(exc)
    assert diagnosis.id == "shm-no-space", "must win over the generic worker-exception entry"
    worker_pid = data_loading.SHM_FILE.search(message).group(1).split("_")[1]
    assert f"Process {worker_pid}" in diagnosis.fix
    for text in (f"RuntimeError: {message}", "".join(traceback.format_exception(exc))):
        assert explain(text).id == "shm-no-space"
    # PyTorch leaves the file of the failed reservation in /dev/shm; it holds no memory
    assert data_loading.remove_leftover_shm_file(exc) == 0
    assert data_loading.remove_leftover_shm_file(exc) is None


SMALL_SHM_SCRIPT = """\
import os
import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.zeros(3, 224, 224)


if __name__ == "__main__":
    st = os.statvfs("/dev/shm")
    print("shm MiB", st.f_blocks * st.f_frsize // 2**20, flush=True)
    batches = iter(DataLoader(Images(), batch_size=64, num_workers=2))
    first = next(batches)                     # 36.75 MiB, kept while the loop goes on
    second = next(batches)
"""


def test_a_docker_sized_dev_shm_fails_the_second_batch_in_flight(tmp_path):
    """The realistic case: a 64 MiB /dev/shm (Docker's default) in a private mount namespace, ImageNet-sized
    float32 batches; no signal, an exception from the worker. Needs root and unshare."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a private 64 MiB tmpfs on /dev/shm")
    script = tmp_path / "small_shm.py"
    script.write_text(SMALL_SHM_SCRIPT)
    command = f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {sys.executable} {script}"
    out = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=300)
    if "shm MiB" not in out.stdout:
        pytest.skip(f"could not mount a private /dev/shm here: {out.stderr.strip()[-300:]}")
    assert out.stdout.split() == ["shm", "MiB", "64"]
    assert out.returncode == 1 and "Caught RuntimeError in DataLoader worker process" in out.stderr
    assert "bus error" not in out.stderr.lower()
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: unable to allocate shared memory(shm) for file </torch_"), last
    assert explain(last).id == explain(out.stderr).id == "shm-no-space"


def test_a_plain_errno_24_is_too_many_open_files_too(tmp_path, raised):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    opened = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 5, hard))
    try:
        exc = raised(lambda: [opened.append(open(tmp_path / f"{i}.txt", "w")) for i in range(100)])
    finally:
        for f in opened:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert type(exc) is OSError and exc.errno == errno.EMFILE
    assert explain(exc).id == "too-many-open-files"


def test_kept_worker_batches_run_out_of_file_descriptors_and_copies_do_not(raised):
    # On the loaded 2-core CI machine (make test), twice in three runs, PyTorch reported the worker killed by a
    # segmentation fault ("DataLoader worker (pid N) is killed by signal") before the main process raised; never
    # when run alone. The message must come within three tries; the others are shown if it does not.
    seen = []
    for _ in range(3):
        exc = raised(data_loading.too_many_open_files)
        if str(exc).startswith("Too many open files"):
            break
        seen.append(f"{type(exc).__name__}: {exc}")
    assert not seen or len(seen) < 3, seen
    assert type(exc) is RuntimeError and str(exc).startswith("Too many open files. Communication with the workers")
    assert explain(exc).id == "too-many-open-files"
    # the fix: keep copies, whose storage is ordinary memory, not the shared tensors. The worker gets the usual
    # limit back, as in the reproducer (with the lowered one it inherited, it aborted once under make test's load).
    # 100 descriptors to spare, not the reproducer's 40 (the 400 batches kept shared would need 400). The worker is
    # spawned, not forked: twice under make test (2026-12-02) a worker forked from this pytest process, which holds
    # what earlier tests left (threads, ZeroMQ sockets), aborted while collecting garbage it had inherited
    # ("Fatal Python error: Aborted ... Garbage-collecting"), whatever the descriptors to spare.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 100, hard))
    try:
        kept = [batch.clone() for batch in DataLoader(
            data_loading._SharedBatchesDataset(), batch_size=1, num_workers=1, multiprocessing_context="spawn",
            worker_init_fn=functools.partial(data_loading._worker_open_files_limit, soft))]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(kept) == len(data_loading._SharedBatchesDataset())


SCRIPT = """\
import torch
from torch.utils.data import DataLoader


def main():
    loader = DataLoader(list(range(8)), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    print("first batch:", next(iter(loader)).tolist())

{call}
"""


def test_a_script_without_main_guard_fails_under_spawn_and_the_guard_fixes_it(tmp_path):
    unguarded, guarded = tmp_path / "unguarded.py", tmp_path / "guarded.py"
    unguarded.write_text(SCRIPT.format(call="main()"))
    guarded.write_text(SCRIPT.format(call='if __name__ == "__main__":\n    main()'))
    runs = [subprocess.Popen([sys.executable, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in (unguarded, guarded)]
    (bad_out, bad_err), (good_out, good_err) = (run.communicate(timeout=300) for run in runs)
    assert runs[0].returncode == 1 and "bootstrapping phase" in bad_err
    assert bad_err.strip().splitlines()[-1].startswith("RuntimeError: DataLoader worker (pid(s) ")
    # pasted whole, the worker's message names the cause; the parent's last line alone is a dead worker
    assert explain(bad_err).id == "spawn-without-main-guard"
    assert explain(bad_err.strip().splitlines()[-1]).id == "worker-killed"
    assert runs[1].returncode == 0, good_err
    assert good_out.strip() == "first batch: [0, 1, 2, 3]"


class _LambdaDataset(Dataset):
    def __init__(self):
        self.transform = lambda x: x * 2

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.transform(torch.tensor(i))


def test_a_lambda_in_a_dataset_under_spawn_fails_in_the_parent_before_any_worker_starts(monkeypatch, raised):
    """On Linux (and macOS) spawn pickles the worker's arguments before it starts the worker, so no worker ever
    reads a half-written pickle: the 'EOFError: Ran out of input' of a worker happens only on Windows, which
    starts the worker first and then writes the pickle into its pipe."""
    started = []
    real_spawn = multiprocessing.util.spawnv_passfds
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", lambda *a: started.append(a) or real_spawn(*a))
    loader = DataLoader(_LambdaDataset(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
    with pytest.warns(UserWarning, match="Got pickle error"):
        exc = raised(lambda: data_loading._first_batch(loader))
    assert isinstance(exc, (AttributeError, pickle.PicklingError)) and "<lambda>" in str(exc)   # a local object
    assert explain(exc).id == "cant-pickle-local"
    assert [a for a in started if "spawn_main" in " ".join(map(str, a[1]))] == []


def test_the_reproducers_leave_no_state_behind():
    inheriting = getattr(multiprocessing.current_process(), "_inheriting", False)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    for reproducer in (data_loading.spawn_without_main_guard, data_loading.too_many_open_files):
        with pytest.raises(RuntimeError):
            reproducer()
    assert getattr(multiprocessing.current_process(), "_inheriting", False) == inheriting
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == limits
    assert torch.utils.data.get_worker_info() is None
