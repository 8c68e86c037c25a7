"""The IPython extension and the cheat sheet, executed by papermill the way CI runs notebooks."""

from pathlib import Path

import nbformat
import pytest

from course_tools.run_notebooks import run_one

ROOT = Path(__file__).resolve().parents[2]
PARAMETERS = {"DEVICE": "cpu", "FAST": True, "SEED": 0}


def _execute(path: Path, build: Path) -> nbformat.NotebookNode:
    """Run the notebook as `make test-notebooks` does (declared errors checked) and return the executed copy."""
    result = run_one(path, PARAMETERS, build)
    assert result.problems == [], result.problems
    return nbformat.read(build / path.relative_to(ROOT), as_version=4)


def _text(outputs) -> str:
    parts = []
    for o in outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type in ("display_data", "execute_result"):
            parts.append(o.data.get("text/plain", ""))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def extension_nb(tmp_path_factory) -> nbformat.NotebookNode:
    return _execute(ROOT / "tests/torchdoctor/notebooks/extension.ipynb", tmp_path_factory.mktemp("build"))


def _cell(nb: nbformat.NotebookNode, marker: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if marker in c.source)


def test_extension_shows_diagnosis_after_the_traceback(extension_nb):
    for marker, title in (("# top level", "Linear layer input size mismatch"),
                          ("# inside a function", "view on a non-contiguous tensor")):
        outputs = _cell(extension_nb, marker).outputs
        kinds = [o.output_type for o in outputs]
        assert kinds.index("error") < kinds.index("display_data"), kinds
        text = _text(outputs)
        assert f"torchdoctor: {title}" in text and "cause:" in text and "fix:" in text and "chapter" in text
    assert "in_features=128" in _text(_cell(extension_nb, "# top level").outputs)


def test_extension_is_silent_after_unloading(extension_nb):
    after = _cell(extension_nb, "# after unloading").outputs
    assert [o.output_type for o in after] == ["error"]


def test_cheatsheet_notebook_runs(tmp_path):
    nb = _execute(ROOT / "course/cheatsheet.ipynb", tmp_path)
    text = _text(_cell(nb, "cheatsheet_table()").outputs)
    assert "mat1 and mat2 shapes cannot be multiplied" in text and "Weights only load failed" in text
    assert "checked on" in text and "CUDA runner only" in text
