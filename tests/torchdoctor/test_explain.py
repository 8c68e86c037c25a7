"""explain(): exceptions, messages and pasted tracebacks; numbers in fixes; no false claims."""

import subprocess
import sys
import traceback

import pytest
import torch

from torchdoctor import explain
from torchdoctor.__main__ import main
from torchdoctor.explain import parse_error_text

MAT = "mat1 and mat2 shapes cannot be multiplied (32x128 and 784x10)"


def test_mat1_mat2_fix_uses_the_numbers():
    d = explain(MAT)
    assert d.id == "mat1-mat2-shapes" and d.chapter == "dimensions"
    assert "32 rows of 128 features" in d.fix and "nn.Linear(784, 10)" in d.fix and "in_features=128" in d.fix
    assert d.fix.index("x.shape") < d.fix.index("in_features=128")  # diagnose first, resize the layer last
    assert d.details == {"rows": "32", "got": "128", "expected": "784", "out": "10"}


def test_other_specific_fixes():
    assert "at least 11 classes" in explain("IndexError: Target 10 is out of bounds.").fix
    assert "in_channels=1" in explain(
        "Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 28, 28] to have 3 channels, "
        "but got 1 channels instead").fix
    assert "12288 elements" in explain("shape '[5, -1]' is invalid for input of size 12288").fix
    assert "removeprefix('module.')" in explain(
        'RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight".'
        ' \n\tUnexpected key(s) in state_dict: "module.fc.weight". ').fix


def test_ipython_style_traceback_with_colours():
    text = (
        "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m\n"
        "\x1b[0;31mRuntimeError\x1b[0m                              Traceback (most recent call last)\n"
        "Cell \x1b[0;32mIn[3], line 1\x1b[0m\n\x1b[0;32m----> 1\x1b[0m model(x)\n\n"
        f"\x1b[0;31mRuntimeError\x1b[0m: {MAT}"
    )
    assert explain(text).id == "mat1-mat2-shapes"


def test_chained_exception_uses_the_known_one():
    try:
        try:
            torch.nn.Linear(784, 10)(torch.randn(32, 128))
        except RuntimeError as exc:
            raise ValueError("training failed") from exc
    except ValueError as outer:
        assert explain(outer).id == "mat1-mat2-shapes"
        assert explain("".join(traceback.format_exception(outer))).id == "mat1-mat2-shapes"


def test_parse_error_text_keeps_multiline_messages():
    text = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    f()\n" \
           "RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: \"a\". "
    (typ, msg), (whole_type, whole) = parse_error_text(text)
    assert whole_type == "RuntimeError" and whole.startswith("Traceback")
    assert typ == "RuntimeError" and msg.startswith("Error(s)") and "Missing key(s)" in msg


UNRELATED = [
    lambda: [][1],
    lambda: {}["key"],
    lambda: 1 / 0,
    lambda: int("x"),
    lambda: None.shape,
    lambda: undefined_name,  # noqa: F821
    lambda: open("/nonexistent/file.pt"),
    lambda: __import__("no_such_module_xyz"),
    lambda: "a" + 1,
    lambda: [1, 2].index(3),
    lambda: next(iter([])),
    lambda: float("nan") < "a",
    lambda: {}.pop("x"),
    lambda: (1, 2).append(3),
    lambda: sum([[1]], 1),
    lambda: eval("1 +"),
    lambda: bytes(-1),
    lambda: range(1, 2, 0),
    lambda: torch.tensor([1, 2]).item(),
    lambda: torch.tensor([1.0]) < "a",
    lambda: torch.zeros(2).foo,
    lambda: torch.load("/nonexistent.pt"),
    lambda: torch.optim.SGD([], lr=0.1),
    lambda: torch.nn.Linear(2, 2)(None),
    lambda: torch.randint(0, 10, (2,), dtype=torch.float).bitwise_not(),
]


@pytest.mark.parametrize("fn", UNRELATED, ids=range(len(UNRELATED)))
def test_unrelated_errors_are_not_claimed(fn, raised):
    exc = raised(fn)
    assert explain(exc) is None, f"{type(exc).__name__}: {exc}"
    assert explain("".join(traceback.format_exception(exc))) is None
    assert explain(f"{type(exc).__name__}: {exc}") is None


NEAR_MISSES = [
    "list index out of range",
    "IndexError: index 5 is out of bounds for dimension 0 with size 3",
    "index out of range in self-attention module",  # not the Embedding message
    "mat1 and mat2 shapes look fine",
    "ValueError: mat1 and mat2 shapes cannot be multiplied",  # no numbers, wrong type
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2]",
    "RuntimeError: Expected all elements to be positive",
    "KeyError: 'state_dict'",
    "AttributeError: 'Tensor' object has no attribute 'cuda_'",
    "Target size must be positive",
    "ValueError: Caught a fish",
    "EOFError: EOF when reading a line",
    "ValueError: Ran out of input",  # right words, wrong type
    "ValueError: Target 10 is out of bounds in my parser",  # right words, wrong type
    'KeyError: "Weights only load failed"',
    # the words appear only in a quoted source line; the error itself is something else
    'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n'
    '    raise ValueError("stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1")\n'
    "ValueError: oops",
    "",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_not_claimed(text):
    assert explain(text) is None


def test_bad_input_type():
    with pytest.raises(TypeError, match="takes an exception or the text"):
        explain(42)


def test_cli_reads_stdin_and_sets_exit_status(raised):
    exc = raised(lambda: torch.nn.Linear(784, 10)(torch.randn(32, 128)))
    tb = "".join(traceback.format_exception(exc))
    ok = subprocess.run([sys.executable, "-m", "torchdoctor", "explain"], input=tb, capture_output=True, text=True)
    assert ok.returncode == 0 and "in_features=128" in ok.stdout
    unknown = subprocess.run([sys.executable, "-m", "torchdoctor", "explain", "KeyError: 'x'"], capture_output=True,
                             text=True)
    assert unknown.returncode == 1 and "not in the catalog" in unknown.stdout


def test_cli_argument_and_empty_input(capsys, monkeypatch):
    assert main(["explain", "Target", "10", "is", "out", "of", "bounds."]) == 0
    assert "ce-target-out-of-bounds" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("   "))
    assert main(["explain"]) == 2


def test_known_error_quoted_inside_another_exception_is_found():
    text = ("PapermillExecutionError: \n---------\nException encountered at \"In [5]\":\n"
            f"RuntimeError: {MAT}")
    assert explain(text).id == "mat1-mat2-shapes"


def test_fixes_for_negative_labels_too_many_dims_and_small_oom(raised):
    negative = explain("IndexError: Target -1 is out of bounds.").fix
    assert "ignore_index" in negative and "classes" not in negative
    too_many = explain(raised(lambda: torch.nn.Conv2d(3, 4, 3)(torch.randn(1, 1, 3, 8, 8)))).fix
    assert "too many dimensions" in too_many and "unsqueeze(0)" not in too_many
    too_few = explain(raised(lambda: torch.nn.Conv2d(3, 4, 3)(torch.randn(3, 8)))).fix
    assert "unsqueeze(0)" in too_few
    oom = explain("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 0 has a total")
    assert oom.id == "cuda-oom" and "512 bytes" in oom.fix
