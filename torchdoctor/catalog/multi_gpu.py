"""Chapter 09 (multi-gpu): torch.distributed, DDP and DataParallel.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "multi-gpu"


@contextmanager
def _single_process_group() -> Iterator[None]:
    """A one-process gloo group in memory, so DDP errors can be shown without launching anything."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def ddp_without_process_group() -> None:
    nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


DDP_NO_PROCESS_GROUP = ErrorEntry(
    id="ddp-no-process-group",
    title="Distributed call without a process group",
    chapter=CHAPTER,
    exception_types=("ValueError", "RuntimeError"),
    pattern=r"Default process group has not been initialized",
    example="Default process group has not been initialized, please make sure to call init_process_group.",
    cause="DistributedDataParallel and torch.distributed calls need torch.distributed.init_process_group() "
    "first, in every process; usually the script was started with python instead of torchrun.",
    fix="Launch with torchrun --nproc_per_node=N script.py and call dist.init_process_group(backend) "
    "('nccl' on GPUs, 'gloo' on CPU) before wrapping the model.",
    reproducer=ddp_without_process_group,
)


def ddp_device_ids_cpu() -> None:
    with _single_process_group():
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])


DDP_DEVICE_IDS_CPU = ErrorEntry(
    id="ddp-device-ids-cpu",
    title="DDP device_ids given for a CPU module",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"DistributedDataParallel device_ids and output_device arguments only work with "
    r"single-device/multiple-device GPU modules or CPU modules",
    example="DistributedDataParallel device_ids and output_device arguments only work with "
    "single-device/multiple-device GPU modules or CPU modules, but got device_ids [0], output_device None, "
    "and module parameters {device(type='cpu')}.",
    cause="device_ids tells DDP which GPU a single-device module lives on. The module is still on the CPU "
    "(it was never moved, or this is a CPU run), so device_ids makes no sense.",
    fix="On GPUs: model.to(f'cuda:{local_rank}') before DDP(model, device_ids=[local_rank]). On CPU: "
    "DDP(model) without device_ids.",
    reproducer=ddp_device_ids_cpu,
)


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(2, 2)
        self.unused = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def ddp_unused_parameters() -> None:
    with _single_process_group():
        model = nn.parallel.DistributedDataParallel(_TwoHeads())
        for _ in range(2):
            model(torch.ones(1, 2)).sum().backward()


def _ddp_unused(g: Mapping[str, str]) -> str:
    return (
        f"Parameters {g['indices'].strip()} (by position in model.parameters()) got no gradient. Remove the unused "
        f"layers, make every output take part in the loss, or pass find_unused_parameters=True to "
        f"DistributedDataParallel (it costs an extra pass over the graph)."
    )


DDP_UNUSED_PARAMETERS = ErrorEntry(
    id="ddp-unused-parameters",
    title="DDP: parameters that received no gradient",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected to have finished reduction in the prior iteration before starting a new one"
    r"(?:.*Parameter indices which did not receive grad for rank \d+: (?P<indices>[\d ]+))?",
    example="Expected to have finished reduction in the prior iteration before starting a new one. This error "
    "indicates that your module has parameters that were not used in producing loss.",
    cause="DDP waits for a gradient of every parameter; some parameters took no part in the loss (an unused "
    "layer or head, a branch skipped this step), so the previous reduction never finished.",
    fix="Remove unused parameters, make every output contribute to the loss, or pass "
    "find_unused_parameters=True to DistributedDataParallel.",
    reproducer=ddp_unused_parameters,
    specific_fix=_ddp_unused,
)


def process_group_twice() -> None:
    import torch.distributed as dist

    with _single_process_group():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


PROCESS_GROUP_TWICE = ErrorEntry(
    id="process-group-twice",
    title="Process group initialised twice",
    chapter=CHAPTER,
    exception_types=("ValueError", "RuntimeError"),
    pattern=r"trying to initialize the default process group twice",
    example="trying to initialize the default process group twice!",
    cause="init_process_group() ran again in a process that already has a group, e.g. a notebook cell run "
    "twice or a helper that initialises on every call.",
    fix="Guard it: if not dist.is_initialized(): dist.init_process_group(...); call "
    "dist.destroy_process_group() when done.",
    reproducer=process_group_twice,
)


