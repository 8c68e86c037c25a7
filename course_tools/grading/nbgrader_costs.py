"""Two per-submission costs of nbgrader that change no result, removed where the course grades (``install``).

Measured with cProfile (CPU time) on a grading worker, hw1, 7 submissions: 1.98 s of the worker's CPU per
submission besides the kernel's, of which

- 0.26 s in nbgrader's metadata validation (``nbgraderformat``, every cell, twice per submission): it calls
  ``jsonschema.validate``, which checks the schema itself (nbgrader's constant) before validating each cell. Here the
  schema is checked once and its validator kept; each cell is validated as ``jsonschema.validate`` does it (the
  same validator class, the same ``best_match`` error).
- 0.23 s in opening gradebooks: nbgrader opens one ``Gradebook`` ten times per submission, and each creates a new
  SQLAlchemy engine, whose cache of compiled statements starts empty. Here an engine is kept per database URL (the
  most recent few) and handed to the next ``Gradebook`` of the same URL; ``Gradebook.close`` still disposes of its
  connections, and a disposed engine opens new ones when used again.

If a new nbgrader renames what this replaces, grading only gets slower: no protection depends on it.
"""

from __future__ import annotations

import typing as t
from collections import OrderedDict

import jsonschema

ENGINES_KEPT = 8  # a worker grades one submission (one scratch gradebook) at a time


class SchemaCheckedOnce:
    """Stands in for the ``jsonschema`` module in ``nbgrader.nbgraderformat.common``: its ``validate`` checks each
    schema once; every other name is jsonschema's own."""

    def __init__(self) -> None:
        self._validators: dict[int, tuple[t.Any, t.Any]] = {}  # id(schema) -> (schema, validator): kept alive

    def validate(self, instance: t.Any, schema: t.Any) -> None:
        kept = self._validators.get(id(schema))
        if kept is None or kept[0] is not schema:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            kept = self._validators[id(schema)] = (schema, cls(schema))
        error = jsonschema.exceptions.best_match(kept[1].iter_errors(instance))
        if error is not None:
            raise error

    def __getattr__(self, name: str) -> t.Any:
        return getattr(jsonschema, name)


class EngineKeeper:
    """Stands in for ``create_engine`` in ``nbgrader.api``: the same engine again for the same URL and options."""

    def __init__(self, create_engine: t.Callable[..., t.Any]) -> None:
        self.create_engine = create_engine
        self._engines: OrderedDict[tuple, t.Any] = OrderedDict()

    def __call__(self, url: t.Any, **options: t.Any) -> t.Any:
        key = (str(url), tuple(sorted(options.items())))
        if key in self._engines:
            self._engines.move_to_end(key)
            return self._engines[key]
        engine = self._engines[key] = self.create_engine(url, **options)
        while len(self._engines) > ENGINES_KEPT:
            _, oldest = self._engines.popitem(last=False)
            oldest.dispose()
        return engine


def install() -> None:
    """Replace both in the running process (idempotent)."""
    import nbgrader.api
    import nbgrader.nbgraderformat.common

    if not isinstance(nbgrader.nbgraderformat.common.jsonschema, SchemaCheckedOnce):
        nbgrader.nbgraderformat.common.jsonschema = SchemaCheckedOnce()
    if not isinstance(nbgrader.api.create_engine, EngineKeeper):
        nbgrader.api.create_engine = EngineKeeper(nbgrader.api.create_engine)
