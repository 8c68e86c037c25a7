"""explain() on chained exceptions (issue 34): after "During handling of the above exception, another exception
occurred" the exception being handled is the real error and comes first, with a line saying that the last one came
from the code that handled it; an exception raised *from* another on purpose keeps its own diagnosis."""

import traceback
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn as nn
from IPython.core.interactiveshell import InteractiveShell

from torchdoctor import explain
from torchdoctor.explain import parse_error_text
from torchdoctor.ipython_extension import load_ipython_extension, unload_ipython_extension

VIEW = "view size is not compatible with input tensor's size and stride"

ROOT = Path(__file__).resolve().parents[2]
# Chapter 00's chained error, "Chained exceptions" (cell 52add6d6): a fallback in the except block fails too. The
# cell's own code, run after the imports of the chapter's first cells.
CHAPTER_00_CELL = "import torch\nimport torch.nn as nn\n\n" + next(
    c.source for c in nbformat.read(ROOT / "course" / "00_method.ipynb", as_version=4).cells if c.id == "52add6d6")


def chapter_00_error(raised) -> BaseException:
    namespace: dict = {}
    return raised(lambda: exec(compile(CHAPTER_00_CELL, "<chapter 00>", "exec"), namespace))


def test_chapter_00_chained_error_is_explained_by_its_first_exception(raised):
    exc = chapter_00_error(raised)
    assert "except RuntimeError:" in CHAPTER_00_CELL and "raise" not in CHAPTER_00_CELL  # an implicit chain
    assert VIEW in str(exc) and "mat1 and mat2 shapes" in str(exc.__context__)  # the chain the chapter shows
    assert exc.__cause__ is None and not exc.__suppress_context__
    d = explain(exc)
    assert d.id == "mat1-mat2-shapes" and "224 rows of 28 features" in d.fix
    assert d.handler_error.startswith("RuntimeError: view size is not compatible")
    last = str(d).splitlines()[-1]
    assert last.startswith("  note:  this error happened first") and "came from the code that handled it" in last
    assert "RuntimeError: view size" in last
    assert "- **Note:** this error happened first" in d._repr_markdown_()
    # Pasted as a traceback: the same answer and the same line.
    pasted = explain("".join(traceback.format_exception(exc)))
    assert pasted.id == "mat1-mat2-shapes" and pasted.handler_error == d.handler_error
    assert [type_name for type_name, _ in parse_error_text("".join(traceback.format_exception(exc)))] == [
        "RuntimeError"] * 3
    assert "mat1 and mat2" in parse_error_text("".join(traceback.format_exception(exc)))[0][1]
    # The last message alone (what the notebook check tries first, and the cell's declaration) is still the view one.
    alone = explain(f"RuntimeError: {exc}")
    assert alone.id == "view-non-contiguous" and alone.handler_error is None and "note:" not in str(alone)


def test_the_extra_line_in_chinese(raised, monkeypatch):
    monkeypatch.delenv("TORCHDOCTOR_LOCALEDIR", raising=False)
    monkeypatch.setenv("TORCHDOCTOR_LANG", "zh_CN")
    d = explain(chapter_00_error(raised))
    assert d.id == "mat1-mat2-shapes"
    assert str(d).splitlines()[-1].startswith("  注意：这个错误先发生")
    assert "来自处理它的代码" in str(d) and "RuntimeError: view size" in str(d)
    assert "- **注意**：这个错误先发生；回溯中的最后一个错误（`RuntimeError: view size" in d._repr_markdown_()


def test_ipython_extension_shows_the_first_exception(capsys):
    shell = InteractiveShell.instance()
    load_ipython_extension(shell)
    try:
        shell.run_cell(CHAPTER_00_CELL)
    finally:
        unload_ipython_extension(shell)
    out = capsys.readouterr().out
    assert "During handling of the above exception" in out
    assert "torchdoctor: Linear layer input size mismatch [mat1-mat2-shapes]" in out
    assert "came from the code that handled it" in out and "[view-non-contiguous]" not in out


def _linear_error():
    nn.Linear(784, 10)(torch.randn(32, 128))


def test_explicit_wrapper_keeps_its_own_diagnosis(raised):
    """``raise ... from``: the wrapper was worded on purpose; as before, it is explained first, with no extra line."""
    def check_features():
        try:
            _linear_error()
        except RuntimeError as exc:
            raise AssertionError("x: expected 784 features, got 128") from exc

    exc = raised(check_features)
    for d in (explain(exc), explain("".join(traceback.format_exception(exc)))):
        assert d.id == "own-assert-failed" and d.handler_error is None and "note:" not in str(d)

    def implicit():  # the same handler without `from`: its assert is now a failure of the handling code
        try:
            _linear_error()
        except RuntimeError:
            raise AssertionError("x: expected 784 features, got 128")  # noqa: B904 (the implicit chain is the point)

    exc = raised(implicit)
    for d in (explain(exc), explain("".join(traceback.format_exception(exc)))):
        assert d.id == "mat1-mat2-shapes" and d.handler_error == "AssertionError: x: expected 784 features, got 128"


def test_unknown_wrapper_still_leads_to_the_known_cause(raised):
    def wrap():
        try:
            _linear_error()
        except RuntimeError as exc:
            raise ValueError("training failed") from exc

    d = explain(raised(wrap))
    assert d.id == "mat1-mat2-shapes" and d.handler_error is None


def test_mixed_chain_order(raised):
    """A wrapper raised from an error (explicit), then a failure while handling the wrapper (implicit): the wrapper
    first, then its cause, then the handler's error, which the extra line names."""
    def mixed():
        try:
            try:
                _linear_error()
            except RuntimeError as exc:
                raise AssertionError("x: expected 784 features, got 128") from exc
        except AssertionError:
            torch.arange(24.0).view(2, 3, 4).transpose(1, 2).view(2, -1)

    exc = raised(mixed)
    text = "".join(traceback.format_exception(exc))
    first, second, third = (msg for _, msg in parse_error_text(text)[:3])
    assert first.startswith("x: expected") and second.startswith("mat1 and mat2") and third.startswith(VIEW)
    for d in (explain(exc), explain(text)):
        assert d.id == "own-assert-failed" and d.handler_error.startswith("RuntimeError: view size")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # a worker forked from a threaded process, on some hosts
def test_dataloader_worker_reraise_keeps_its_diagnosis():
    """A worker's error reaches the main process re-raised with the worker's traceback, chain included, in its
    message: the quoting entry still explains it, with no extra line."""
    class Cached(torch.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            try:
                return {}[i]
            except KeyError:
                return nn.Linear(784, 10)(torch.randn(2, 128))

    loader = torch.utils.data.DataLoader(Cached(), num_workers=1)
    with pytest.raises(RuntimeError, match="Caught RuntimeError in DataLoader worker process 0") as info:
        next(iter(loader))
    assert "During handling of the above exception" in str(info.value)
    for d in (explain(info.value), explain("".join(traceback.format_exception(info.value)))):
        assert d.id == "worker-exception" and d.handler_error is None
