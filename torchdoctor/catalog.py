"""The error catalog: the one place where the course's knowledge about PyTorch errors lives.

Every entry names the exception, a regular expression for its message (searched in ``str(exception)``),
a cause, a fix and a reproducer that raises the error for real. ``explain``, the IPython extension, the
cheat sheet and the chapter summaries all read from here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch

from torchdoctor import reproducers as r

__all__ = ["CHAPTERS", "CATALOG", "ErrorEntry", "Needs", "by_chapter", "get_entry", "skip_reason"]

CHAPTERS: dict[str, str] = {
    "method": "00 Method: reading tracebacks and debugging tools",
    "dimensions": "01 Dimensions and shapes",
    "gradients": "02 Gradients and autograd",
    "memory": "03 Memory",
    "dtype-device": "04 Dtypes and devices",
    "checkpoints": "05 Saving and loading",
    "data-loading": "06 Data loading",
    "convergence": "07 Convergence",
    "accuracy": "08 Accuracy",
    "multi-gpu": "09 Multiple GPUs and processes",
}

Needs = Literal["cpu", "cuda", "cuda-build-without-gpu", "cpu-only-build"]
SpecificFix = Callable[[Mapping[str, str]], str]


@dataclass(frozen=True)
class ErrorEntry:
    """One error the course teaches.

    ``exception_types`` lists the accepted class names, the one raised by the pinned PyTorch first; an empty
    tuple accepts any type (used when PyTorch re-raises someone else's exception). ``specific_fix`` turns the
    named groups of ``pattern`` into advice that uses the numbers in the message. ``needs`` says where the
    reproducer can raise the error.
    """

    id: str
    title: str
    chapter: str
    exception_types: tuple[str, ...]
    pattern: str
    example: str
    cause: str
    fix: str
    reproducer: Callable[[], None]
    needs: Needs = "cpu"
    specific_fix: SpecificFix | None = None
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.chapter not in CHAPTERS:
            raise ValueError(f"entry {self.id!r}: unknown chapter {self.chapter!r}; use one of {list(CHAPTERS)}")
        object.__setattr__(self, "regex", re.compile(self.pattern, re.DOTALL))

    @property
    def exception_type(self) -> str:
        return self.exception_types[0] if self.exception_types else "Exception"

    def fix_for(self, groups: Mapping[str, str]) -> str:
        """The fix, made specific with the numbers of one message where the entry knows how."""
        if self.specific_fix is not None and groups and all(v is not None for v in groups.values()):
            return self.specific_fix(groups)
        return self.fix


# --- fixes that use the numbers in the message -----------------------------------------------------------


def _mat1_mat2(g: Mapping[str, str]) -> str:
    return (
        f"The input has {g['got']} features per sample, but the layer expects {g['expected']} "
        f"(mat2 is the layer's weight transposed, {g['expected']}x{g['out']}: nn.Linear({g['expected']}, {g['out']})). "
        f"Set in_features={g['got']} (nn.Linear({g['got']}, {g['out']})), or fix what comes before so it "
        f"produces {g['expected']} features. Print x.shape just before the layer to see which."
    )


def _view_invalid(g: Mapping[str, str]) -> str:
    dims = [int(d) for d in g["shape"].split(",") if d.strip()]
    known = math.prod(d for d in dims if d != -1)
    size = int(g["size"])
    if -1 in dims:
        detail = f"the known dimensions multiply to {known}, which does not divide {size}"
    else:
        detail = f"[{g['shape']}] holds {known} elements, not {size}"
    return (
        f"The tensor has {size} elements and {detail}. Print x.shape and choose sizes whose product is "
        f"{size}; usually keep the batch dimension and flatten the rest: x.view(x.size(0), -1) or "
        f"torch.flatten(x, 1)."
    )


def _ce_target(g: Mapping[str, str]) -> str:
    t = int(g["target"])
    if t < 0:
        return (
            f"A label is {t}, but labels must run from 0 to C-1. Find where the negative labels come from "
            f"(-1 for 'unknown' is common): drop those samples, or mark them with ignore_index (-100 by "
            f"default), which the loss skips."
        )
    return (
        f"A label is {t}, so the output layer needs at least {t + 1} classes (labels run from 0 to C-1). "
        f"Check labels.min() and labels.max(): if the labels run 1..{t}, subtract 1; otherwise give the last "
        f"layer {t + 1} outputs."
    )


def _conv_channels(g: Mapping[str, str]) -> str:
    return (
        f"The layer was built for {g['expected']} input channels but the input [{g['input']}] has {g['got']} "
        f"in dimension 1. Set in_channels={g['got']} on the layer, or change the input: channels-last images "
        f"(N, H, W, C) need x.permute(0, 3, 1, 2); a stack of conv layers needs each in_channels to equal the "
        f"previous out_channels."
    )


def _conv_dims(g: Mapping[str, str]) -> str:
    n = len([d for d in g["size"].split(",") if d.strip()])
    most = max((int(d) for d in re.findall(r"(\d+)D", g["expected"])), default=n)
    if n > most:
        return (
            f"{g['op']} got a {n}-D input of size [{g['size']}] but expects {g['expected']}: there are too many "
            f"dimensions. Remove the extra ones with x.squeeze(dim) or merge them into the batch with "
            f"x.flatten(0, 1); check that the batch is (N, C, ...) and was not stacked or unsqueezed twice."
        )
    return (
        f"{g['op']} got a {n}-D input of size [{g['size']}] but expects {g['expected']}. Add the missing "
        f"batch dimension with x.unsqueeze(0), or the channel dimension with x.unsqueeze(1) for grayscale "
        f"images; a flattened image must be reshaped back to (N, C, H, W)."
    )


def _broadcast(g: Mapping[str, str]) -> str:
    return (
        f"Dimension {g['dim']} is {g['a']} in the first tensor and {g['b']} in the second; broadcasting only "
        f"stretches a dimension of size 1. Print both shapes: one of them was built with the wrong size, or "
        f"needs a transpose or unsqueeze so that matching dimensions line up."
    )


def _mse_broadcast(g: Mapping[str, str]) -> str:
    return (
        f"The prediction is {g['input']} and the target {g['target']}, so the loss silently broadcasts them "
        f"into a grid of every prediction against every target. Make them equal: pred.squeeze(-1) or "
        f"target.unsqueeze(-1), or view(-1) on both."
    )


def _ce_batch(g: Mapping[str, str]) -> str:
    return (
        f"The model produced {g['input']} rows of scores but there are {g['target']} labels. A reshape such "
        f"as x.view(-1, k) with the wrong k merges or splits samples; flatten with x.view(x.size(0), -1) and "
        f"check that inputs and labels come from the same batch."
    )


def _rnn_input(g: Mapping[str, str]) -> str:
    return (
        f"The last dimension of the input has {g['got']} features but the layer was built with "
        f"input_size={g['expected']}. Set input_size={g['got']}, or check the input layout: without "
        f"batch_first=True it must be (seq_len, batch, features)."
    )


def _state_dict_keys(g: Mapping[str, str]) -> str:
    if '"module.' in g["keys"]:
        return (
            "The keys start with 'module.': the checkpoint was saved from a DataParallel/DDP wrapper. Save "
            "model.module.state_dict(), or strip the prefix when loading: "
            "{k.removeprefix('module.'): v for k, v in state.items()}."
        )
    return (
        "The checkpoint and the model have different layers. Load with result = model.load_state_dict(sd, "
        "strict=False), read result.missing_keys and result.unexpected_keys, and initialise the new layers "
        "yourself; never ignore that report."
    )


def _size_mismatch(g: Mapping[str, str]) -> str:
    return (
        f"{g['name']} is {g['saved']} in the checkpoint but {g['current']} in the model: a layer changed size "
        f"since saving. Build the model with the saved sizes, or drop the mismatched entries from the "
        f"state_dict, load with strict=False and initialise those layers yourself."
    )


def _cpu_alloc(g: Mapping[str, str]) -> str:
    from torchdoctor.memory import format_bytes

    return (
        f"One tensor needed {format_bytes(int(g['bytes']))}. Check the shape you asked for (a wrong size "
        f"such as a pixel count used as a batch size), then reduce the batch size or process the data in chunks."
    )


def _cuda_oom(g: Mapping[str, str]) -> str:
    return (
        f"One allocation of {g['size']} did not fit. Reduce the batch size, use gradient accumulation, "
        f"torch.autocast, activation checkpointing, and torch.no_grad() for evaluation; look for tensors kept "
        f"alive by accident (total_loss += loss keeps every graph, use loss.item())."
    )


def _matmul_dtype(g: Mapping[str, str]) -> str:
    return (
        f"The input is {g['a']} and the weights are {g['b']}. Convert the input, not the model: "
        f"x = x.float() (or x.to(model_dtype)); numpy float64 arrays become Double tensors, use "
        f"torch.from_numpy(a).float() or torch.as_tensor(a, dtype=torch.float32)."
    )


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


def _ce_target_dtype(g: Mapping[str, str]) -> str:
    return (
        f"The class labels are {g['got']}; cross-entropy with class indices wants int64. Use labels.long(); "
        f"if the labels are really probabilities (soft labels), they must have the same shape as the output."
    )


def _bce_size(g: Mapping[str, str]) -> str:
    return (
        f"The target is {g['target']} and the output {g['input']}. Make them equal: logits.squeeze(-1) or "
        f"target.unsqueeze(-1).float()."
    )


def _worker(g: Mapping[str, str]) -> str:
    return (
        f"Worker {g['worker']} raised {g['inner']}; the real error is under 'Original Traceback' in the message. "
        f"Rerun with num_workers=0 to get it in the main process with a normal traceback, fix it there "
        f"(usually in __getitem__ or collate_fn), then turn the workers back on."
    )


def _ddp_unused(g: Mapping[str, str]) -> str:
    return (
        f"Parameters {g['indices'].strip()} (by position in model.parameters()) got no gradient. Remove the unused "
        f"layers, make every output take part in the loss, or pass find_unused_parameters=True to "
        f"DistributedDataParallel (it costs an extra pass over the graph)."
    )


# --- the catalog -------------------------------------------------------------------------------------------

CATALOG: tuple[ErrorEntry, ...] = (
    # Checked first: its message embeds the traceback of whatever failed inside the worker.
    ErrorEntry(
        id="worker-exception",
        title="Exception inside a DataLoader worker",
        chapter="data-loading",
        exception_types=(),
        pattern=r"Caught (?P<inner>\w+) in DataLoader worker process (?P<worker>\d+)",
        example="Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):",
        cause="Your Dataset's __getitem__ (or collate_fn) raised inside a worker process; the DataLoader "
        "re-raises it in the main process with the worker's traceback pasted into the message.",
        fix="Read the 'Original Traceback' part of the message, or rerun with num_workers=0 for a normal "
        "traceback, fix the dataset code, then turn the workers back on.",
        reproducer=r.worker_exception,
        specific_fix=_worker,
    ),
    ErrorEntry(
        id="anomaly-nan",
        title="Anomaly detection found NaN in a backward function",
        chapter="method",
        exception_types=("RuntimeError",),
        pattern=r"Function '(?P<function>\w+)' returned nan values in its (?P<index>\d+)\w* output",
        example="Function 'SqrtBackward0' returned nan values in its 0th output.",
        cause="torch.autograd.detect_anomaly() checks every backward function; this one produced NaN. The "
        "warning printed just before the error shows the forward line that created the node.",
        fix="Look at the forward traceback printed with the error: guard the operation (clamp before sqrt or "
        "log, add an epsilon to denominators), and turn anomaly detection off again once fixed: it is slow.",
        reproducer=r.anomaly_nan,
    ),
    ErrorEntry(
        id="mat1-mat2-shapes",
        title="Linear layer input size mismatch",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"mat1 and mat2 shapes cannot be multiplied \((?P<rows>\d+)x(?P<got>\d+) and "
        r"(?P<expected>\d+)x(?P<out>\d+)\)",
        example="mat1 and mat2 shapes cannot be multiplied (32x128 and 784x10)",
        cause="A matrix product got (rows x K1) times (K2 x out) with K1 != K2. In an nn.Linear, mat1 is the "
        "input (batch x features) and mat2 the transposed weight (in_features x out_features), so the input has "
        "a different number of features than in_features.",
        fix="Make in_features equal to the number of features the input really has (print x.shape before the "
        "layer, or use a dummy forward pass or nn.LazyLinear to compute it); never create layers in forward.",
        reproducer=r.mat1_mat2_shapes,
        specific_fix=_mat1_mat2,
    ),
    ErrorEntry(
        id="view-invalid-size",
        title="view/reshape to a shape with a different number of elements",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"shape '\[(?P<shape>[-\d, ]*)\]' is invalid for input of size (?P<size>\d+)",
        example="shape '[5, -1]' is invalid for input of size 12288",
        cause="view() and reshape() keep every element; the requested shape holds a different number of "
        "elements, or -1 cannot be inferred because the other sizes do not divide the total.",
        fix="Print x.shape and x.numel(); keep the batch dimension and let -1 infer the rest: "
        "x.view(x.size(0), -1).",
        reproducer=r.view_invalid_size,
        specific_fix=_view_invalid,
    ),
    ErrorEntry(
        id="view-non-contiguous",
        title="view on a non-contiguous tensor",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"view size is not compatible with input tensor's size and stride",
        example="view size is not compatible with input tensor's size and stride (at least one dimension spans "
        "across two contiguous subspaces). Use .reshape(...) instead.",
        cause="view() never copies, so it needs the elements laid out in memory in the new order. After "
        "transpose, permute or some slicing they are not.",
        fix="Use x.reshape(...) (copies only when needed) or x.contiguous().view(...).",
        reproducer=r.view_non_contiguous,
    ),
    ErrorEntry(
        id="embedding-index",
        title="Embedding index out of range",
        chapter="dimensions",
        exception_types=("IndexError",),
        pattern=r"^index out of range in self$",
        example="index out of range in self",
        cause="An index passed to nn.Embedding (or index_select) is >= num_embeddings or negative: the "
        "vocabulary is bigger than the table, or padding/unknown ids were added after building it.",
        fix="Check ids.min() and ids.max() against num_embeddings; build the Embedding with "
        "num_embeddings = max id + 1 (vocabulary size including special tokens).",
        reproducer=r.embedding_index,
    ),
    ErrorEntry(
        id="ce-target-out-of-bounds",
        title="CrossEntropyLoss label out of range",
        chapter="dimensions",
        exception_types=("IndexError",),
        pattern=r"Target (?P<target>-?\d+) is out of bounds",
        example="Target 10 is out of bounds.",
        cause="A class label is >= the number of outputs C (or negative). Labels must run from 0 to C-1; "
        "1-based labels or a last layer with too few outputs cause this. On CUDA the same bug shows up as a "
        "device-side assert.",
        fix="Check labels.min() and labels.max(); shift 1-based labels by -1 or give the last layer C outputs.",
        reproducer=r.ce_target_out_of_bounds,
        specific_fix=_ce_target,
    ),
    ErrorEntry(
        id="conv-channels",
        title="Conv layer channel mismatch",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"Given groups=\d+, weight of size \[(?P<weight>[\d, ]+)\], expected input\[(?P<input>[\d, ]+)\] "
        r"to have (?P<expected>\d+) channels, but got (?P<got>\d+) channels instead",
        example="Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 28, 28] to have 3 channels, "
        "but got 1 channels instead",
        cause="The input's dimension 1 (channels) differs from the layer's in_channels: grayscale images into an "
        "RGB model, channels-last data, or two conv layers whose out/in channels do not chain.",
        fix="Set in_channels to the real channel count, permute channels-last data to (N, C, H, W), or make each "
        "conv's in_channels equal the previous out_channels.",
        reproducer=r.conv_channels,
        specific_fix=_conv_channels,
    ),
    ErrorEntry(
        id="conv-input-dims",
        title="Conv layer got an input with the wrong number of dimensions",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"Expected (?P<expected>.+?) input to (?P<op>conv\w+|\w+pool\w*), but got input of size: "
        r"\[(?P<size>[\d, ]*)\]",
        example="Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 32]",
        cause="Conv2d wants (N, C, H, W) or (C, H, W). A single image without its batch or channel dimension, "
        "or a flattened image, has too few dimensions.",
        fix="Add the missing dimension (x.unsqueeze(0) for the batch, x.unsqueeze(1) for a channel) or reshape "
        "flattened data back to images.",
        reproducer=r.conv_input_dims,
        specific_fix=_conv_dims,
    ),
    ErrorEntry(
        id="broadcast-size",
        title="Tensors cannot be broadcast together",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"The size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\) at "
        r"non-singleton dimension (?P<dim>\d+)",
        example="The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
        cause="An elementwise operation got two shapes that differ in a dimension where neither is 1.",
        fix="Print both shapes and make the dimension agree: fix the size that was built wrong, or transpose / "
        "unsqueeze so matching dimensions line up.",
        reproducer=r.broadcast_size,
        specific_fix=_broadcast,
    ),
    ErrorEntry(
        id="mse-broadcast-warning",
        title="Loss target and input sizes differ (silent broadcasting)",
        chapter="dimensions",
        exception_types=("UserWarning",),
        pattern=r"Using a target size \((?P<target>torch\.Size\(\[[\d, ]*\]\))\) that is different to the input "
        r"size \((?P<input>torch\.Size\(\[[\d, ]*\]\))\)",
        example="Using a target size (torch.Size([8])) that is different to the input size (torch.Size([8, 1])). "
        "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
        cause="Only a warning, and the loss still returns a number: an (N, 1) prediction against an (N,) target "
        "broadcasts to (N, N), comparing every prediction with every target. Training runs and learns the mean.",
        fix="Give prediction and target the same shape: pred.squeeze(-1) or target.unsqueeze(-1).",
        reproducer=r.mse_broadcast_warning,
        specific_fix=_mse_broadcast,
    ),
    ErrorEntry(
        id="ce-batch-size",
        title="Loss input and target batch sizes differ",
        chapter="dimensions",
        exception_types=("ValueError",),
        pattern=r"Expected input batch_size \((?P<input>\d+)\) to match target batch_size \((?P<target>\d+)\)",
        example="Expected input batch_size (32) to match target batch_size (16).",
        cause="The output has a different number of rows than there are labels, usually because a reshape "
        "with a hard-coded size merged or split samples.",
        fix="Flatten with x.view(x.size(0), -1) instead of a hard-coded size, and feed labels of the same batch.",
        reproducer=r.ce_batch_size,
        specific_fix=_ce_batch,
    ),
    ErrorEntry(
        id="rnn-input-size",
        title="RNN/LSTM input feature size mismatch",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"input\.size\(-1\) must be equal to input_size\. Expected (?P<expected>\d+), got (?P<got>\d+)",
        example="input.size(-1) must be equal to input_size. Expected 10, got 8",
        cause="The last dimension of the sequence input differs from the layer's input_size.",
        fix="Set input_size to the real feature count, and check the layout (seq, batch, features) unless "
        "batch_first=True.",
        reproducer=r.rnn_input_size,
        specific_fix=_rnn_input,
    ),
    ErrorEntry(
        id="pool-output-too-small",
        title="Pooling on a feature map that has become too small",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"Given input size: \((?P<input>[\dx]+)\)\. Calculated output size: \((?P<output>[\dx]+)\)\. "
        r"Output size is too small",
        example="Given input size: (8x1x1). Calculated output size: (8x0x0). Output size is too small",
        cause="Each pooling or strided layer shrinks the image; after enough of them (or with small inputs) the "
        "map is smaller than the window.",
        fix="Use fewer downsampling layers, padding, larger inputs, or nn.AdaptiveAvgPool2d to a fixed size; "
        "print the shape after each layer (torchdoctor.shapes.shape_table).",
        reproducer=r.pool_output_too_small,
    ),
    ErrorEntry(
        id="kernel-bigger-than-input",
        title="Convolution kernel larger than its input",
        chapter="dimensions",
        exception_types=("RuntimeError",),
        pattern=r"Kernel size can't be greater than actual input size",
        example="Calculated padded input size per channel: (3 x 3). Kernel size: (5 x 5). Kernel size can't be "
        "greater than actual input size",
        cause="The feature map reaching this convolution is smaller than the kernel, after padding.",
        fix="Add padding, use a smaller kernel or fewer downsampling layers before it, or feed larger inputs.",
        reproducer=r.kernel_bigger_than_input,
    ),
    ErrorEntry(
        id="lazy-uninitialized",
        title="A lazy module used before its first forward pass",
        chapter="dimensions",
        exception_types=("ValueError",),
        pattern=r"Attempted to use an uninitialized parameter in",
        example="Attempted to use an uninitialized parameter in <method 'numel' of 'torch._C.TensorBase' "
        "objects>. This error happens when you are using a `LazyModule` or explicitly manipulating "
        "`torch.nn.parameter.UninitializedParameter` objects.",
        cause="nn.LazyLinear (and the other Lazy modules) create their weights on the first forward pass; "
        "until then they have no shape, so counting, initialising or inspecting them fails.",
        fix="Run one dummy batch through the model right after building it, before counting parameters, "
        "initialising weights or creating the optimizer.",
        reproducer=r.lazy_uninitialized,
    ),
    ErrorEntry(
        id="no-grad-fn",
        title="backward() on a tensor that is not part of a graph",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"element (?P<index>\d+) of tensors does not require grad and does not have a grad_fn",
        example="element 0 of tensors does not require grad and does not have a grad_fn",
        cause="Nothing the loss depends on requires grad: the inputs of a hand-written model lack "
        "requires_grad=True, the loss was computed under torch.no_grad() or from .detach()/.item()/numpy "
        "values, or the model's parameters were frozen.",
        fix="Compute the loss from the model's output with grad mode on; check loss.grad_fn and "
        "any(p.requires_grad for p in model.parameters()).",
        reproducer=r.no_grad_fn,
    ),
    ErrorEntry(
        id="backward-twice",
        title="Backward through the same graph twice",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"Trying to backward through the graph a second time",
        example="Trying to backward through the graph a second time (or directly access saved tensors after they "
        "have already been freed).",
        cause="backward() frees the graph's saved tensors. A second backward through any part of it fails; "
        "often a tensor computed outside the loop (or a hidden state carried between batches) joins each "
        "iteration's graph.",
        fix="Recompute the forward pass every iteration, detach state carried between iterations "
        "(h = h.detach()); use retain_graph=True only when you really need two backward passes.",
        reproducer=r.backward_twice,
    ),
    ErrorEntry(
        id="non-scalar-backward",
        title="backward() on a non-scalar tensor",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"grad can be implicitly created only for scalar outputs",
        example="grad can be implicitly created only for scalar outputs",
        cause="backward() without an argument needs a single number; the loss still has elements, e.g. a "
        "loss with reduction='none' or a model output.",
        fix="Reduce to a scalar first (loss.mean() or loss.sum()), or pass the gradient explicitly: "
        "y.backward(torch.ones_like(y)).",
        reproducer=r.non_scalar_backward,
    ),
    ErrorEntry(
        id="inplace-saved-tensor",
        title="In-place change of a tensor saved for backward",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"one of the variables needed for gradient computation has been modified by an inplace operation",
        example="one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected version 0 instead.",
        cause="An operation saved a tensor for backward and a later in-place operation (x += ..., relu_, "
        "nn.ReLU(inplace=True), slice assignment) changed it, so the gradient would be wrong.",
        fix="Replace the in-place operation with an out-of-place one (x = x + 1, inplace=False); "
        "torch.autograd.set_detect_anomaly(True) shows the forward line of the node named in the message.",
        reproducer=r.inplace_saved_tensor,
    ),
    ErrorEntry(
        id="leaf-inplace",
        title="In-place operation on a leaf that requires grad",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"a leaf Variable that requires grad is being used in an in-place operation",
        example="a leaf Variable that requires grad is being used in an in-place operation.",
        cause="Updating a parameter or other leaf tensor in place while autograd is recording, typically a "
        "hand-written SGD step w -= lr * w.grad.",
        fix="Do manual updates inside with torch.no_grad(): ..., or use an optimizer.",
        reproducer=r.leaf_inplace,
    ),
    ErrorEntry(
        id="numpy-requires-grad",
        title="numpy() on a tensor that requires grad",
        chapter="gradients",
        exception_types=("RuntimeError",),
        pattern=r"Can't call numpy\(\) on Tensor that requires grad",
        example="Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
        cause="A NumPy array cannot carry gradients, so PyTorch refuses to hand out one that shares memory with "
        "a tensor in the graph.",
        fix="Use t.detach().cpu().numpy() (for a scalar, t.item()).",
        reproducer=r.numpy_requires_grad,
    ),
    ErrorEntry(
        id="simulated-memory-budget",
        title="Simulated memory budget exceeded (torchdoctor)",
        chapter="memory",
        exception_types=("OutOfMemoryError",),
        pattern=r"Simulated CPU memory budget exceeded",
        example="Simulated CPU memory budget exceeded (torchdoctor.memory_budget): tried to allocate 4.00 KiB "
        "with 0 B of the 1.00 KiB budget already in use.",
        cause="The block ran inside torchdoctor.memory_budget on CPU and its tensors would pass the budget: the "
        "CPU stand-in for a CUDA out-of-memory error.",
        fix="Treat it like a real OOM: smaller batches, gradient accumulation, autocast, activation "
        "checkpointing, no_grad for evaluation, and no tensors kept alive by accident.",
        reproducer=r.simulated_budget,
    ),
    ErrorEntry(
        id="cuda-oom",
        title="CUDA out of memory",
        chapter="memory",
        exception_types=("OutOfMemoryError", "RuntimeError"),
        pattern=r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ (?:bytes|[KMGTP]iB))",
        example="CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which "
        "1.06 GiB is free. Including non-PyTorch memory, this process has 6.72 GiB memory in use. Of the "
        "allocated memory 6.50 GiB is allocated by PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated.",
        cause="The GPU could not provide one more block: parameters, gradients, optimizer state and the "
        "activations saved for backward (which grow with the batch size) together need more than the card has.",
        fix="Reduce the batch size, accumulate gradients, use torch.autocast, activation checkpointing and "
        "torch.no_grad() for evaluation; free references to old tensors (loss.item(), not loss).",
        reproducer=r.cuda_oom,
        needs="cuda",
        specific_fix=_cuda_oom,
    ),
    ErrorEntry(
        id="cpu-alloc-failure",
        title="CPU allocation failed",
        chapter="memory",
        exception_types=("RuntimeError", "OutOfMemoryError"),
        pattern=r"DefaultCPUAllocator: can't allocate memory: you tried to allocate (?P<bytes>\d+) bytes",
        example="[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
        "tried to allocate 1000000000000000 bytes. Error code 12 (Cannot allocate memory)",
        cause="The operating system refused a single allocation, most often because a shape is far larger "
        "than intended.",
        fix="Check the shape of the tensor being created; then reduce batch size or work in chunks.",
        reproducer=r.cpu_alloc_failure,
        specific_fix=_cpu_alloc,
    ),
    ErrorEntry(
        id="checkpoint-use-reentrant",
        title="Activation checkpointing without use_reentrant",
        chapter="memory",
        exception_types=("UserWarning",),
        pattern=r"the use_reentrant parameter should be passed explicitly",
        example="torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
        cause="torch.utils.checkpoint.checkpoint still defaults to the old reentrant implementation and warns "
        "that the argument will become required.",
        fix="Pass use_reentrant=False (the recommended implementation).",
        reproducer=r.checkpoint_use_reentrant,
    ),
    ErrorEntry(
        id="cuda-amp-deprecated",
        title="torch.cuda.amp is deprecated",
        chapter="memory",
        exception_types=("FutureWarning",),
        pattern=r"`torch\.cuda\.amp\.(?P<api>\w+)\(args\.\.\.\)` is deprecated",
        example="`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
        "`torch.amp.GradScaler('cuda', args...)` instead.",
        cause="Mixed precision moved to the device-generic torch.amp module; older tutorials still use "
        "torch.cuda.amp.",
        fix="Use torch.amp.autocast('cuda', ...) and torch.amp.GradScaler('cuda').",
        reproducer=r.cuda_amp_deprecated,
    ),
    ErrorEntry(
        id="ce-target-dtype",
        title="Class labels are not integers (CrossEntropyLoss/NLLLoss)",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"expected target dtype to be Long or Byte, but got (?P<got>\w+)",
        example="expected target dtype to be Long or Byte, but got Float",
        cause="With class-index targets (shape (N,)), cross-entropy wants int64 labels; float labels (often "
        "from a float numpy array or a regression-style dataset) or int32 labels are rejected.",
        fix="Convert the labels with labels.long().",
        reproducer=r.ce_target_dtype,
        specific_fix=_ce_target_dtype,
    ),
    ErrorEntry(
        id="ce-probability-target-long",
        title="One-hot integer targets given to CrossEntropyLoss",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Expected floating point type for target with class probabilities, got (?P<got>\w+)",
        example="Expected floating point type for target with class probabilities, got Long",
        cause="A target with the same shape as the output is read as class probabilities, which must be "
        "floating point; integer one-hot vectors are neither indices nor probabilities.",
        fix="Pass class indices (labels.argmax(dim=1), shape (N,)) or float probabilities (one_hot.float()).",
        reproducer=r.ce_probability_target_long,
    ),
    ErrorEntry(
        id="matmul-dtype",
        title="Input and weights have different dtypes",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"mat1 and mat2 must have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)",
        example="mat1 and mat2 must have the same dtype, but got Long and Float",
        cause="Linear layers compute input @ weight.T and need equal dtypes: integer data, or numpy float64 "
        "arrays turned into Double tensors, meet float32 weights.",
        fix="Convert the input to the model's dtype (x.float()); convert numpy arrays with dtype=torch.float32.",
        reproducer=r.matmul_dtype,
        specific_fix=_matmul_dtype,
    ),
    ErrorEntry(
        id="conv-input-type",
        title="Conv input and weight have different types or devices",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Input type \((?P<input>[^)]+)\) and (?P<which>weight|bias) type \((?P<param>[^)]+)\) should be "
        r"the same",
        example="Input type (double) and bias type (float) should be the same",
        cause="The input and the layer's parameters differ in dtype (float64 data, float32 weights) or, on GPU "
        "machines, in device (a CUDA input and a CPU model or the reverse).",
        fix="Convert the input to the model's dtype (x.float()), and put model and data on one device "
        "(model.to(device); x = x.to(device)).",
        reproducer=r.conv_input_type,
        specific_fix=_conv_input_type,
    ),
    ErrorEntry(
        id="embedding-index-dtype",
        title="Embedding indices are not integers",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
        r"(?P<allowed>[\w, ]+); but got (?P<got>[\w.]+) instead",
        example="Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
        "but got torch.FloatTensor instead (while checking arguments for embedding)",
        cause="nn.Embedding looks rows up by integer id; the ids arrived as floats.",
        fix="Convert the ids with ids.long() (and check they are whole numbers).",
        reproducer=r.embedding_index_dtype,
    ),
    ErrorEntry(
        id="cuda-no-driver",
        title="CUDA requested but no GPU driver / GPU",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Found no NVIDIA driver on your system|No CUDA GPUs are available",
        example="Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
        "driver from http://www.nvidia.com/Download/index.aspx",
        cause="PyTorch was built with CUDA, but this machine has no NVIDIA driver or no visible GPU, and the code "
        "asked for a CUDA tensor (device='cuda', .cuda(), map_location missing on a GPU checkpoint).",
        fix="Choose the device at run time (torchdoctor.devices.pick_device() or torch.cuda.is_available()), "
        "and load GPU checkpoints with map_location='cpu'.",
        reproducer=r.cuda_no_driver,
        needs="cuda-build-without-gpu",
    ),
    ErrorEntry(
        id="cuda-not-compiled",
        title="CUDA requested from a CPU-only PyTorch",
        chapter="dtype-device",
        exception_types=("AssertionError",),
        pattern=r"Torch not compiled with CUDA enabled",
        example="Torch not compiled with CUDA enabled",
        cause="This PyTorch build has no CUDA support at all (a CPU wheel, or macOS), and the code asked for a "
        "CUDA tensor or called a torch.cuda function.",
        fix="Pick the device at run time (cuda, then mps, then cpu) instead of hard-coding 'cuda'; install a "
        "CUDA build only if the machine has an NVIDIA GPU.",
        reproducer=r.cuda_not_compiled,
        needs="cpu-only-build",
    ),
    ErrorEntry(
        id="device-mismatch",
        title="Tensors on different devices",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Expected all tensors to be on the same device",
        example="Expected all tensors to be on the same device, but got mat1 is on cpu, different from other "
        "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
        cause="One operation mixes CPU and GPU tensors: the model was moved and the batch was not (or the "
        "reverse), or a tensor created inside forward lives on the default device.",
        fix="model.to(device) once; x, y = x.to(device), y.to(device) for every batch; create new tensors "
        "with device=x.device (or torch.zeros_like). Remember tensor.to() returns a copy, module.to() is in place.",
        reproducer=r.device_mismatch,
        needs="cuda",
    ),
    ErrorEntry(
        id="meta-device",
        title="Tensor on the meta device (never materialised)",
        chapter="dtype-device",
        exception_types=("RuntimeError",),
        pattern=r"Tensor on device (?P<got>\S+) is not on the expected device (?P<expected>[^!\s]+)!",
        example="Tensor on device cpu is not on the expected device meta!",
        cause="Part of the computation lives on the 'meta' device, which has shapes but no data: a model built "
        "under torch.device('meta') (or with low-memory loading) was used before its weights were "
        "materialised. Also the CPU-only stand-in for a device mismatch.",
        fix="Materialise the model first: model.to_empty(device='cpu') followed by load_state_dict(...) or "
        "re-initialisation.",
        reproducer=r.meta_device,
    ),
    ErrorEntry(
        id="device-side-assert",
        title="CUDA device-side assert",
        chapter="dtype-device",
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
        reproducer=r.device_side_assert,
        needs="cuda",
    ),
    ErrorEntry(
        id="cuda-tensor-to-numpy",
        title="numpy() on a CUDA tensor",
        chapter="dtype-device",
        exception_types=("TypeError",),
        pattern=r"can't convert (?P<device>\S+) device type tensor to numpy",
        example="can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
        "memory first.",
        cause="NumPy arrays live in CPU memory; a GPU tensor must be copied first.",
        fix="Use t.detach().cpu().numpy().",
        reproducer=r.cuda_tensor_to_numpy,
        needs="cuda",
    ),
    ErrorEntry(
        id="state-dict-keys",
        title="Missing or unexpected keys in state_dict",
        chapter="checkpoints",
        exception_types=("RuntimeError",),
        pattern=r"Error\(s\) in loading state_dict for \w+:\s+(?P<keys>(?:Missing|Unexpected) key\(s\) in "
        r"state_dict:.*)",
        example='Error(s) in loading state_dict for GrownNet:\n\tMissing key(s) in state_dict: "head.weight", '
        '"head.bias". ',
        cause="The checkpoint's parameter names differ from the model's: layers were added, removed or renamed, "
        "or the checkpoint came from a DataParallel/DDP wrapper (keys start with 'module.').",
        fix="Build the model the checkpoint was saved from, strip a 'module.' prefix, or load with strict=False "
        "and read the returned missing_keys / unexpected_keys before initialising new layers yourself.",
        reproducer=r.state_dict_keys,
        specific_fix=_state_dict_keys,
    ),
    ErrorEntry(
        id="state-dict-size-mismatch",
        title="Parameter shape differs between checkpoint and model",
        chapter="checkpoints",
        exception_types=("RuntimeError",),
        pattern=r"size mismatch for (?P<name>[\w.]+): copying a param with shape (?P<saved>torch\.Size\(\[[\d, ]*\]\))"
        r" from checkpoint, the shape in current model is (?P<current>torch\.Size\(\[[\d, ]*\]\))",
        example="Error(s) in loading state_dict for TinyNet:\n\tsize mismatch for fc.weight: copying a param with "
        "shape torch.Size([10, 20]) from checkpoint, the shape in current model is torch.Size([5, 20]).",
        cause="A layer exists in both but with different sizes (for example a new number of classes). "
        "strict=False does not help: it only forgives missing and unexpected keys.",
        fix="Build the model with the saved sizes, or remove the mismatched entries from the state_dict, load "
        "with strict=False and initialise those layers yourself.",
        reproducer=r.state_dict_size_mismatch,
        specific_fix=_size_mismatch,
    ),
    ErrorEntry(
        id="weights-only-load",
        title="torch.load refused a pickled object (weights_only)",
        chapter="checkpoints",
        exception_types=("UnpicklingError",),
        pattern=r"Weights only load failed",
        example="Weights only load failed. This file can still be loaded, to do so you have two options ... "
        "WeightsUnpickler error: Unsupported global: GLOBAL torchdoctor.reproducers.TinyNet was not an allowed "
        "global by default.",
        cause="Since PyTorch 2.6 torch.load defaults to weights_only=True and only unpickles tensors and plain "
        "containers. The file holds other objects: a whole pickled model (torch.save(model)), or custom "
        "classes in the saved dict.",
        fix="Save and load state_dicts (torch.save(model.state_dict(), p); model.load_state_dict(torch.load(p))). "
        "For trusted files with a few extra classes use torch.serialization.add_safe_globals([...]); "
        "weights_only=False only for files you fully trust, since it can run arbitrary code.",
        reproducer=r.weights_only_load,
    ),
    ErrorEntry(
        id="missing-class-on-load",
        title="Class not found while unpickling",
        chapter="checkpoints",
        exception_types=("AttributeError",),
        pattern=r"Can't get attribute '(?P<name>[^']+)' on <module '(?P<module>[^']+)'",
        example="Can't get attribute 'OldNet' on <module '__main__' (built-in)>",
        cause="A pickle stores classes by module and name; the file was saved with torch.save(model) (or is "
        "sent to a spawned DataLoader worker) and that class is not importable where it is loaded, e.g. it "
        "was defined in a notebook.",
        fix="Save state_dicts instead of whole models, and put classes that must be pickled in an importable "
        ".py module rather than the notebook.",
        reproducer=r.missing_class_on_load,
    ),
    ErrorEntry(
        id="ran-out-of-input",
        title="Empty or truncated pickle file",
        chapter="checkpoints",
        exception_types=("EOFError",),
        pattern=r"^Ran out of input$",
        example="Ran out of input",
        cause="The file is empty: a save that was interrupted, a zero-byte download, or a file created before "
        "it was written. (With the default weights_only=True, an empty file raises EOFError with no message.)",
        fix="Check os.path.getsize(path); re-create the file and write it atomically (save to a temporary name, "
        "then os.replace).",
        reproducer=r.ran_out_of_input,
    ),
    ErrorEntry(
        id="corrupted-checkpoint",
        title="Checkpoint archive is corrupted or truncated",
        chapter="checkpoints",
        exception_types=("RuntimeError",),
        pattern=r"PytorchStreamReader failed reading zip archive",
        example="PytorchStreamReader failed reading zip archive: failed finding central directory",
        cause="A torch.save file is a zip archive; this one is incomplete (interrupted save or copy, disk full) "
        "or is not a PyTorch file at all (an HTML error page saved as .pt).",
        fix="Compare the file size with the original, re-download or re-save it; save to a temporary name and "
        "os.replace it so a crash never leaves half a file.",
        reproducer=r.corrupted_checkpoint,
    ),
    ErrorEntry(
        id="collate-unequal-sizes",
        title="DataLoader cannot stack samples of different sizes",
        chapter="data-loading",
        exception_types=("RuntimeError",),
        pattern=r"stack expects each tensor to be equal size, but got \[(?P<a>[\d, ]*)\] at entry (?P<i>\d+) and "
        r"\[(?P<b>[\d, ]*)\] at entry (?P<j>\d+)",
        example="stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1",
        cause="The default collate_fn stacks the samples of a batch, so every sample must have the same shape; "
        "variable-length sequences or images of different sizes cannot be stacked.",
        fix="Resize or crop images in the dataset's transform, or write a collate_fn that pads "
        "(torch.nn.utils.rnn.pad_sequence) or returns a list.",
        reproducer=r.collate_unequal,
    ),
    ErrorEntry(
        id="worker-killed",
        title="DataLoader worker died",
        chapter="data-loading",
        exception_types=("RuntimeError",),
        pattern=r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) (?:exited unexpectedly|is killed by signal)",
        example="DataLoader worker (pid(s) 4242) exited unexpectedly",
        cause="A worker process was killed, not raised an exception: a bus error from too little shared memory "
        "(/dev/shm in Docker), the out-of-memory killer, or a crash in native code.",
        fix="Run with num_workers=0 to see whether the data code itself fails; in containers give more shared "
        "memory (docker run --shm-size=2g or --ipc=host); use fewer workers or smaller batches.",
        reproducer=r.worker_killed,
    ),
    ErrorEntry(
        id="cant-pickle-local",
        title="Cannot send a local function or lambda to DataLoader workers",
        chapter="data-loading",
        exception_types=("AttributeError", "PicklingError"),
        pattern=r"Can't pickle local object '(?P<name>[^']+)'",
        example="Can't pickle local object 'make_loader.<locals>.<lambda>'",
        cause="With the 'spawn' or 'forkserver' start method (the default on macOS and Windows, and on Linux from "
        "Python 3.14) everything handed to the workers is pickled, and lambdas or functions defined inside "
        "other functions cannot be.",
        fix="Define the dataset, collate_fn and transforms at module level in an importable .py file, or use "
        "num_workers=0 in notebooks.",
        reproducer=r.cant_pickle_local,
    ),
    ErrorEntry(
        id="clip-nonfinite",
        title="Gradient norm is NaN or Inf while clipping",
        chapter="convergence",
        exception_types=("RuntimeError",),
        pattern=r"The total norm of order (?P<order>[\w.]+) for gradients from `parameters` is non-finite",
        example="The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be "
        "clipped.",
        cause="Some gradient is already NaN or Inf, so clipping cannot rescue the step: the loss diverged "
        "(learning rate too high), the data contains NaN/Inf, or an operation like log(0) or sqrt(0) "
        "produced it.",
        fix="Find the first non-finite value (torchdoctor.gradients.find_nonfinite, detect_anomaly), check the "
        "data with torch.isfinite(x).all(), and lower the learning rate; skip the step only as a last resort.",
        reproducer=r.clip_nonfinite,
    ),
    ErrorEntry(
        id="scheduler-before-optimizer",
        title="lr_scheduler.step() called before optimizer.step()",
        chapter="convergence",
        exception_types=("UserWarning",),
        pattern=r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`",
        example="Detected call of `lr_scheduler.step()` before `optimizer.step()`.",
        cause="The scheduler was stepped before the optimizer, so the first value of the schedule is skipped.",
        fix="Call optimizer.step() first, then scheduler.step() (per epoch or per batch, as the scheduler expects).",
        reproducer=r.scheduler_before_optimizer,
    ),
    ErrorEntry(
        id="bce-input-range",
        title="BCELoss got values outside [0, 1]",
        chapter="accuracy",
        exception_types=("RuntimeError",),
        pattern=r"all elements of (?P<which>input|target) should be between 0 and 1",
        example="all elements of input should be between 0 and 1",
        cause="nn.BCELoss expects probabilities but got raw scores (logits) from a model without a final sigmoid, "
        "or targets that are not 0/1.",
        fix="Return logits and use nn.BCEWithLogitsLoss (numerically stable); keep targets as floats in [0, 1].",
        reproducer=r.bce_input_range,
    ),
    ErrorEntry(
        id="bce-target-size",
        title="BCEWithLogitsLoss target and input sizes differ",
        chapter="accuracy",
        exception_types=("ValueError",),
        pattern=r"Target size \((?P<target>torch\.Size\(\[[\d, ]*\]\))\) must be the same as input size "
        r"\((?P<input>torch\.Size\(\[[\d, ]*\]\))\)",
        example="Target size (torch.Size([8])) must be the same as input size (torch.Size([8, 1]))",
        cause="A binary classifier with one output gives (N, 1) logits, while the labels are (N,).",
        fix="logits.squeeze(-1), or target.unsqueeze(-1).float().",
        reproducer=r.bce_target_size,
        specific_fix=_bce_size,
    ),
    ErrorEntry(
        id="batchnorm-single-sample",
        title="BatchNorm in training mode on a single sample",
        chapter="accuracy",
        exception_types=("ValueError",),
        pattern=r"Expected more than 1 value per channel when training, got input size "
        r"(?P<size>torch\.Size\(\[[\d, ]*\]\))",
        example="Expected more than 1 value per channel when training, got input size torch.Size([1, 4])",
        cause="BatchNorm needs several values per channel to compute batch statistics. A single sample in "
        "training mode: predicting without model.eval(), or a last training batch of size 1.",
        fix="Call model.eval() before inference (and model.train() after); use drop_last=True in the training "
        "DataLoader.",
        reproducer=r.batchnorm_single_sample,
    ),
    ErrorEntry(
        id="ddp-no-process-group",
        title="Distributed call without a process group",
        chapter="multi-gpu",
        exception_types=("ValueError", "RuntimeError"),
        pattern=r"Default process group has not been initialized",
        example="Default process group has not been initialized, please make sure to call init_process_group.",
        cause="DistributedDataParallel and torch.distributed calls need torch.distributed.init_process_group() "
        "first, in every process; usually the script was started with python instead of torchrun.",
        fix="Launch with torchrun --nproc_per_node=N script.py and call dist.init_process_group(backend) "
        "('nccl' on GPUs, 'gloo' on CPU) before wrapping the model.",
        reproducer=r.ddp_without_process_group,
    ),
    ErrorEntry(
        id="ddp-device-ids-cpu",
        title="DDP device_ids given for a CPU module",
        chapter="multi-gpu",
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
        reproducer=r.ddp_device_ids_cpu,
    ),
    ErrorEntry(
        id="ddp-unused-parameters",
        title="DDP: parameters that received no gradient",
        chapter="multi-gpu",
        exception_types=("RuntimeError",),
        pattern=r"Expected to have finished reduction in the prior iteration before starting a new one"
        r"(?:.*Parameter indices which did not receive grad for rank \d+: (?P<indices>[\d ]+))?",
        example="Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss.",
        cause="DDP waits for a gradient of every parameter; some parameters took no part in the loss (an unused "
        "layer or head, a branch skipped this step), so the previous reduction never finished.",
        fix="Remove unused parameters, make every output contribute to the loss, or pass "
        "find_unused_parameters=True to DistributedDataParallel.",
        reproducer=r.ddp_unused_parameters,
        specific_fix=_ddp_unused,
    ),
    ErrorEntry(
        id="process-group-twice",
        title="Process group initialised twice",
        chapter="multi-gpu",
        exception_types=("ValueError", "RuntimeError"),
        pattern=r"trying to initialize the default process group twice",
        example="trying to initialize the default process group twice!",
        cause="init_process_group() ran again in a process that already has a group, e.g. a notebook cell run "
        "twice or a helper that initialises on every call.",
        fix="Guard it: if not dist.is_initialized(): dist.init_process_group(...); call "
        "dist.destroy_process_group() when done.",
        reproducer=r.process_group_twice,
    ),
    ErrorEntry(
        id="dataparallel-wrong-device",
        title="DataParallel module not on the first GPU",
        chapter="multi-gpu",
        exception_types=("RuntimeError",),
        pattern=r"module must have its parameters and buffers on device (?P<expected>\S+) \(device_ids\[0\]\) but "
        r"found one of them on device: (?P<got>\S+)",
        example="module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of "
        "them on device: cpu",
        cause="nn.DataParallel copies the module from device_ids[0] to the other GPUs; the module was not moved "
        "there first.",
        fix="model.to('cuda:0') before nn.DataParallel(model); better, use DistributedDataParallel with one "
        "process per GPU.",
        reproducer=r.dataparallel_wrong_device,
        needs="cuda",
    ),
)


def get_entry(entry_id: str) -> ErrorEntry:
    """The entry with this id; a KeyError lists the known ids."""
    for entry in CATALOG:
        if entry.id == entry_id:
            return entry
    raise KeyError(f"no catalog entry {entry_id!r}; known ids: {', '.join(e.id for e in CATALOG)}")


def by_chapter(chapter: str) -> list[ErrorEntry]:
    """The entries a chapter teaches, in catalog order."""
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; use one of {', '.join(CHAPTERS)}")
    return [e for e in CATALOG if e.chapter == chapter]


def skip_reason(entry: ErrorEntry) -> str | None:
    """Why the entry's reproducer cannot raise its error on this machine, or None when it can."""
    cuda_built = torch.backends.cuda.is_built()
    gpu = cuda_built and torch.cuda.is_available()
    if entry.needs == "cuda" and not gpu:
        return f"{entry.id}: needs a CUDA GPU, none is available here"
    if entry.needs == "cuda-build-without-gpu" and (not cuda_built or gpu):
        return f"{entry.id}: needs a CUDA build of PyTorch on a machine without a usable GPU"
    if entry.needs == "cpu-only-build" and cuda_built:
        return f"{entry.id}: needs a CPU-only build of PyTorch; this one was built with CUDA"
    return None
