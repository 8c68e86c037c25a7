"""course_tools.grading.nbgrader_costs: nbgrader's metadata validation and gradebooks give the same answers with the
schema checked once, the engine kept per URL, and gradebooks opened without the schema and course checks that
would change nothing."""

import shutil
import sqlite3

import jsonschema
import pytest
from nbformat.v4 import new_code_cell

from course_tools.grading import nbgrader_costs


@pytest.fixture
def installed(monkeypatch):
    import nbgrader.api
    import nbgrader.nbgraderformat.common

    monkeypatch.setattr(nbgrader.nbgraderformat.common, "jsonschema", nbgrader.nbgraderformat.common.jsonschema)
    from course_tools.grading.writer import alembic_head

    monkeypatch.setattr(nbgrader.api, "create_engine", nbgrader.api.create_engine)
    monkeypatch.setattr(nbgrader.api.Gradebook, "__init__", nbgrader.api.Gradebook.__init__)
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", alembic_head)  # a new gradebook, alembic off PATH
    nbgrader_costs.install()
    nbgrader_costs.install()  # idempotent: not wrapped twice
    assert isinstance(nbgrader.nbgraderformat.common.jsonschema, nbgrader_costs.SchemaCheckedOnce)
    assert not isinstance(nbgrader.api.create_engine.create_engine, nbgrader_costs.EngineKeeper)
    # the nbgrader this course pins: a new one's Gradebook.__init__ or check_course need a look (and new digests)
    assert nbgrader.api.Gradebook.__init__ is nbgrader_costs.gradebook_init
    assert nbgrader_costs.nbgrader_gradebook_init is not nbgrader_costs.gradebook_init


def _cell(**nbgrader_meta):
    return new_code_cell("x = 1", metadata={"nbgrader": {"schema_version": 3, "grade_id": "a", "grade": False,
                                                          "solution": True, "locked": False, **nbgrader_meta}})


@pytest.mark.parametrize("meta", [{}, {"points": "three"}, {"grade": "yes"}, {"grade_id": 5}])
def test_cell_metadata_validation_gives_what_jsonschema_validate_gives(installed, meta):
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    cell = _cell(**meta)
    try:
        jsonschema.validate(cell.metadata["nbgrader"], MetadataValidatorV3().schema)
        expected = None
    except jsonschema.ValidationError as error:
        expected = error.message
    try:
        MetadataValidatorV3().validate_cell(cell)
        found = None
    except jsonschema.ValidationError as error:
        found = error.message
    assert found == expected
    assert (expected is None) == (meta == {})


def test_gradebooks_of_one_url_share_an_engine_and_see_each_others_writes(installed, tmp_path):
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as first:
        first.update_or_create_student("s1")
        engine = first.engine
    with Gradebook(url) as second:
        assert second.engine is engine
        assert [s.id for s in second.students] == ["s1"]
    with Gradebook(f"sqlite:///{tmp_path / 'other.db'}") as other:
        assert other.engine is not engine and other.students == []


def test_only_the_most_recent_engines_are_kept(installed, tmp_path):
    import nbgrader.api

    keeper = nbgrader.api.create_engine
    engines = [keeper(f"sqlite:///{tmp_path / f'{i}.db'}") for i in range(nbgrader_costs.ENGINES_KEPT + 2)]
    assert keeper(f"sqlite:///{tmp_path / '0.db'}") is not engines[0]  # evicted, disposed, made again
    assert keeper(f"sqlite:///{tmp_path / f'{len(engines) - 1}.db'}") is engines[-1]


# ---- opening a gradebook -------------------------------------------------------------------------------------------

def _dump(path):
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def _open(path, course_id, stock):
    """A gradebook opened and closed on ``path``, by nbgrader's own ``__init__`` or by ``gradebook_init``."""
    from nbgrader.api import Gradebook

    init = nbgrader_costs.nbgrader_gradebook_init if stock else nbgrader_costs.gradebook_init
    gradebook = Gradebook.__new__(Gradebook)
    init(gradebook, f"sqlite:///{path}", course_id)
    gradebook.close()


def _prepare(state, path):
    """A database file as a worker may find it."""
    if state == "no file":
        return
    if state == "empty file":
        path.write_bytes(b"")
        return
    _open(path, "other" if state == "another course" else "course101", stock=True)
    connection = sqlite3.connect(path)
    if state == "a table missing":
        connection.execute("DROP TABLE task_cells")
    if state == "the course removed":
        connection.execute("DELETE FROM course")
    connection.commit()
    connection.close()


STATES = ["no file", "empty file", "complete", "another course", "a table missing", "the course removed"]


@pytest.mark.parametrize("state", STATES)
def test_a_gradebook_opened_leaves_the_database_as_nbgraders_own_leaves_it(installed, tmp_path, state):
    stock, ours = tmp_path / "stock" / "gradebook.db", tmp_path / "ours" / "gradebook.db"
    stock.parent.mkdir()
    ours.parent.mkdir()
    _prepare(state, stock)
    if stock.exists():
        shutil.copy(stock, ours)
    for _ in range(2):  # the second time with the engine kept from the first
        _open(stock, "course101", stock=True)
        _open(ours, "course101", stock=False)
        assert _dump(ours) == _dump(stock)
    assert any("INSERT INTO \"course\" VALUES('course101'" in line for line in _dump(ours))
    assert any("alembic_version" in line for line in _dump(ours))


def test_a_gradebook_file_rewritten_under_a_kept_engine_is_asked_again(installed, tmp_path):
    """The worker writes its gradebook file again before every submission: whatever it held before, what the
    new file lacks is created (tables, the course), as nbgrader does."""
    template = tmp_path / "template.db"
    _prepare("a table missing", template)
    sqlite3.connect(template).execute("DELETE FROM course").connection.commit()
    gradebook, reference = tmp_path / "gradebook.db", tmp_path / "reference.db"
    for path, stock in ((gradebook, False), (reference, True)):
        _open(path, "course101", stock=stock)  # complete, the engine kept
        path.write_bytes(template.read_bytes())
        _open(path, "course101", stock=stock)
    assert _dump(gradebook) == _dump(reference)
    assert any("CREATE TABLE task_cells" in line for line in _dump(gradebook))


def test_create_all_and_check_course_run_only_when_they_would_change_something(installed, tmp_path, monkeypatch):
    import nbgrader.api

    calls = []
    create_all, check_course = nbgrader.api.Base.metadata.create_all, nbgrader.api.Gradebook.check_course
    monkeypatch.setattr(nbgrader.api.Base.metadata, "create_all",
                        lambda **kw: calls.append("create_all") or create_all(**kw))
    monkeypatch.setattr(nbgrader.api.Gradebook, "check_course",
                        lambda self, **kw: calls.append("check_course") or check_course(self, **kw))
    path = tmp_path / "gradebook.db"
    _open(path, "course101", stock=False)
    assert calls == ["create_all", "check_course"]
    calls.clear()
    _open(path, "course101", stock=False)
    assert calls == []
    _open(path, "course102", stock=False)
    assert calls == ["check_course"]


def test_other_databases_open_as_nbgrader_opens_them(installed, monkeypatch):
    called = []
    monkeypatch.setattr(nbgrader_costs, "nbgrader_gradebook_init", lambda *args: called.append(args[1:]))
    from nbgrader.api import Gradebook

    Gradebook("postgresql://grader@db/gradebook", "course101")
    assert called == [("postgresql://grader@db/gradebook", "course101", None)]
