"""Chapter 02 (gradients): autograd errors.

Each entry sits with its reproducer (which raises the error for real) and, where it has one, the fix
that uses the numbers of the message.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from torchdoctor.catalog._entry import ErrorEntry

CHAPTER = "gradients"


def no_grad_fn() -> None:
    w = torch.randn(3, 1)  # a hand-written weight, created without requires_grad=True
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    ((x @ w - y) ** 2).mean().backward()


NO_GRAD_FN = ErrorEntry(
    id="no-grad-fn",
    title="backward() on a tensor that is not part of a graph",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"element (?P<index>\d+) of tensors does not require grad and does not have a grad_fn",
    example="element 0 of tensors does not require grad and does not have a grad_fn",
    cause="Nothing the loss depends on requires grad, so autograd recorded no graph. Either the parameters do "
    "not require grad (the weights of a hand-written model were created as plain tensors without "
    "requires_grad=True, or every parameter was frozen), or the graph was cut between the parameters and the "
    "loss: computed under torch.no_grad() or inference_mode, or from .detach(), .item() or NumPy values. The "
    "inputs and labels never need requires_grad.",
    fix="Make the parameters trainable (nn.Parameter or nn.Module layers, or requires_grad=True on hand-written "
    "weights) and compute the loss from the model's output with grad mode on; check loss.grad_fn and "
    "[n for n, p in model.named_parameters() if p.requires_grad].",
    reproducer=no_grad_fn,
)


def backward_twice() -> None:
    x = torch.ones(2, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    y.backward()


BACKWARD_TWICE = ErrorEntry(
    id="backward-twice",
    title="Backward through the same graph twice",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Trying to backward through the graph a second time",
    example="Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed).",
    cause="backward() frees the graph's saved tensors. A second backward through any part of it fails; "
    "often a tensor computed outside the loop (or a hidden state carried between batches) joins each "
    "iteration's graph.",
    fix="Recompute the forward pass every iteration, detach state carried between iterations "
    "(h = h.detach()); use retain_graph=True only when you really need two backward passes.",
    reproducer=backward_twice,
)


def non_scalar_backward() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward()


NON_SCALAR_BACKWARD = ErrorEntry(
    id="non-scalar-backward",
    title="backward() on a non-scalar tensor",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"grad can be implicitly created only for scalar outputs",
    example="grad can be implicitly created only for scalar outputs",
    cause="backward() without an argument needs a single number; the loss still has elements, e.g. a "
    "loss with reduction='none' or a model output.",
    fix="Reduce to a scalar first (loss.mean() or loss.sum()), or pass the gradient explicitly: "
    "y.backward(torch.ones_like(y)).",
    reproducer=non_scalar_backward,
)


def inplace_saved_tensor() -> None:
    x = torch.ones(3, requires_grad=True)
    y = x.exp()  # exp saves its output for backward
    y.add_(1)
    y.sum().backward()


INPLACE_SAVED_TENSOR = ErrorEntry(
    id="inplace-saved-tensor",
    title="In-place change of a tensor saved for backward",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"one of the variables needed for gradient computation has been modified by an inplace operation",
    example="one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected version 0 instead.",
    cause="An operation saved a tensor for backward and a later in-place operation (x += ..., relu_, "
    "nn.ReLU(inplace=True), slice assignment) changed it, so the gradient would be wrong.",
    fix="Replace the in-place operation with an out-of-place one (x = x + 1, inplace=False); "
    "torch.autograd.set_detect_anomaly(True) shows the forward line of the node named in the message.",
    reproducer=inplace_saved_tensor,
)


def leaf_inplace() -> None:
    w = torch.ones(3, requires_grad=True)
    w.sub_(0.1)


LEAF_INPLACE = ErrorEntry(
    id="leaf-inplace",
    title="In-place operation on a leaf that requires grad",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"a leaf Variable that requires grad is being used in an in-place operation",
    example="a leaf Variable that requires grad is being used in an in-place operation.",
    cause="Updating a parameter or other leaf tensor in place while autograd is recording, typically a "
    "hand-written SGD step w -= lr * w.grad.",
    fix="Do manual updates inside with torch.no_grad(): ..., or use an optimizer.",
    reproducer=leaf_inplace,
)


def numpy_requires_grad() -> None:
    torch.ones(2, requires_grad=True).numpy()


NUMPY_REQUIRES_GRAD = ErrorEntry(
    id="numpy-requires-grad",
    title="numpy() on a tensor that requires grad",
    chapter=CHAPTER,
    exception_types=("RuntimeError",),
    pattern=r"Can't call numpy\(\) on Tensor that requires grad",
    example="Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
    cause="A NumPy array cannot carry gradients, so PyTorch refuses to hand out one that shares memory with "
    "a tensor in the graph.",
    fix="Use t.detach().cpu().numpy() (for a scalar, t.item()).",
    reproducer=numpy_requires_grad,
)


def gradcheck_mismatch() -> None:
    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx, grad_out: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return grad_out * x  # wrong: the derivative is 2x

    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(WrongSquare.apply, (x,))


def _gradcheck_fix(g: Mapping[str, str]) -> str:
    return (
        f"The derivative of output {g['output']} with respect to input {g['input']} is wrong in your backward: "
        f"compare the 'numerical' (true) and 'analytical' (yours) Jacobians printed below the first line, fix that "
        f"derivative, and keep the gradcheck inputs float64."
    )


GRADCHECK_MISMATCH = ErrorEntry(
    id="gradcheck-mismatch",
    title="gradcheck: a backward that disagrees with finite differences",
    chapter=CHAPTER,
    exception_types=("GradcheckError", "RuntimeError"),
    pattern=r"Jacobian mismatch for output (?P<output>\d+) with respect to input (?P<input>\d+)",
    example="Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor([[4.0000]], "
    "dtype=torch.float64)\nanalytical:tensor([[2.0000]], dtype=torch.float64)",
    cause="torch.autograd.gradcheck compared the gradient your backward computes (analytical) with finite "
    "differences of your forward (numerical) and they differ: the hand-written backward of an "
    "autograd.Function (or a custom op) has a wrong derivative, a missing factor or a transposed result. "
    "With float32 inputs, rounding alone can make a correct backward fail.",
    fix="Compare the two printed Jacobians entry by entry to see which derivative is off, fix the backward, and "
    "run gradcheck on small float64 inputs (torch.randn(..., dtype=torch.float64, requires_grad=True)).",
    reproducer=gradcheck_mismatch,
    specific_fix=_gradcheck_fix,
)


def grad_none() -> None:
    layer = torch.nn.Linear(3, 1)
    layer(torch.randn(4, 3)).sum().backward()
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    optimizer.zero_grad()  # sets .grad to None (the default since PyTorch 2.0)
    layer.weight.grad.norm()


GRAD_NONE = ErrorEntry(
    id="grad-none",
    title="A tensor that is None: .grad after zero_grad(), or an unused parameter",
    chapter=CHAPTER,
    exception_types=("AttributeError",),
    # Only methods people call on a gradient: "'NoneType' object has no attribute 'shape'" is far more often a
    # function or a Dataset that returned nothing, which this entry must not claim.
    pattern=r"'NoneType' object has no attribute '(?P<attribute>norm|zero_|data|abs|pow|mul_|add_|clone|detach|item"
    r"|sum|mean|max|min|numel|square)'",
    example="'NoneType' object has no attribute 'norm'",
    cause="Code used a tensor method on None. With PyTorch the None is most often a .grad: zero_grad() sets "
    "gradients to None (set_to_none=True is the default since 2.0), and a parameter has no gradient before the "
    "first backward() or when the loss does not depend on it (a frozen or unused layer). Outside gradients, a "
    "function that forgot its return statement (a forward without return) gives the same message.",
    fix="Read .grad only between backward() and zero_grad(), and guard it: if p.grad is not None. If a "
    "parameter's .grad stays None after backward(), the loss does not use that layer: find out why. If the None "
    "is not a gradient, print the value and check the function that produced it returns something.",
    reproducer=grad_none,
)


ENTRIES: tuple[ErrorEntry, ...] = (
    NO_GRAD_FN,
    BACKWARD_TWICE,
    NON_SCALAR_BACKWARD,
    INPLACE_SAVED_TENSOR,
    LEAF_INPLACE,
    NUMPY_REQUIRES_GRAD,
    GRADCHECK_MISMATCH,
    GRAD_NONE,
)
