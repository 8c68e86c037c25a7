"""Chapter 05 (checkpoints): saving and loading.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import types
from collections.abc import Mapping

import torch
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "checkpoints"


class TinyNet(nn.Module):
    """A model class defined at module level, so that whole-model pickles can refer to it."""

    def __init__(self, out_features: int = 10) -> None:
        super().__init__()
        self.fc = nn.Linear(20, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class GrownNet(nn.Module):
    """TinyNet with an extra layer: the shape a model takes after someone edits it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(20, 10)
        self.head = nn.Linear(10, 2)


def state_dict_keys() -> None:
    GrownNet().load_state_dict(TinyNet().state_dict())


def _state_dict_keys(g: Mapping[str, str]) -> str:
    # "Missing" lists the model's names, "Unexpected" the checkpoint's: which side has the prefix decides the fix.
    missing, _, unexpected = g["keys"].partition("Unexpected key(s) in state_dict:")
    if '"module.' in unexpected and '"module.' not in missing:
        return (
            "The checkpoint's keys start with 'module.': it was saved from a DataParallel/DDP wrapper. Save "
            "model.module.state_dict(), or strip the prefix when loading: "
            "{k.removeprefix('module.'): v for k, v in state.items()}."
        )
    if '"module.' in missing and unexpected.strip() and '"module.' not in unexpected:
        return (
            "The model's keys start with 'module.' and the checkpoint's do not: the model is wrapped in "
            "DataParallel/DDP and the checkpoint is not. Load into the model inside the wrapper: "
            "model.module.load_state_dict(state)."
        )
    return (
        "The checkpoint and the model have different layers. Load with result = model.load_state_dict(sd, "
        "strict=False), read result.missing_keys and result.unexpected_keys, and initialise the new layers "
        "yourself; never ignore that report."
    )


