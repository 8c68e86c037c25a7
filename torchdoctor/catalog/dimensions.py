"""Chapter 01 (dimensions): shapes, sizes, views and indices.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from torchdoctor.catalog._entry import ErrorEntry, warnings_as_errors

CHAPTER = "dimensions"


def mat1_mat2_shapes() -> None:
    nn.Linear(784, 10)(torch.randn(32, 128))


def _mat1_mat2(g: Mapping[str, str]) -> str:
    return (
        f"The layer is nn.Linear({g['expected']}, {g['out']}) (mat2 is its weight transposed, "
        f"{g['expected']}x{g['out']}) and the input reaching it is {g['rows']} rows of {g['got']} features. Print "
        f"x.shape just before the layer to see which side is wrong. If {g['rows']} is not the batch size, the input "
        f"was flattened or squeezed wrongly (squeeze() also drops the batch dimension of a batch of one; a view "
        f"with a hard-coded size mixes samples): flatten with torch.flatten(x, 1) or x.reshape(x.size(0), -1), "
        f"which keep the batch dimension. If the input is right and the layer's size was a guess, build the layer "
        f"from the data: in_features={g['got']}, computed by a dummy forward pass or left to nn.LazyLinear."
    )


MAT1_MAT2_SHAPES = ErrorEntry(
    id="mat1-mat2-shapes",
    title="Linear layer input size mismatch",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"mat1 and mat2 shapes cannot be multiplied \((?P<rows>\d+)x(?P<got>\d+) and "
    r"(?P<expected>\d+)x(?P<out>\d+)\)",
    example="mat1 and mat2 shapes cannot be multiplied (32x128 and 784x10)",
    cause="A matrix product got (rows x K1) times (K2 x out) with K1 != K2. In an nn.Linear, mat1 is the "
    "input (batch x features) and mat2 the transposed weight (in_features x out_features), so the input has "
    "a different number of features than in_features.",
    fix="Print x.shape just before the layer. If its first dimension is not the batch size, the input was "
    "flattened or squeezed wrongly (squeeze() on a batch of one, a view with a hard-coded size): flatten with "
    "torch.flatten(x, 1) or x.reshape(x.size(0), -1). If the input is right, make in_features equal to its "
    "feature count (a dummy forward pass or nn.LazyLinear computes it); never create layers in forward.",
    reproducer=mat1_mat2_shapes,
    specific_fix=_mat1_mat2,
)


def view_invalid_size() -> None:
    torch.randn(4, 3, 32, 32).view(5, -1)  # 12288 elements cannot be split into rows of 5


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
        f"{size}; usually keep the batch dimension and flatten the rest: torch.flatten(x, 1) or "
        f"x.reshape(x.size(0), -1)."
    )


VIEW_INVALID_SIZE = ErrorEntry(
    id="view-invalid-size",
    title="view/reshape to a shape with a different number of elements",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"shape '\[(?P<shape>[-\d, ]*)\]' is invalid for input of size (?P<size>\d+)",
    example="shape '[5, -1]' is invalid for input of size 12288",
    cause="view() and reshape() keep every element; the requested shape holds a different number of "
    "elements, or -1 cannot be inferred because the other sizes do not divide the total.",
    fix="Print x.shape and x.numel(); keep the batch dimension and flatten the rest: torch.flatten(x, 1) or "
    "x.reshape(x.size(0), -1).",
    reproducer=view_invalid_size,
    specific_fix=_view_invalid,
)


def view_non_contiguous() -> None:
    torch.randn(3, 4).t().view(12)


VIEW_NON_CONTIGUOUS = ErrorEntry(
    id="view-non-contiguous",
    title="view on a non-contiguous tensor",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"view size is not compatible with input tensor's size and stride",
    example="view size is not compatible with input tensor's size and stride (at least one dimension spans "
    "across two contiguous subspaces). Use .reshape(...) instead.",
    cause="view() never copies, so it needs the elements laid out in memory in the new order. After "
    "transpose, permute or some slicing they are not.",
    fix="Use x.reshape(...) (copies only when needed) or x.contiguous().view(...).",
    reproducer=view_non_contiguous,
)


def embedding_index() -> None:
    nn.Embedding(10, 3)(torch.tensor([3, 10]))


EMBEDDING_INDEX = ErrorEntry(
    id="embedding-index",
    title="Embedding index out of range",
    chapter=CHAPTER,
    exception_types=("IndexError",),
    pattern=r"^index out of range in self$",
    example="index out of range in self",
    cause="An index passed to nn.Embedding (or index_select) is >= num_embeddings or negative: the "
    "vocabulary is bigger than the table, or padding/unknown ids were added after building it.",
    fix="Check ids.min() and ids.max() against num_embeddings; build the Embedding with "
    "num_embeddings = max id + 1 (vocabulary size including special tokens).",
    reproducer=embedding_index,
)


def ce_target_out_of_bounds() -> None:
    F.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 10, 3]))


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


CE_TARGET_OUT_OF_BOUNDS = ErrorEntry(
    id="ce-target-out-of-bounds",
    title="CrossEntropyLoss label out of range",
    chapter=CHAPTER,
    exception_types=("IndexError",),
    pattern=r"Target (?P<target>-?\d+) is out of bounds",
    example="Target 10 is out of bounds.",
    cause="A class label is >= the number of outputs C (or negative). Labels must run from 0 to C-1; "
    "1-based labels or a last layer with too few outputs cause this. On CUDA the same bug shows up as a "
    "device-side assert.",
    fix="Check labels.min() and labels.max(); shift 1-based labels by -1 or give the last layer C outputs.",
    reproducer=ce_target_out_of_bounds,
    specific_fix=_ce_target,
)


def conv_channels() -> None:
    nn.Conv2d(3, 16, 3)(torch.randn(8, 1, 28, 28))


def _conv_channels(g: Mapping[str, str]) -> str:
    return (
        f"The layer was built for {g['expected']} input channels but the input [{g['input']}] has {g['got']} "
        f"in dimension 1. Set in_channels={g['got']} on the layer, or change the input: channels-last images "
        f"(N, H, W, C) need x.permute(0, 3, 1, 2); a stack of conv layers needs each in_channels to equal the "
        f"previous out_channels."
    )


CONV_CHANNELS = ErrorEntry(
    id="conv-channels",
    title="Conv layer channel mismatch",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Given groups=\d+, weight of size \[(?P<weight>[\d, ]+)\], expected input\[(?P<input>[\d, ]+)\] "
    r"to have (?P<expected>\d+) channels, but got (?P<got>\d+) channels instead",
    example="Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 28, 28] to have 3 channels, "
    "but got 1 channels instead",
    cause="The input's dimension 1 (channels) differs from the layer's in_channels: grayscale images into an "
    "RGB model, channels-last data, or two conv layers whose out/in channels do not chain.",
    fix="Set in_channels to the real channel count, permute channels-last data to (N, C, H, W), or make each "
    "conv's in_channels equal the previous out_channels.",
    reproducer=conv_channels,
    specific_fix=_conv_channels,
)


def conv_input_dims() -> None:
    nn.Conv2d(3, 16, 3)(torch.randn(3, 32))


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


CONV_INPUT_DIMS = ErrorEntry(
    id="conv-input-dims",
    title="Conv layer got an input with the wrong number of dimensions",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Expected (?P<expected>.+?) input to (?P<op>conv\w+|\w+pool\w*), but got input of size: "
    r"\[(?P<size>[\d, ]*)\]",
    example="Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 32]",
    cause="Conv2d wants (N, C, H, W) or (C, H, W). A single image without its batch or channel dimension, "
    "or a flattened image, has too few dimensions.",
    fix="Add the missing dimension (x.unsqueeze(0) for the batch, x.unsqueeze(1) for a channel) or reshape "
    "flattened data back to images.",
    reproducer=conv_input_dims,
    specific_fix=_conv_dims,
)


def broadcast_size() -> None:
    torch.randn(2, 3) + torch.randn(2, 4)


def _broadcast(g: Mapping[str, str]) -> str:
    return (
        f"Dimension {g['dim']} is {g['a']} in the first tensor and {g['b']} in the second; broadcasting only "
        f"stretches a dimension of size 1. Print both shapes: one of them was built with the wrong size, or "
        f"needs a transpose or unsqueeze so that matching dimensions line up."
    )


BROADCAST_SIZE = ErrorEntry(
    id="broadcast-size",
    title="Tensors cannot be broadcast together",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"The size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\) at "
    r"non-singleton dimension (?P<dim>\d+)",
    example="The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    cause="An elementwise operation got two shapes that differ in a dimension where neither is 1.",
    fix="Print both shapes and make the dimension agree: fix the size that was built wrong, or transpose / "
    "unsqueeze so matching dimensions line up.",
    reproducer=broadcast_size,
    specific_fix=_broadcast,
)


def mse_broadcast_warning() -> None:
    with warnings_as_errors(UserWarning):
        F.mse_loss(torch.randn(8, 1), torch.randn(8))


def _mse_broadcast(g: Mapping[str, str]) -> str:
    if "torch.Size([])" in (g["input"], g["target"]):
        side = "prediction" if g["input"] == "torch.Size([])" else "target"
        return (
            f"The {side} has no dimension at all (torch.Size([])) and the other side is "
            f"{g['target'] if side == 'prediction' else g['input']}: usually .squeeze() without an argument removed "
            f"the batch dimension of a batch of one sample (the last batch of an epoch). Squeeze only the dimension "
            f"you mean, pred.squeeze(-1), so that a batch of one keeps its shape (1,)."
        )
    return (
        f"The prediction is {g['input']} and the target {g['target']}, so the loss silently broadcasts them "
        f"into a grid of every prediction against every target. Make them equal: pred.squeeze(-1) or "
        f"target.unsqueeze(-1), or view(-1) on both."
    )


MSE_BROADCAST_WARNING = ErrorEntry(
    id="mse-broadcast-warning",
    title="Loss target and input sizes differ (silent broadcasting)",
    chapter=CHAPTER,
    exception_types=("UserWarning",),
    pattern=r"Using a target size \((?P<target>torch\.Size\(\[[\d, ]*\]\))\) that is different to the input "
    r"size \((?P<input>torch\.Size\(\[[\d, ]*\]\))\)",
    example="Using a target size (torch.Size([8])) that is different to the input size (torch.Size([8, 1])). "
    "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
    cause="Only a warning, and the loss still returns a number: an (N, 1) prediction against an (N,) target "
    "broadcasts to (N, N), comparing every prediction with every target. Training runs and learns the mean.",
    fix="Give prediction and target the same shape: pred.squeeze(-1) or target.unsqueeze(-1).",
    reproducer=mse_broadcast_warning,
    specific_fix=_mse_broadcast,
)


def ce_batch_size() -> None:
    F.cross_entropy(torch.randn(32, 10), torch.randint(0, 10, (16,)))


def _ce_batch(g: Mapping[str, str]) -> str:
    return (
        f"The model produced {g['input']} rows of scores but there are {g['target']} labels. A reshape such "
        f"as x.view(-1, k) with the wrong k merges or splits samples; flatten with torch.flatten(x, 1) and "
        f"check that inputs and labels come from the same batch."
    )


CE_BATCH_SIZE = ErrorEntry(
    id="ce-batch-size",
    title="Loss input and target batch sizes differ",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"Expected input batch_size \((?P<input>\d+)\) to match target batch_size \((?P<target>\d+)\)",
    example="Expected input batch_size (32) to match target batch_size (16).",
    cause="The output has a different number of rows than there are labels, usually because a reshape "
    "with a hard-coded size merged or split samples.",
    fix="Flatten with torch.flatten(x, 1) instead of a hard-coded size, and feed labels of the same batch.",
    reproducer=ce_batch_size,
    specific_fix=_ce_batch,
)


def rnn_input_size() -> None:
    nn.LSTM(input_size=10, hidden_size=20)(torch.randn(5, 3, 8))


def _rnn_input(g: Mapping[str, str]) -> str:
    return (
        f"The last dimension of the input has {g['got']} features but the layer was built with "
        f"input_size={g['expected']}. Set input_size={g['got']}, or check the input layout: without "
        f"batch_first=True it must be (seq_len, batch, features)."
    )


RNN_INPUT_SIZE = ErrorEntry(
    id="rnn-input-size",
    title="RNN/LSTM input feature size mismatch",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"input\.size\(-1\) must be equal to input_size\. Expected (?P<expected>\d+), got (?P<got>\d+)",
    example="input.size(-1) must be equal to input_size. Expected 10, got 8",
    cause="The last dimension of the sequence input differs from the layer's input_size.",
    fix="Set input_size to the real feature count, and check the layout (seq, batch, features) unless "
    "batch_first=True.",
    reproducer=rnn_input_size,
    specific_fix=_rnn_input,
)


def pool_output_too_small() -> None:
    nn.MaxPool2d(2)(torch.randn(1, 8, 1, 1))


POOL_OUTPUT_TOO_SMALL = ErrorEntry(
    id="pool-output-too-small",
    title="Pooling on a feature map that has become too small",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Given input size: \((?P<input>[\dx]+)\)\. Calculated output size: \((?P<output>[\dx]+)\)\. "
    r"Output size is too small",
    example="Given input size: (8x1x1). Calculated output size: (8x0x0). Output size is too small",
    cause="Each pooling or strided layer shrinks the image; after enough of them (or with small inputs) the "
    "map is smaller than the window.",
    fix="Use fewer downsampling layers, padding, larger inputs, or nn.AdaptiveAvgPool2d to a fixed size; "
    "print the shape after each layer (torchdoctor.shapes.shape_table).",
    reproducer=pool_output_too_small,
)


def kernel_bigger_than_input() -> None:
    nn.Conv2d(1, 1, 5)(torch.randn(1, 1, 3, 3))


KERNEL_BIGGER_THAN_INPUT = ErrorEntry(
    id="kernel-bigger-than-input",
    title="Convolution kernel larger than its input",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Kernel size can't be greater than actual input size",
    example="Calculated padded input size per channel: (3 x 3). Kernel size: (5 x 5). Kernel size can't be "
    "greater than actual input size",
    cause="The feature map reaching this convolution is smaller than the kernel, after padding.",
    fix="Add padding, use a smaller kernel or fewer downsampling layers before it, or feed larger inputs.",
    reproducer=kernel_bigger_than_input,
)


def lazy_uninitialized() -> None:
    sum(p.numel() for p in nn.LazyLinear(3).parameters())


LAZY_UNINITIALIZED = ErrorEntry(
    id="lazy-uninitialized",
    title="A lazy module used before its first forward pass",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"Attempted to use an uninitialized parameter in",
    example="Attempted to use an uninitialized parameter in <method 'numel' of 'torch._C.TensorBase' "
    "objects>. This error happens when you are using a `LazyModule` or explicitly manipulating "
    "`torch.nn.parameter.UninitializedParameter` objects.",
    cause="nn.LazyLinear (and the other Lazy modules) create their weights on the first forward pass; "
    "until then they have no shape, so counting, initialising or inspecting them fails.",
    fix="Run one dummy batch through the model right after building it, before counting parameters, "
    "initialising weights or creating the optimizer.",
    reproducer=lazy_uninitialized,
)


def bce_target_size() -> None:
    logits = nn.Linear(2, 1)(torch.randn(1, 2)).squeeze()  # a batch of one: (1, 1) -> (), not (1,)
    F.binary_cross_entropy_with_logits(logits, torch.ones(1))


def _size(text: str) -> list[int]:
    """[8, 1] from 'torch.Size([8, 1])'."""
    return [int(d) for d in re.findall(r"\d+", text.removeprefix("torch.Size"))]


def _bce_size(g: Mapping[str, str]) -> str:
    target, output = _size(g["target"]), _size(g["input"])
    if not output and len(target) == 1:
        return (
            f"The output is a 0-d tensor and the target {g['target']}: squeeze() without a dimension removed the "
            f"batch dimension of a batch of one as well ((1, 1) -> ()). Squeeze only the output dimension, "
            f"logits.squeeze(1), which gives (N,) for every batch size, 1 included."
        )
    if output == [*target, 1]:
        return (
            f"The output is {g['input']} (one logit per sample, in a column) and the target {g['target']}. Drop "
            f"the output dimension with logits.squeeze(1) (never squeeze() without a dimension: it also drops the "
            f"batch dimension of a batch of one), or give the target the column: target.unsqueeze(1).float()."
        )
    return (
        f"The target is {g['target']} and the output {g['input']}. Give both the same shape, keeping the batch "
        f"dimension: print both shapes and squeeze or unsqueeze a named dimension, never squeeze() without one."
    )


BCE_TARGET_SIZE = ErrorEntry(
    id="bce-target-size",
    title="BCEWithLogitsLoss target and input sizes differ",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"Target size \((?P<target>torch\.Size\(\[[\d, ]*\]\))\) must be the same as input size "
    r"\((?P<input>torch\.Size\(\[[\d, ]*\]\))\)",
    example="Target size (torch.Size([1])) must be the same as input size (torch.Size([]))",
    cause="Binary cross-entropy wants logits and targets of the same shape. A one-output classifier gives "
    "(N, 1) logits while the labels are (N,); squeezing them with squeeze() fixes every batch but a batch of "
    "one, whose (1, 1) logits become a 0-d tensor.",
    fix="logits.squeeze(1), which keeps the batch dimension for a batch of one (squeeze() does not), or "
    "target.unsqueeze(1).float().",
    reproducer=bce_target_size,
    specific_fix=_bce_size,
)


def batchnorm_single_sample() -> None:
    nn.BatchNorm1d(4).train()(torch.randn(1, 4))


BATCHNORM_SINGLE_SAMPLE = ErrorEntry(
    id="batchnorm-single-sample",
    title="BatchNorm in training mode on a single sample",
    chapter=CHAPTER,
    exception_types=("ValueError",),
    pattern=r"Expected more than 1 value per channel when training, got input size "
    r"(?P<size>torch\.Size\(\[[\d, ]*\]\))",
    example="Expected more than 1 value per channel when training, got input size torch.Size([1, 4])",
    cause="BatchNorm needs several values per channel to compute batch statistics. A single sample in "
    "training mode: predicting without model.eval(), or a last training batch of size 1.",
    fix="Call model.eval() before inference (and model.train() after); use drop_last=True in the training "
    "DataLoader.",
    reproducer=batchnorm_single_sample,
)



ENTRIES: tuple[ErrorEntry, ...] = (
    MAT1_MAT2_SHAPES,
    VIEW_INVALID_SIZE,
    VIEW_NON_CONTIGUOUS,
    EMBEDDING_INDEX,
    CE_TARGET_OUT_OF_BOUNDS,
    CONV_CHANNELS,
    CONV_INPUT_DIMS,
    BROADCAST_SIZE,
    MSE_BROADCAST_WARNING,
    CE_BATCH_SIZE,
    RNN_INPUT_SIZE,
    POOL_OUTPUT_TOO_SMALL,
    KERNEL_BIGGER_THAN_INPUT,
    LAZY_UNINITIALIZED,
    BCE_TARGET_SIZE,
    BATCHNORM_SINGLE_SAMPLE,
)