def dataparallel_wrong_device() -> None:
    # A layer replaced after wrapping stays on the CPU. The classic "wrapped before .to('cuda')" raises this only
    # with two or more GPUs: with one, DataParallel.__init__ moves the module to device_ids[0] itself.
    dp = nn.DataParallel(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)).to("cuda:0"))
    dp.module[1] = nn.Linear(2, 2)
    dp(torch.ones(1, 2, device="cuda:0"))


DATAPARALLEL_WRONG_DEVICE = ErrorEntry(
    id="dataparallel-wrong-device",
    title="DataParallel module not on the first GPU",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"module must have its parameters and buffers on device (?P<expected>\S+) \(device_ids\[0\]\) but "
    r"found one of them on device: (?P<got>\S+)",
    example="module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of "
    "them on device: cpu",
    cause="nn.DataParallel copies the module from device_ids[0] to the other GPUs on every forward pass, and part "
    "of it is elsewhere: with two or more GPUs the model was not moved before wrapping (with a single GPU "
    "DataParallel moves it itself when it is created), or a layer was added or replaced after wrapping.",
    fix="model.to('cuda:0') before nn.DataParallel(model), and change the model before wrapping it (or move the "
    "new layer too); better, use DistributedDataParallel with one process per GPU.",
    reproducer=dataparallel_wrong_device,
    needs="cuda",
)


def env_rendezvous_missing() -> None:
    import torch.distributed as dist

    saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k in os.environ}
    try:
        dist.init_process_group("gloo")
    finally:
        os.environ.update(saved)


def _env_missing(g: Mapping[str, str]) -> str:
    return (
        f"{g['var']} is not set, so this process was not started by torchrun (which sets RANK, WORLD_SIZE, "
        f"LOCAL_RANK, MASTER_ADDR and MASTER_PORT for every worker). Launch with torchrun --nproc-per-node=N "
        f"script.py; for a one-process group in a notebook set the variables yourself or pass init_method / store."
    )


ENV_RENDEZVOUS_MISSING = ErrorEntry(
    id="env-rendezvous-missing",
    title="init_process_group without torchrun's environment variables",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"Error initializing torch\.distributed using env:// rendezvous: environment variable (?P<var>\w+) "
    r"expected, but not set",
    example="Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, "
    "but not set",
    cause="init_process_group() without init_method reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the "
    "environment (env://). torchrun sets them for each worker; a script started with plain python has none.",
    fix="Start the script with torchrun --nproc-per-node=N script.py, or pass rank, world_size and an "
    "init_method (tcp://host:port) or a store explicitly.",
    reproducer=env_rendezvous_missing,
    specific_fix=_env_missing,
)


def port_in_use() -> None:
    import torch.distributed as dist

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        dist.TCPStore("127.0.0.1", port, world_size=1, is_master=True, timeout=datetime.timedelta(seconds=5))


def _port_in_use(g: Mapping[str, str]) -> str:
    return (
        f"Port {g['port']} is taken, usually by an earlier run that is still alive (or hung) or by a second job "
        f"on the same machine. Find it (ss -ltnp | grep {g['port']}) and end it, or pick a free port: "
        f"torchrun --standalone, or --master-port with another number."
    )


PORT_IN_USE = ErrorEntry(
    id="port-in-use",
    title="Rendezvous port already in use",
    chapter=CHAPTER,
    exception_types=("DistNetworkError", "RuntimeError"),
    pattern=r"The server socket has failed to (?:listen on any local network address|bind)"
    r"(?:.*?port: (?P<port>\d+))?.*?(?:EADDRINUSE|address already in use)",
    example="The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, "
    "code: -98, name: EADDRINUSE, message: address already in use",
    cause="Rank 0 starts the rendezvous server (a TCPStore) on MASTER_PORT, and another process is already "
    "listening there: a previous run that did not end, or another job using the default port 29500.",
    fix="End the old run, or choose a free port: torchrun --standalone picks one, or pass --master-port / "
    "MASTER_PORT with another number.",
    reproducer=port_in_use,
    specific_fix=_port_in_use,
)


def syncbatchnorm_cpu() -> None:
    model = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)))
    with _single_process_group():
        nn.parallel.DistributedDataParallel(model)


