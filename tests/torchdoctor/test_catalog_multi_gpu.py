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
