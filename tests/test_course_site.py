"""The parts of the course site (course_tools/site.py) that need no browser: widgets drawn from saved state,
progress text, the check that keeps solutions off the site. tests/browser/test_site.py looks at the pages in
Chromium."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_tools import site
from course_tools.release import REPO


def tqdm_notebook() -> nbformat.NotebookNode:
    """What papermill saves for `for _ in tqdm(range(6), desc="training")`: a widget view and its final state."""
    state = {
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_left", "IPY_MODEL_p", "IPY_MODEL_r"]}},
        "left": {"model_name": "HTMLModel", "state": {"value": "training: 100%"}},
        "p": {"model_name": "FloatProgressModel", "state": {"value": 6, "max": 6, "bar_style": "success"}},
        "r": {"model_name": "HTMLModel", "state": {"value": " 6/6 [00:01&lt;00:00,  5.2it/s]"}},
    }
    output = new_output("display_data", data={
        site.WIDGET_VIEW: {"model_id": "bar", "version_major": 2, "version_minor": 0},
        "text/plain": "training:   0%|          | 0/6 [00:00<?, ?it/s]",
    })
    nb = new_notebook(cells=[new_code_cell("for _ in tqdm(range(6)): ...", outputs=[output])])
    nb.metadata["widgets"] = {site.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    return nb


def test_a_tqdm_bar_is_drawn_as_it_ended():
    nb = tqdm_notebook()
    assert site.static_widgets(nb) == 1
    data = nb.cells[0].outputs[0]["data"]
    assert site.WIDGET_VIEW not in data and "widgets" not in nb.metadata
    assert '<progress class="td-progress td-success" value="6" max="6">' in data["text/html"]
    assert "training: 100%" in data["text/html"] and "6/6" in data["text/html"]


def test_text_progress_keeps_what_a_terminal_shows():
    nb = new_notebook(cells=[new_code_cell("", outputs=[
        new_output("stream", name="stderr", text="epoch:  50%|#  | 1/2\repoch: 100%|###| 2/2\ndone\n")])])
    site.settle_carriage_returns(nb)
    assert nb.cells[0].outputs[0]["text"] == "epoch: 100%|###| 2/2\ndone\n"


def test_a_solution_cell_is_found_wherever_it_is_published(tmp_path):
    solutions = sorted((REPO / "solutions").glob("*/*.ipynb"))
    assert solutions
    leaked = tmp_path / "leak.ipynb"
    nbformat.write(nbformat.read(solutions[0], as_version=4), leaked)
    assert site.leaked_solutions([leaked])
    starter = REPO / "exercises" / solutions[0].parent.name / solutions[0].name
    assert not site.leaked_solutions([starter])