SYNCBATCHNORM_CPU = ErrorEntry(
    id="syncbatchnorm-cpu",
    title="SyncBatchNorm on the CPU",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"SyncBatchNorm layers only work with GPU modules|SyncBatchNorm expected input tensor to be on GPU",
    example="SyncBatchNorm layers only work with GPU modules",
    cause="SyncBatchNorm computes batch statistics across processes with GPU collectives; PyTorch implements it "
    "for CUDA (and XPU / privateuse1 devices) only, so DDP refuses a CPU module that contains it, and its "
    "forward pass refuses CPU input in training mode.",
    fix="Convert with nn.SyncBatchNorm.convert_sync_batchnorm(model) only for GPU runs, after model.to(device) "
    "and before DDP(model, device_ids=[local_rank]); on the CPU keep BatchNorm (statistics per process) or use "
    "GroupNorm / LayerNorm, which need no batch statistics.",
    reproducer=syncbatchnorm_cpu,
)


@contextmanager
def _two_gloo_ranks(timeout_s: float) -> Iterator[tuple[object, object]]:
    """Two gloo process groups (ranks 0 and 1) in this process, joined through an in-memory store. They are not
    the default group, so they can show a hang without launching anything; each call's collectives give up
    after ``timeout_s``."""
    import torch.distributed as dist

    store = dist.PrefixStore(f"torchdoctor-{threading.get_ident()}", dist.HashStore())
    groups: dict[int, object] = {}

    def join(rank: int) -> None:
        groups[rank] = dist.ProcessGroupGloo(store, rank, 2, datetime.timedelta(seconds=timeout_s))

    peer = threading.Thread(target=join, args=(1,))
    peer.start()
    join(0)
    peer.join()
    try:
        yield groups[0], groups[1]
    finally:
        groups.clear()


def collective_timeout() -> None:
    with _two_gloo_ranks(0.5) as (rank0, _rank1):
        rank0.allreduce([torch.ones(2)]).wait()  # rank 1 never joins this all-reduce


def monitored_barrier_failed() -> None:
    with _two_gloo_ranks(0.5) as (rank0, _rank1):
        rank0.monitored_barrier(datetime.timedelta(seconds=0.5))  # rank 1 never reaches the barrier


def _barrier(g: Mapping[str, str]) -> str:
    return (
        f"Rank(s) {g['ranks']} did not reach the barrier within {g['ms']} ms; the ranks that did are fine. Look at "
        f"what rank(s) {g['ranks']} were doing: a collective the others skipped (an all_reduce under "
        f"`if rank == 0`), fewer batches on that rank, an exception or a slow step there."
    )


MONITORED_BARRIER_FAILED = ErrorEntry(
    id="monitored-barrier-failed",
    title="A rank did not reach a monitored barrier",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Rank (?P<ranks>\d+(?:, \d+)*) failed to pass monitoredBarrier in (?P<ms>\d+) ms",
    example="[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms",
    cause="dist.monitored_barrier() (gloo) waits for every rank and, after its timeout, names the ranks that "
    "never arrived: those are stuck elsewhere or take another path through the code.",
    fix="Find what the named rank does instead: a collective only some ranks call, a different number of "
    "batches per rank (DistributedSampler with drop_last, uneven data), or an exception on that rank. Every rank "
    "must call the same collectives in the same order.",
    reproducer=monitored_barrier_failed,
    specific_fix=_barrier,
)


def _timeout(g: Mapping[str, str]) -> str:
    return (
        f"This rank waited {g['ms']} ms for a peer in a collective that never came. Every rank must call the "
        f"same collectives in the same order: look for an all_reduce / barrier under `if rank == 0`, uneven "
        f"batch counts, or a rank that crashed. Put dist.monitored_barrier() (gloo) before the suspect spot to "
        f"learn which rank is missing."
    )


COLLECTIVE_TIMEOUT = ErrorEntry(
    id="collective-timeout",
    title="A collective timed out (mismatched collectives, a hang)",
    chapter=CHAPTER,
    exception_types=("RuntimeError", "DistBackendError"),
    pattern=r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation to complete"
    r"|Watchdog caught collective operation timeout",
    example="[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 2000ms for recv "
    "operation to complete",
    cause="This rank entered a collective (all_reduce, broadcast, barrier, DDP's gradient all-reduce) and a "
    "peer never joined it within the process group's timeout: the ranks run different collectives, or one "
    "is stuck or dead. Without a timeout of your own the default applies (torch.distributed.constants: 30 minutes "
    "for gloo, 10 for NCCL), and until then the job just stops making progress.",
    fix="Make every rank call the same collectives in the same order (no collectives inside `if rank == 0`); "
    "set init_process_group(timeout=...) so a hang fails instead of blocking, and use dist.monitored_barrier() "
    "(gloo) to find the missing rank.",
    reproducer=collective_timeout,
    specific_fix=_timeout,
)


