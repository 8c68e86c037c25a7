"""course_tools.grading.nbgrader_costs: nbgrader's metadata validation and gradebooks give the same answers with the
schema checked once and the engine kept per URL."""

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
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", alembic_head)  # a new gradebook, alembic off PATH
    nbgrader_costs.install()
    nbgrader_costs.install()  # idempotent: not wrapped twice
    assert isinstance(nbgrader.nbgraderformat.common.jsonschema, nbgrader_costs.SchemaCheckedOnce)
    assert not isinstance(nbgrader.api.create_engine.create_engine, nbgrader_costs.EngineKeeper)


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
