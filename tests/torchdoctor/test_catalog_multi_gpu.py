"""The entries chapter 09 (multi-gpu) added: each is recognised from the real error and its pasted text, gives advice
that uses the numbers of the message, and leaves no process group or process behind. A hang (a collective one rank
never joins) is cut off by the group's timeout and reported, within seconds. (test_catalog.py already raises every
reproducer.)"""

import datetime
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torch.distributed as dist

from torchdoctor import explain
from torchdoctor.catalog import get_entry
from torchdoctor.catalog.multi_gpu import _single_process_group


def _raised(entry_id):
    with pytest.raises(Exception) as info:
        get_entry(entry_id).reproducer()
    assert not dist.is_initialized(), f"{entry_id}: the reproducer left a process group behind"
    return info.value


def test_env_rendezvous_names_the_missing_variable():
    diagnosis = explain(_raised("env-rendezvous-missing"))
    assert diagnosis.id == "env-rendezvous-missing"
    assert diagnosis.details["var"] == "RANK" and "torchrun" in diagnosis.fix


def test_port_in_use_names_the_port():
    err = _raised("port-in-use")
    assert type(err).__name__ == "DistNetworkError"
    diagnosis = explain(err)
    port = diagnosis.details["port"]
    assert f"Port {port} is taken" in diagnosis.fix and f"grep {port}" in diagnosis.fix
    assert explain(f"torch.distributed.DistNetworkError: {err}").id == "port-in-use"


def test_syncbatchnorm_on_cpu_both_messages():
    assert explain(_raised("syncbatchnorm-cpu")).id == "syncbatchnorm-cpu"
    bn = torch.nn.SyncBatchNorm(3)
    bn(torch.randn(4, 3))   # without a process group it falls back to plain batch norm
    with _single_process_group(), pytest.raises(ValueError) as info:
        bn(torch.randn(4, 3))   # with one, training mode on the CPU is refused
    assert explain(info.value).id == "syncbatchnorm-cpu"


def test_a_hang_is_cut_off_by_the_timeout_and_reported():
    started = time.monotonic()
    err = _raised("collective-timeout")
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"the 0.5 s timeout took {elapsed:.1f} s to fire"
    diagnosis = explain(err)
    assert diagnosis.id == "collective-timeout" and "500 ms" in diagnosis.fix


def test_monitored_barrier_names_the_missing_rank():
    diagnosis = explain(_raised("monitored-barrier-failed"))
    assert diagnosis.id == "monitored-barrier-failed"
    assert diagnosis.details == {"ranks": "1", "ms": "500"}
    # the message also quotes the timeout underneath: the barrier entry must win
    assert explain("RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms\n Original exception: "
                   "\n[../unbound_buffer.cc:78] Timed out waiting 2000ms for recv operation to complete").id == (
        "monitored-barrier-failed")
    assert explain("RuntimeError: Rank 1, 3 failed to pass monitoredBarrier in 30000 ms").details["ranks"] == "1, 3"


def test_spawn_wrapper_is_recognised_and_names_the_inner_error():
    err = _raised("spawn-process-raised")
    assert type(err).__name__ == "ProcessRaisedException"
    diagnosis = explain(err)
    assert diagnosis.id == "spawn-process-raised"
    assert "Process 0 raised RuntimeError" in diagnosis.fix
    # pasted as a notebook shows it (type and message), it is still the wrapper
    assert explain(f"ProcessRaisedException: {err}").id == "spawn-process-raised"
    # and the worker's own last line on its own is the worker's error
    assert explain("RuntimeError: [pair.cc:78] Timed out waiting 2000ms for recv operation to complete").id == (
        "collective-timeout")


_PEER = textwrap.dedent("""
    import datetime, sys, time
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=120))
    store.set("ready1", "1")
    dist.init_process_group("gloo", store=dist.PrefixStore("g", store), rank=1, world_size=2,
                            timeout=datetime.timedelta(seconds=2))
    time.sleep(60)   # never joins rank 0's all_reduce
""")


