"""Chapter 04 (dtype-device): dtypes and devices.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "dtype-device"


def ce_target_dtype() -> None:
    F.cross_entropy(torch.randn(3, 5), torch.tensor([1.0, 2.0, 3.0]))


def _ce_target_dtype(g: Mapping[str, str]) -> str:
    return (
        f"The class labels are {g['got']}; cross-entropy with class indices wants int64. Use labels.long(); "
        f"if the labels are really probabilities (soft labels), they must have the same shape as the output."
    )


CE_TARGET_DTYPE = ErrorEntry(
    id="ce-target-dtype",
    title="Class labels are not integers (CrossEntropyLoss/NLLLoss)",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    # torch 2.11 words it "expected scalar type Long but found Float" (tests/torchdoctor/message_corpus/2.11.0.json),
    # the words a batched product or a bias-free convolution of int64 data uses too: "Long" is taken as a target.
    pattern=r"(?:expected target dtype to be Long or Byte, but got|expected scalar type Long but found) (?P<got>\w+)",
    example="expected target dtype to be Long or Byte, but got Float",
    cause="With class-index targets (shape (N,)), cross-entropy wants int64 labels; float labels (often "
    "from a float numpy array or a regression-style dataset) or int32 labels are rejected.",
    fix="Convert the labels with labels.long().",
    reproducer=ce_target_dtype,
    specific_fix=_ce_target_dtype,
)


def ce_probability_target_long() -> None:
    F.cross_entropy(torch.randn(3, 5), F.one_hot(torch.tensor([1, 2, 3]), 5))


CE_PROBABILITY_TARGET_LONG = ErrorEntry(
    id="ce-probability-target-long",
    title="One-hot integer targets given to CrossEntropyLoss",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected floating point type for target with class probabilities, got (?P<got>\w+)",
    example="Expected floating point type for target with class probabilities, got Long",
    cause="A target with the same shape as the output is read as class probabilities, which must be "
    "floating point; integer one-hot vectors are neither indices nor probabilities.",
    fix="Pass class indices (labels.argmax(dim=1), shape (N,)) or float probabilities (one_hot.float()).",
    reproducer=ce_probability_target_long,
)


def matmul_dtype() -> None:
    nn.Linear(3, 2)(torch.tensor([[1, 2, 3]]))


def _matmul_dtype(g: Mapping[str, str]) -> str:
    return (
        f"The input is {g['a']} and the weights are {g['b']}. Convert the input, not the model: "
        f"x = x.float() (or x.to(model_dtype)); numpy float64 arrays become Double tensors, use "
        f"torch.from_numpy(a).float() or torch.as_tensor(a, dtype=torch.float32)."
    )


MATMUL_DTYPE = ErrorEntry(
    id="matmul-dtype",
    title="Input and weights have different dtypes",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"mat1 and mat2 must have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)",
    example="mat1 and mat2 must have the same dtype, but got Long and Float",
    cause="Linear layers compute input @ weight.T and need equal dtypes: integer data, or numpy float64 "
    "arrays turned into Double tensors, meet float32 weights.",
    fix="Convert the input to the model's dtype (x.float()); convert numpy arrays with dtype=torch.float32.",
    reproducer=matmul_dtype,
    specific_fix=_matmul_dtype,
)


def matmul_operator_dtype() -> None:
    torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.float64)


MATMUL_OPERATOR_DTYPE = ErrorEntry(
    id="matmul-operator-dtype",
    title="Matrix product (or bias-free convolution) of tensors with different dtypes",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"expected m1 and m2 to have the same dtype, but got: [\w:]+(?: \w+)* != [\w:]+(?: \w+)*"
    r"|expected scalar type \w+ but found \w+",
    example="expected m1 and m2 to have the same dtype, but got: float != double",
    cause="A matrix product written by hand (x @ W, torch.mm, torch.bmm) mixes dtypes: typically float32 data "
    "with weights made from a numpy float64 array, or integer data. The same mistake as 'mat1 and mat2 must have "
    "the same dtype' in nn.Linear, worded with C++ type names (float, double, long int) or, for batched "
    "products and for convolutions without a bias (Conv2d(..., bias=False), as in ResNets), as 'expected scalar "
    "type Double but found Float'.",
    fix="Give both operands one dtype, usually float32: W = torch.as_tensor(array, dtype=torch.float32), or "
    "x.to(W.dtype); for a layer, convert the input to the layer's dtype (x.float()), not the layer.",
    reproducer=matmul_operator_dtype,
)


def conv_input_type() -> None:
    nn.Conv2d(1, 1, 3)(torch.randn(1, 1, 5, 5, dtype=torch.float64))


def _conv_input_type(g: Mapping[str, str]) -> str:
    if "cuda" in (g["input"] + g["param"]).lower():
        return (
            f"Input is {g['input']} and the {g['which']} is {g['param']}: they are on different devices. "
            f"Move both to one device: model.to(device) once, and inputs = inputs.to(device) for every batch."
        )
    return (
        f"Input is {g['input']} and the {g['which']} is {g['param']}: different dtypes. Convert the input to "
        f"the model's dtype, e.g. x = x.float() for float32 weights."
    )


CONV_INPUT_TYPE = ErrorEntry(
    id="conv-input-type",
    title="Conv input and weight have different types or devices",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Input type \((?P<input>[^)]+)\) and (?P<which>weight|bias) type \((?P<param>[^)]+)\) should be "
    r"the same",
    example="Input type (double) and bias type (float) should be the same",
    cause="The input and the layer's parameters differ in dtype (float64 data, float32 weights) or, on GPU "
    "machines, in device (a CUDA input and a CPU model or the reverse).",
    fix="Convert the input to the model's dtype (x.float()), and put model and data on one device "
    "(model.to(device); x = x.to(device)).",
    reproducer=conv_input_type,
    specific_fix=_conv_input_type,
)


def embedding_index_dtype() -> None:
    nn.Embedding(10, 3)(torch.tensor([1.0, 2.0]))


EMBEDDING_INDEX_DTYPE = ErrorEntry(
    id="embedding-index-dtype",
    title="Embedding indices are not integers",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
    r"(?P<allowed>[\w, ]+); but got (?P<got>[\w.]+) instead",
    example="Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
    "but got torch.FloatTensor instead (while checking arguments for embedding)",
    cause="nn.Embedding looks rows up by integer id; the ids arrived as floats.",
    fix="Convert the ids with ids.long() (and check they are whole numbers).",
    reproducer=embedding_index_dtype,
)


def cuda_no_driver() -> None:
    torch.zeros(1, device="cuda")


CUDA_NO_DRIVER = ErrorEntry(
    id="cuda-no-driver",
    title="CUDA requested but no GPU driver / GPU",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Found no NVIDIA driver on your system|No CUDA GPUs are available",
    example="Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    cause="PyTorch was built with CUDA, but this machine has no NVIDIA driver or no visible GPU, and the code "
    "asked for a CUDA tensor (device='cuda', .cuda(), map_location missing on a GPU checkpoint).",
    fix="Choose the device at run time (torchdoctor.devices.pick_device() or torch.cuda.is_available()), "
    "and load GPU checkpoints with map_location='cpu'.",
    reproducer=cuda_no_driver,
    needs="cuda-build-without-gpu",
)


def cuda_not_compiled() -> None:
    torch.zeros(1, device="cuda")


CUDA_NOT_COMPILED = ErrorEntry(
    id="cuda-not-compiled",
    title="CUDA requested from a CPU-only PyTorch",
    chapter=CHAPTER,
    exception_types=("AssertionError",),
    pattern=r"Torch not compiled with CUDA enabled",
    example="Torch not compiled with CUDA enabled",
    cause="This PyTorch build has no CUDA support at all (a CPU wheel, or macOS), and the code asked for a "
    "CUDA tensor or called a torch.cuda function.",
    fix="Pick the device at run time (cuda, then mps, then cpu) instead of hard-coding 'cuda'; install a "
    "CUDA build only if the machine has an NVIDIA GPU.",
    reproducer=cuda_not_compiled,
    needs="cpu-only-build",
)


def device_mismatch() -> None:
    nn.Linear(2, 2).cuda()(torch.ones(1, 2))


DEVICE_MISMATCH = ErrorEntry(
    id="device-mismatch",
    title="Tensors on different devices",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected all tensors to be on the same device"
    r"|Tensor on device (?!meta\b)\S+ is not on the expected device (?!meta\b)[^!\s]+!",
    example="Expected all tensors to be on the same device, but got mat1 is on cpu, different from other "
    "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
    cause="One operation mixes tensors on different devices (the CPU and a CUDA or MPS GPU): the model was moved "
    "and the batch was not (or the reverse), or a tensor created inside forward lives on the default device.",
    fix="model.to(device) once; x, y = x.to(device), y.to(device) for every batch; create new tensors "
    "with device=x.device (or torch.zeros_like). Remember tensor.to() returns a copy, module.to() is in place.",
    reproducer=device_mismatch,
    needs="cuda",
)


def meta_device() -> None:
    with torch.device("meta"):
        layer = nn.Linear(2, 2)  # built without memory, never materialised
    layer(torch.ones(1, 2))


META_DEVICE = ErrorEntry(
    id="meta-device",
    title="Tensor on the meta device (never materialised)",
    chapter=CHAPTER,
    exception_types=("RuntimeError", "NotImplementedError"),
    pattern=r"Tensor on device (?:meta is not on the expected device [^!\s]+|\S+ is not on the expected device meta)!"
    r"|Cannot copy out of meta tensor; no data!",
    example="Tensor on device cpu is not on the expected device meta!",
    cause="Part of the computation lives on the 'meta' device, which has shapes but no data: a model built "
    "under torch.device('meta') (or with low-memory loading) was used before its weights were "
    "materialised, or such a tensor was copied to a real device (.cpu(), .to('cuda'), .numpy() after "
    ".cpu()): there are no values to copy. (A message that names two real devices, such as cuda:0 and cpu, "
    "is a device mismatch.)",
    fix="Materialise the model first: model.to_empty(device='cpu') followed by load_state_dict(...) or "
    "re-initialisation.",
    reproducer=meta_device,
)


def device_side_assert() -> None:
    # A device-side assert leaves the CUDA context unusable, so it runs in a child process; the child's
    # exception type and message are raised here unchanged.
    code = (
        "import json, torch\n"
        "try:\n"
        "    torch.nn.functional.cross_entropy(torch.randn(4, 10, device='cuda'),"
        " torch.tensor([1, 2, 10, 3], device='cuda'))\n"
        "    torch.cuda.synchronize()\n"
        "except RuntimeError as e:\n"
        "    print(json.dumps([type(e).__name__, str(e)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    if not lines:
        raise AssertionError(f"the child process raised nothing; stderr: {out.stderr[-2000:]}")
    name, message = json.loads(lines[-1])
    raise getattr(torch, name, RuntimeError)(message)


DEVICE_SIDE_ASSERT = ErrorEntry(
    id="device-side-assert",
    title="CUDA device-side assert",
    chapter=CHAPTER,
    exception_types=("AcceleratorError", "RuntimeError"),
    pattern=r"CUDA error: device-side assert triggered",
    example="CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at "
    "some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
    "CUDA_LAUNCH_BLOCKING=1",
    cause="A CUDA kernel failed a check, most often an index out of range (a class label >= number of "
    "classes, an embedding id too large). Kernels run asynchronously, so the traceback may point to a "
    "later line, and the CUDA context is unusable afterwards.",
    fix="Restart the kernel, then rerun the same step on CPU (it raises a readable error such as 'Target 10 "
    "is out of bounds'), or with CUDA_LAUNCH_BLOCKING=1 to get the right line; check label and index ranges.",
    reproducer=device_side_assert,
    needs="cuda",
)


def cuda_tensor_to_numpy() -> None:
    torch.ones(2, device="cuda").numpy()


CUDA_TENSOR_TO_NUMPY = ErrorEntry(
    id="cuda-tensor-to-numpy",
    title="numpy() on a CUDA tensor",
    chapter=CHAPTER,
    exception_types=("TypeError",),
    pattern=r"can't convert (?P<device>\S+) device type tensor to numpy",
    example="can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
    "memory first.",
    cause="NumPy arrays live in CPU memory; a GPU tensor must be copied first.",
    fix="Use t.detach().cpu().numpy().",
    reproducer=cuda_tensor_to_numpy,
    needs="cuda",
)


def numpy_unsupported_dtype() -> None:
    torch.ones(2, dtype=torch.bfloat16).detach().cpu().numpy()


def _numpy_unsupported_dtype(g: Mapping[str, str]) -> str:
    wider = ("cfloat", "complex64") if g["dtype"].startswith("Complex") else ("float", "float32")
    return (
        f"NumPy has no {g['dtype']} dtype. Convert in PyTorch first: t.detach().{wider[0]}().cpu().numpy() "
        f"({wider[1]} holds every {g['dtype']} value exactly); .tolist() and .item() work without it."
    )


NUMPY_UNSUPPORTED_DTYPE = ErrorEntry(
    id="numpy-unsupported-dtype",
    title="numpy() on a tensor whose dtype NumPy lacks (bfloat16, float8)",
    chapter=CHAPTER,
    exception_types=("TypeError",),
    pattern=r"Got unsupported ScalarType (?P<dtype>\w+)",
    example="Got unsupported ScalarType BFloat16",
    cause="NumPy has no bfloat16 (the half-precision format of mixed-precision training), no float8 and no "
    "complex32, so .numpy() cannot share such a tensor's memory; detach() and cpu() do not change the dtype.",
    fix="Convert the dtype first: t.detach().float().cpu().numpy(); or use t.tolist() / t.item().",
    reproducer=numpy_unsupported_dtype,
    specific_fix=_numpy_unsupported_dtype,
)


def optimizer_state_dtype() -> None:
    net = nn.Linear(3, 2)
    optimizer = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    optimizer.step()  # Adam's running averages are created here, in float32
    net.double()  # the parameters change dtype; the optimizer's state does not
    optimizer.zero_grad()
    net(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
    optimizer.step()


def _optimizer_state_dtype(g: Mapping[str, str]) -> str:
    return (
        f"torch.lerp was asked to update a {g['state']} tensor with a {g['other']} one. In an optimizer step "
        f"(Adam, AdamW) the {g['state']} tensor is the optimizer's state and the {g['other']} one a gradient: the "
        f"model was converted after the optimizer's first step. Convert the model before building the "
        f"optimizer, or call optimizer.load_state_dict(optimizer.state_dict()) after the conversion (it casts "
        f"the state to each parameter's dtype and device)."
    )


OPTIMIZER_STATE_DTYPE = ErrorEntry(
    id="optimizer-state-dtype",
    title="Optimizer state in another dtype than the model (Adam after .double() or .half())",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"expected dtype (?P<state>[\w:]+) for `end` but got dtype (?P<other>[\w:]+)",
    example="expected dtype float for `end` but got dtype double",
    cause="torch.lerp got tensors of two dtypes. Adam and AdamW call it on their running averages at every "
    "step: the model was converted (.double(), .half(), .to(dtype)) after its optimizer had taken a step, and "
    "module.to() does not convert the optimizer's state. (Moved to a GPU instead, the same stale state gives "
    "'Expected all tensors to be on the same device'.)",
    fix="Convert or move the model first, then build the optimizer. To keep the state of a running or resumed "
    "optimizer, call optimizer.load_state_dict(...) after the move: it casts the state to each parameter's "
    "dtype and device.",
    reproducer=optimizer_state_dtype,
    specific_fix=_optimizer_state_dtype,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    CE_TARGET_DTYPE,
    CE_PROBABILITY_TARGET_LONG,
    MATMUL_DTYPE,
    MATMUL_OPERATOR_DTYPE,
    CONV_INPUT_TYPE,
    EMBEDDING_INDEX_DTYPE,
    CUDA_NO_DRIVER,
    CUDA_NOT_COMPILED,
    DEVICE_MISMATCH,
    META_DEVICE,
    DEVICE_SIDE_ASSERT,
    CUDA_TENSOR_TO_NUMPY,
    NUMPY_UNSUPPORTED_DTYPE,
    OPTIMIZER_STATE_DTYPE,
)