STATE_DICT_KEYS = ErrorEntry(
    id="state-dict-keys",
    title="Missing or unexpected keys in state_dict",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Error\(s\) in loading state_dict for \w+:\s+(?P<keys>(?:Missing|Unexpected) key\(s\) in "
    r"state_dict:.*)",
    example='Error(s) in loading state_dict for GrownNet:\n\tMissing key(s) in state_dict: "head.weight", '
    '"head.bias". ',
    cause="The checkpoint's parameter names differ from the model's: layers were added, removed or renamed, "
    "or the checkpoint came from a DataParallel/DDP wrapper (keys start with 'module.').",
    fix="Build the model the checkpoint was saved from, strip a 'module.' prefix, or load with strict=False "
    "and read the returned missing_keys / unexpected_keys before initialising new layers yourself.",
    reproducer=state_dict_keys,
    specific_fix=_state_dict_keys,
)


def state_dict_size_mismatch() -> None:
    TinyNet(out_features=5).load_state_dict(TinyNet().state_dict())


def _size_mismatch(g: Mapping[str, str]) -> str:
    return (
        f"{g['name']} is {g['saved']} in the checkpoint but {g['current']} in the model: a layer changed size "
        f"since saving. Build the model with the saved sizes, or drop the mismatched entries from the "
        f"state_dict, load with strict=False and initialise those layers yourself."
    )


STATE_DICT_SIZE_MISMATCH = ErrorEntry(
    id="state-dict-size-mismatch",
    title="Parameter shape differs between checkpoint and model",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"size mismatch for (?P<name>[\w.]+): copying a param with shape (?P<saved>torch\.Size\(\[[\d, ]*\]\))"
    r" from checkpoint, the shape in current model is (?P<current>torch\.Size\(\[[\d, ]*\]\))",
    example="Error(s) in loading state_dict for TinyNet:\n\tsize mismatch for fc.weight: copying a param with "
    "shape torch.Size([10, 20]) from checkpoint, the shape in current model is torch.Size([5, 20]).",
    cause="A layer exists in both but with different sizes (for example a new number of classes). "
    "strict=False does not help: it only forgives missing and unexpected keys.",
    fix="Build the model with the saved sizes, or remove the mismatched entries from the state_dict, load "
    "with strict=False and initialise those layers yourself.",
    reproducer=state_dict_size_mismatch,
    specific_fix=_size_mismatch,
)


# Defined before WEIGHTS_ONLY_LOAD (and listed before it): its message starts with "Weights only load failed"
# too, and the first entry that matches wins.
def not_a_checkpoint() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.pt")
        with open(path, "w") as file:  # what a failed download often saves: the server's error page
            file.write("<!DOCTYPE html><html><body>404 Not Found</body></html>")
        torch.load(path)


def _not_a_checkpoint(g: Mapping[str, str]) -> str:
    first = g["first"][1:-1] if g["first"].startswith("'") else chr(int(g["first"]))
    hint = " ('<' is how an HTML page starts: a download that saved an error page)" if first == "<" else ""
    return (
        f"The file starts with {first!r}{hint}, not with a PyTorch zip archive or a pickle. Look at its first "
        "bytes (open(path, 'rb').read(100)) and download or save it again; weights_only=False will not help."
    )


NOT_A_CHECKPOINT = ErrorEntry(
    id="not-a-checkpoint",
    title="The file is not a checkpoint at all",
    chapter=CHAPTER,
    exception_types=("UnpicklingError",),
    pattern=r"(?:WeightsUnpickler error:\s*Unsupported operand |invalid load key, )(?P<first>\d+|'[^']*')",
    example="Weights only load failed. In PyTorch 2.6, we changed the default value of the `weights_only` argument "
    "in `torch.load` from `False` to `True`. ... WeightsUnpickler error: \n\nUnsupported operand 60",
    cause="torch.load found neither a zip archive (what torch.save writes) nor a pickle: the file is something "
    "else, typically an HTML error page saved by a failed download, or a text file. With weights_only=True the "
    "message starts like a weights_only refusal, but the cause is the file, and weights_only=False only changes "
    "it to 'invalid load key'.",
    fix="Look at the file's first bytes (open(path, 'rb').read(100)); fetch or save it again, and check its size "
    "and checksum against the original.",
    reproducer=not_a_checkpoint,
    specific_fix=_not_a_checkpoint,
)


def weights_only_load() -> None:
    buffer = io.BytesIO()
    torch.save(TinyNet(), buffer)  # the whole pickled module, not its state_dict
    buffer.seek(0)
    torch.load(buffer)


WEIGHTS_ONLY_LOAD = ErrorEntry(
    id="weights-only-load",
    title="torch.load refused a pickled object (weights_only)",
    chapter=CHAPTER,
    exception_types=("UnpicklingError",),
    pattern=r"Weights only load failed",
    example="Weights only load failed. This file can still be loaded, to do so you have two options ... "
    "WeightsUnpickler error: Unsupported global: GLOBAL torchdoctor.catalog.checkpoints.TinyNet was not an allowed "
    "global by default.",
    cause="Since PyTorch 2.6 torch.load defaults to weights_only=True and only unpickles tensors and plain "
    "containers. The file holds other objects: a whole pickled model (torch.save(model)), or custom "
    "classes in the saved dict.",
    fix="Save and load state_dicts (torch.save(model.state_dict(), p); model.load_state_dict(torch.load(p))). "
    "For trusted files with a few extra classes use torch.serialization.add_safe_globals([...]); "
    "weights_only=False only for files you fully trust, since it can run arbitrary code.",
    reproducer=weights_only_load,
)


def missing_class_on_load() -> None:
    module = types.ModuleType("torchdoctor_scratch_models")
    module.OldNet = type("OldNet", (nn.Linear,), {"__module__": module.__name__})
    sys.modules[module.__name__] = module
    buffer = io.BytesIO()
    try:
        torch.save(module.OldNet(2, 2), buffer)
        del module.OldNet  # the class is gone when the file is read, as in a fresh session
        buffer.seek(0)
        torch.load(buffer, weights_only=False)
    finally:
        del sys.modules[module.__name__]


MISSING_CLASS_ON_LOAD = ErrorEntry(
    id="missing-class-on-load",
    title="Class not found while unpickling",
    chapter=CHAPTER,
    exception_types=("AttributeError",),
    pattern=r"Can't get attribute '(?P<name>[^']+)' on <module '(?P<module>[^']+)'",
    example="Can't get attribute 'OldNet' on <module '__main__' (built-in)>",
    cause="A pickle stores classes by module and name; the file was saved with torch.save(model) (or is "
    "sent to a spawned DataLoader worker) and that class is not importable where it is loaded, e.g. it "
    "was defined in a notebook.",
    fix="Save state_dicts instead of whole models, and put classes that must be pickled in an importable "
    ".py module rather than the notebook.",
    reproducer=missing_class_on_load,
)


def ran_out_of_input() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "empty.pt")
        open(path, "wb").close()
        torch.load(path)


