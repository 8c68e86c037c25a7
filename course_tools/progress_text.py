"""Progress bars in executed notebooks, as text.

Chapters show ``tqdm.auto`` progress bars on long loops. In JupyterLab they are widgets; in a notebook executed by
papermill the output keeps only the widget's first text ("0%|...| 0/20") and the widget state in the notebook's
metadata, which a static page cannot render without JavaScript from the internet. ``progress_bars_as_text``
rewrites each such output into the text of the bar's final state, so the executed copies in build/ and the course
site read "epochs: 100%|##########| 20/20 [00:03<00:00, 6.1it/s]".
"""

from __future__ import annotations

import html

from nbformat import NotebookNode

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
BAR_WIDTH = 10


def _child_text(model: dict) -> str:
    state = model.get("state", {})
    if model.get("model_name") == "FloatProgressModel":
        high = state.get("max") or 1
        filled = round(BAR_WIDTH * min(max(state.get("value", 0) / high, 0), 1))
        return "|" + "#" * filled + " " * (BAR_WIDTH - filled) + "|"
    return html.unescape(str(state.get("value", ""))).replace("\u2007", " ").strip()


def bar_text(model_id: str, models: dict) -> str | None:
    """The final text of tqdm's progress widget ``model_id`` (an HBox of HTML, progress, HTML), or None."""
    box = models.get(model_id, {})
    if box.get("model_name") != "HBoxModel":
        return None
    children = [models.get(ref.removeprefix("IPY_MODEL_"), {}) for ref in box.get("state", {}).get("children", [])]
    if not any(child.get("model_name") == "FloatProgressModel" for child in children):
        return None
    left, *rest = (_child_text(child) for child in children)
    return f"{left}{' '.join(rest)}" if left else " ".join(rest)


def progress_bars_as_text(nb: NotebookNode) -> int:
    """Replace, in place, every progress-bar widget output by its final text; return how many were replaced."""
    models = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    views = replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            views += 1
            text = bar_text(view.get("model_id", ""), models)
            if text is not None:
                output["data"] = {"text/plain": text}
                replaced += 1
    if replaced and replaced == views:  # other widgets still need their state
        nb.metadata.pop("widgets", None)
    return replaced