def test_a_hang_between_two_processes_is_cut_off_and_the_peer_ends():
    """The notebook's set-up: this process is rank 0, a second Python process is rank 1 and skips the all_reduce."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=120))
    peer = subprocess.Popen([sys.executable, "-c", _PEER, str(store.port)], start_new_session=True)
    try:
        store.wait(["ready1"])
        dist.init_process_group("gloo", store=dist.PrefixStore("g", store), rank=0, world_size=2,
                                timeout=datetime.timedelta(seconds=2))
        started = time.monotonic()
        with pytest.raises(RuntimeError) as info:
            dist.all_reduce(torch.ones(2))
        elapsed = time.monotonic() - started
    finally:
        peer.kill()
        peer.wait(timeout=30)
        if dist.is_initialized():
            dist.destroy_process_group()
    assert elapsed < 10, f"the 2 s timeout took {elapsed:.1f} s to fire"
    assert explain(info.value).id == "collective-timeout"
    assert peer.poll() is not None and not dist.is_initialized()


# What torch 2.14.1 raised on this machine for the reproducer of "peer-closed" (rank 1 had exited), and what it
# raised when a rank of a two-process torchrun job left before the other had finished connecting.
_GLOO_PEER_CLOSED = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
    "[127.0.0.1]:62654. This is typically caused by a remote worker crashing. Check the logs of the remote worker "
    "before reporting an error. GLHF! \U0001f3d6\ufe0f"
)
_GLOO_CONNECT_CLOSED = (
    "RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
    "pair.cc:561] Connection closed by peer [127.0.0.1]:11914. This is typically caused by a remote worker crashing."
)


def test_a_rank_that_exits_early_is_reported_as_peer_closed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    started = time.monotonic()
    err = _raised("peer-closed")
    assert time.monotonic() - started < 90
    assert type(err).__name__ == "RuntimeError" and "Connection closed by peer" in str(err)
    diagnosis = explain(err)
    assert diagnosis.id == "peer-closed" and diagnosis.details["peer"] == "127.0.0.1"
    assert f"127.0.0.1:{diagnosis.details['port']} closed its connection" in diagnosis.fix
    for text in (_GLOO_PEER_CLOSED, _GLOO_CONNECT_CLOSED):
        assert explain(text).id == "peer-closed", text
    # NCCL's word for the same situation (torch/csrc/distributed/c10d/NCCLUtils.cpp, getNcclErrorDetailStr)
    assert explain("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, remote process exited or "
                   "there was a network error, NCCL version 2.30.7\nncclRemoteError: A call failed possibly due to a "
                   "network error or a remote process exiting prematurely.").id == "peer-closed"
    # inside mp.spawn's wrapper the wrapper still wins (its fix says where to look)
    assert explain("ProcessRaisedException: \n\n-- Process 0 terminated with the following error:\nTraceback (most "
                   f"recent call last):\n  File \"hang.py\", line 3, in step\n{_GLOO_PEER_CLOSED}").id == (
        "spawn-process-raised")


# The NCCL message for two ranks on one GPU, as PyTorch raises it (torch.distributed.DistBackendError). PyTorch's
# part is C10D_NCCL_CHECK and getNcclErrorDetailStr (torch/csrc/distributed/c10d/NCCLUtils.hpp / .cpp): "NCCL error
# in: <file>:<line>, <ncclGetErrorString>, NCCL version <v>", the ncclInvalidUsage line, then "Last error:" and
# NCCL's last WARN. NCCL's part comes from initTransportsRank in src/init.cc: up to NCCL 2.27 (bundled with
# torch <= 2.9) it was "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx"; NCCL 2.30.7 (bundled
# with torch 2.14.1, checked below) says "Multiple Ranks are using the same GPU/Partition ...".
_NCCL_OLD = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
    "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3\nncclInvalidUsage: This usually "
    "reflects invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA "
    "device 1000"
)
_NCCL_2_30 = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
    "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.30.7\nncclInvalidUsage: This usually "
    "reflects invalid usage of NCCL library.\nLast error:\nMultiple Ranks are using the same GPU/Partition. Set "
    "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration."
)


def test_two_ranks_on_one_gpu_both_wordings():
    old = explain(_NCCL_OLD)
    assert old.id == "ranks-share-gpu"
    assert old.details == {"rank": "1", "other": "0", "bus": "1000"}
    assert "Ranks 1 and 0 both use the GPU at bus id 1000" in old.fix and "set_device" in old.fix
    new = explain(_NCCL_2_30)
    assert new.id == "ranks-share-gpu" and "torch.cuda.set_device(local_rank)" in new.fix
    # a worker's traceback line on its own, as a log shows it
    assert explain("Duplicate GPU detected : rank 3 and rank 2 both on CUDA device e2000").details["bus"] == "e2000"


def test_the_pinned_nccl_uses_the_new_wording():
    """The wording the catalog quotes for torch 2.14.1 is the one in the NCCL library it ships."""
    import importlib.util
    import mmap
    from pathlib import Path

    spec = importlib.util.find_spec("nvidia.nccl") if importlib.util.find_spec("nvidia") else None
    libs = [Path(p) / "lib" / "libnccl.so.2" for p in (spec.submodule_search_locations if spec else [])]
    libs = [p for p in libs if p.exists()]
    if not libs:
        pytest.skip("this PyTorch was installed without the nvidia-nccl package")
    with open(libs[0], "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as lib:
        assert lib.find(b"Multiple Ranks are using the same GPU/Partition") >= 0
        assert lib.find(b"Duplicate GPU detected") < 0
    assert torch.cuda.nccl.version() >= (2, 28) if torch.cuda.is_available() else True


@pytest.mark.cuda
def test_two_ranks_on_one_gpu_live():
    err = _raised("ranks-share-gpu")
    assert type(err).__name__ == "DistBackendError"
    assert explain(err).id == "ranks-share-gpu"


def test_the_spawn_reproducer_leaves_no_error_file(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _raised("spawn-process-raised")
    assert list(tmp_path.iterdir()) == []