RAN_OUT_OF_INPUT = ErrorEntry(
    id="ran-out-of-input",
    title="Empty checkpoint or pickle file",
    chapter=CHAPTER,
    exception_types=("EOFError",),
    pattern=r"^(?:Ran out of input)?$",
    example="Ran out of input",
    cause="The file ended before anything could be read: it is empty (a save that was interrupted, a zero-byte "
    "download, a file opened for writing and never written). torch.load raises an EOFError with no message "
    "for it (weights_only=True, the default); pickle.load and torch.load(weights_only=False) say 'Ran out of "
    "input'.",
    fix="Check os.path.getsize(path); re-create the file and write it atomically (save to a temporary name, "
    "then os.replace).",
    reproducer=ran_out_of_input,
)


def corrupted_checkpoint() -> None:
    buffer = io.BytesIO()
    torch.save(TinyNet().state_dict(), buffer)
    torch.load(io.BytesIO(buffer.getvalue()[:200]))  # a truncated download or copy


CORRUPTED_CHECKPOINT = ErrorEntry(
    id="corrupted-checkpoint",
    title="Checkpoint archive is corrupted or truncated",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"PytorchStreamReader failed (?:reading zip archive|locating file \S+: file not found)",
    example="PytorchStreamReader failed reading zip archive: failed finding central directory. This is an internal "
    "miniz error. If you are seeing this error, there is a high likelihood that your checkpoint file is corrupted.",
    cause="A torch.save file is a zip archive whose table of contents (the central directory) sits at its end; "
    "this one is incomplete (an interrupted save or copy, a full disk), so that table is missing or damaged, or "
    "it lacks the records it should hold (data.pkl: a save that stopped halfway).",
    fix="Compare the file size with the original, re-download or re-save it; save to a temporary name and "
    "os.replace it so a crash never leaves half a file.",
    reproducer=corrupted_checkpoint,
)


def cuda_checkpoint_on_cpu() -> None:
    buffer = io.BytesIO()
    torch.save(TinyNet().state_dict(), buffer)
    buffer.seek(0)
    # A file saved on a GPU records "cuda:0" for each tensor and torch.load restores it there; asking for
    # "cuda" takes the same path, on a machine without a GPU.
    torch.load(buffer, map_location="cuda")


def _cuda_checkpoint_on_cpu(g: Mapping[str, str]) -> str:
    # Only the message that names a device index has numbers; the no-GPU message gets the general fix.
    return (
        f"The checkpoint's tensors were saved on cuda:{g['index']}, and this machine has {g['count']} GPU(s). "
        "Load with map_location='cuda:0' (or map_location={'cuda:" + g["index"] + "': 'cuda:0'})."
    )


CUDA_CHECKPOINT_ON_CPU = ErrorEntry(
    id="cuda-checkpoint-on-cpu",
    title="GPU checkpoint loaded on a machine without that GPU",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Attempting to deserialize object on (?:a CUDA device but torch\.cuda\.is_available\(\) is False|"
    r"CUDA device (?P<index>\d+) but torch\.cuda\.device_count\(\) is (?P<count>\d+))",
    example="Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are "
    "running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your "
    "storages to the CPU.",
    cause="torch.save records the device of every tensor (cuda:0 for a model trained on a GPU) and torch.load puts "
    "each tensor back there unless map_location says otherwise; this machine has no GPU, or fewer GPUs than the "
    "one that saved the file.",
    fix="torch.load(path, map_location='cpu') or map_location=device (the device you picked), then "
    "model.load_state_dict(...): the values are copied onto the model's own device.",
    reproducer=cuda_checkpoint_on_cpu,
    specific_fix=_cuda_checkpoint_on_cpu,
    needs="cuda-build-without-gpu",
)


ENTRIES: tuple[ErrorEntry, ...] = (
    STATE_DICT_KEYS,
    STATE_DICT_SIZE_MISMATCH,
    NOT_A_CHECKPOINT,
    WEIGHTS_ONLY_LOAD,
    MISSING_CLASS_ON_LOAD,
    RAN_OUT_OF_INPUT,
    CORRUPTED_CHECKPOINT,
    CUDA_CHECKPOINT_ON_CPU,
)
