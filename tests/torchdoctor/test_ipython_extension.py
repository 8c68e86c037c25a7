"""The IPython extension in a real IPython shell: silent for errors the catalog does not know."""

import pytest
from IPython.core.interactiveshell import InteractiveShell

from torchdoctor.ipython_extension import load_ipython_extension, unload_ipython_extension


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    load_ipython_extension(shell)
    yield shell
    unload_ipython_extension(shell)


def test_known_error_gets_a_diagnosis_after_its_traceback(shell, capsys):
    shell.run_cell("import torch\ntorch.nn.Linear(784, 10)(torch.randn(32, 128))")
    out = capsys.readouterr().out
    assert "RuntimeError" in out and "torchdoctor: Linear layer input size mismatch" in out
    assert out.index("RuntimeError") < out.index("torchdoctor:")


def test_unknown_error_gets_its_traceback_only(shell, capsys):
    result = shell.run_cell('{"a": 1}["b"]  # not a PyTorch error')
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, KeyError)
    assert "KeyError" in out and "torchdoctor" not in out