# Rank 1 of the reproducer below: it joins the group and exits at once, as a crashed or finished rank does.
_EXITING_PEER = """
import datetime, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=120))
group = dist.ProcessGroupGloo(dist.PrefixStore("peer", store), 1, 2, datetime.timedelta(seconds=60))
"""


def peer_closed_connection() -> None:
    """This process is rank 0 of a two-process gloo group; rank 1 is a second Python process that exits right
    after joining. Rank 0's next collective finds the connection closed."""
    import subprocess
    import sys

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=120))
    peer = subprocess.Popen([sys.executable, "-c", _EXITING_PEER, str(store.port)],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True)
    group = None
    try:
        group = dist.ProcessGroupGloo(dist.PrefixStore("peer", store), 0, 2, datetime.timedelta(seconds=60))
        peer.wait(timeout=120)  # rank 1 is gone
        group.allreduce([torch.ones(2)]).wait()
    finally:
        del group  # the group goes now, not when the exception's traceback is freed
        peer.kill()
        peer.wait()


def _peer_closed(g: Mapping[str, str]) -> str:
    return (
        f"The rank at {g['peer']}:{g['port']} closed its connection: its process ended (an exception, a kill, or "
        f"it finished its loop while this rank still calls collectives). This error is only the consequence: read "
        f"the other rank's log (torchrun reports the first failure as the root cause) and fix that rank."
    )


PEER_CLOSED = ErrorEntry(
    id="peer-closed",
    title="The other rank is gone (connection closed by peer)",
    chapter=CHAPTER,
    exception_types=("RuntimeError", "DistBackendError"),
    pattern=r"Connection closed by peer(?: \[(?P<peer>[^\]]+)\]:(?P<port>\d+))?"
    r"|ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely",
    example="[../third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:62654. "
    "This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting "
    "an error. GLHF!",
    cause="A collective (or gloo's connection set-up in init_process_group) found the socket to another rank "
    "closed: that rank's process has ended. It crashed or raised, was killed (out of memory, a scheduler), or "
    "finished early, e.g. it ran fewer batches and left while this rank still calls collectives. NCCL reports the "
    "same situation as ncclRemoteError.",
    fix="Look at the other ranks' logs, not at this one: torchrun names the first failed rank as the root cause, "
    "mp.spawn re-raises its traceback. If a rank simply finished early, make every rank run the same number of "
    "steps and collectives (DistributedSampler pads to equal shards unless drop_last), and end with "
    "dist.barrier() before dist.destroy_process_group().",
    reproducer=peer_closed_connection,
    specific_fix=_peer_closed,
)


# Rank 1 of the reproducer below: a worker that never calls torch.cuda.set_device, so it runs on cuda:0.
_SAME_GPU_PEER = """
import datetime, sys
import torch, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=120))
dist.init_process_group("nccl", store=dist.PrefixStore("gpu", store), rank=1, world_size=2,
                        timeout=datetime.timedelta(seconds=60))
try:
    dist.all_reduce(torch.ones(1, device="cuda"))
finally:
    dist.destroy_process_group()
"""


