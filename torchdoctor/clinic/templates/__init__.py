"""The clinic's working scripts: each trains a small model on a CPU in seconds and saves ``checkpoint.pt``.

A template reads ``CLINIC_SEED`` and ``CLINIC_OUT`` from the environment, saves ``{"model": state_dict, ...}`` to
``CLINIC_OUT/checkpoint.pt`` and defines ``build_model()`` and ``predict(model, X)``: the grader
(``torchdoctor.clinic.runner``) loads the checkpoint into a fresh model and measures it on data of its own.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ClinicError", "TEMPLATES", "template_path", "template_source"]


class ClinicError(ValueError):
    """An unknown template or operator, or an edit whose anchor is not where the operator expects it."""

_HERE = Path(__file__).parent

# name -> (what it is, number of classes (None: regression, scored by R^2), lowest score a clean run must reach)
TEMPLATES: dict[str, tuple[str, int | None, float]] = {
    "digits_mlp": ("an MLP on scikit-learn's digits", 10, 0.9),
    "digits_cnn": ("a small CNN on scikit-learn's digits", 10, 0.85),
    "linear_regression": ("linear regression on generated data", None, 0.95),
    "text_classifier": ("a bag-of-embeddings classifier on generated token sequences", 4, 0.85),
    "ddp_digits": ("two-process DistributedDataParallel on gloo (CPU), digits MLP", 10, 0.85),
}


def template_path(name: str) -> Path:
    """The file of a template (of its base template, for a surface variant such as ``digits_mlp~1``)."""
    base = name.split("~", 1)[0]
    if base not in TEMPLATES:
        raise ClinicError(f"unknown template {base!r}; known: {', '.join(TEMPLATES)}")
    return _HERE / f"{base}.py"


def template_source(name: str) -> str:
    """A template's working script; a surface variant's is its base template's, renamed (``surface.rename``)."""
    source = template_path(name).read_text()
    if "~" not in name:
        return source
    from torchdoctor.clinic.surface import rename

    return rename(source, name)