def ranks_share_gpu() -> None:
    """Two NCCL ranks on one GPU: this process is rank 0 and a second Python process rank 1, and neither calls
    torch.cuda.set_device(local_rank), so both put their tensors on cuda:0 (one GPU is enough to show it)."""
    import subprocess
    import sys

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=120))
    peer = subprocess.Popen([sys.executable, "-c", _SAME_GPU_PEER, str(store.port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        dist.init_process_group("nccl", store=dist.PrefixStore("gpu", store), rank=0, world_size=2,
                                timeout=datetime.timedelta(seconds=60))
        dist.all_reduce(torch.ones(1, device="cuda"))  # NCCL sets up its communicator here, and refuses
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        peer.kill()
        peer.wait()


def _ranks_share_gpu(g: Mapping[str, str]) -> str:
    return (
        f"Ranks {g['rank']} and {g['other']} both use the GPU at bus id {g['bus']}: each process must pick its own "
        f"GPU with torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before it creates CUDA tensors or the "
        f"model, and start at most one process per GPU."
    )


RANKS_SHARE_GPU = ErrorEntry(
    id="ranks-share-gpu",
    title="Two NCCL ranks on the same GPU",
    chapter=CHAPTER,
    exception_types=("DistBackendError", "RuntimeError"),
    # NCCL up to 2.27 (torch <= 2.9) said "Duplicate GPU detected"; NCCL 2.30.7, which torch 2.14.1 ships, says
    # "Multiple Ranks are using the same GPU/Partition" (tests/torchdoctor/test_catalog_multi_gpu.py).
    pattern=r"Duplicate GPU detected : rank (?P<rank>\d+) and rank (?P<other>\d+) both on CUDA device "
    r"(?P<bus>[0-9a-fA-F]+)|Multiple Ranks are using the same GPU/Partition",
    example="NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, invalid usage (run with "
    "NCCL_DEBUG=WARN for details), NCCL version 2.30.7\nncclInvalidUsage: This usually reflects invalid usage of "
    "NCCL library.\nLast error:\nMultiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 "
    "to enable this configuration.",
    cause="Two ranks of one NCCL group run on the same GPU. Usually no process called "
    "torch.cuda.set_device(local_rank), so every rank's device='cuda' tensors (and the model) landed on cuda:0; or "
    "more processes were started than there are GPUs (--nproc-per-node above the GPU count, CUDA_VISIBLE_DEVICES "
    "showing fewer).",
    fix="In every worker, first: local_rank = int(os.environ['LOCAL_RANK']); torch.cuda.set_device(local_rank); "
    "then model.to(local_rank), DDP(model, device_ids=[local_rank]), and optionally "
    "init_process_group('nccl', device_id=torch.device('cuda', local_rank)). Start one process per GPU. (NCCL's own "
    "hint, NCCL_MULTI_RANK_GPU_ENABLE=1, lets ranks share a GPU, which a training job almost never wants.)",
    reproducer=ranks_share_gpu,
    needs="cuda",
    specific_fix=_ranks_share_gpu,
)


def _raise_in_child(rank: int) -> None:
    raise RuntimeError(f"rank {rank}: something went wrong in the worker")


def spawn_process_raised() -> None:
    import torch.multiprocessing as mp

    # fork, so the reproducer does not pay for a new interpreter; mp.spawn (start method spawn) wraps the same way
    context = mp.start_processes(_raise_in_child, nprocs=1, join=False, start_method="fork")
    try:
        while not context.join():
            pass
    finally:
        for path in context.error_files:  # the worker's pickled error: torch leaves it in the temporary folder
            with suppress(FileNotFoundError):
                os.remove(path)


def _spawned(g: Mapping[str, str]) -> str:
    inner = f" raised {g['inner']}" if g.get("inner") else " failed"
    return (
        f"Process {g['process']}{inner}; its traceback is in the message, below '-- Process {g['process']} "
        f"terminated'. Read its last line (paste it into torchdoctor.explain) and fix it there; the other "
        f"processes were ended by torch.multiprocessing."
    )


SPAWN_PROCESS_RAISED = ErrorEntry(
    id="spawn-process-raised",
    title="A process started by torch.multiprocessing.spawn raised",
    chapter=CHAPTER,
    exception_types=("ProcessRaisedException",),
    pattern=r"-- Process (?P<process>\d+) terminated with the following error:"
    r"(?:.*\n(?P<inner>[A-Za-z_][\w.]*(?:Error|Exception)): )?",
    example="\n\n-- Process 0 terminated with the following error:\nTraceback (most recent call last):\n"
    '  File "train.py", line 12, in worker\nRuntimeError: Timed out waiting 2000ms for recv operation to complete',
    cause="A worker of torch.multiprocessing.spawn (mp.spawn) raised; spawn ends the other workers and re-raises "
    "in the parent with the worker's traceback pasted into the message.",
    fix="Read the traceback under '-- Process N terminated': its last line is the real error (explain it on its "
    "own). To debug, run the worker function in the parent (a one-process group) or with one process.",
    reproducer=spawn_process_raised,
    quotes_other_errors=True,
    specific_fix=_spawned,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    DDP_NO_PROCESS_GROUP,
    DDP_DEVICE_IDS_CPU,
    DDP_UNUSED_PARAMETERS,
    PROCESS_GROUP_TWICE,
    DATAPARALLEL_WRONG_DEVICE,
    ENV_RENDEZVOUS_MISSING,
    PORT_IN_USE,
    SYNCBATCHNORM_CPU,
    MONITORED_BARRIER_FAILED,
    COLLECTIVE_TIMEOUT,
    PEER_CLOSED,
    RANKS_SHARE_GPU,
    SPAWN_PROCESS_RAISED,
)
