"""Per-submission costs of nbgrader that change no result, removed where the course grades (``install``).

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

Then hw3 (58 submissions, two workers), with both of the above in place. cProfile says 1.43 s of worker CPU per
submission, but it overstates these many small calls four- to eightfold; the grading thread's own CPU clock
(``pthread_getcpuclockid``, sampled every 2 ms by another thread) says 0.333 s, of which 54 ms in the ten
``Gradebook.__init__``. ``gradebook_init`` does what nbgrader's does, less two costs:

- ``Base.metadata.create_all`` (12 ms per submission): it asks SQLite, one ``PRAGMA table_info`` per table, whether
  each of nbgrader's 13 tables exists, right after nbgrader listed the database's tables (``get_table_names``, for
  its ``db_exists``). Here that list answers it: when every table is in it, ``create_all`` would create nothing and
  is not called; else it is called as nbgrader does. The database is asked each time, nothing is remembered: the
  worker writes its gradebook file again before every submission.
- ``check_course`` (22 ms): an ORM query for the course and a commit of nothing. Here one Core ``SELECT`` looks for
  the course's row; nbgrader's ``check_course`` runs when it is absent (it adds it), as before.

Only for SQLite databases (the workers' private gradebooks), and only while nbgrader's two functions are the ones
this was written against (their source digests, ``GRADEBOOK_SOURCES``); else nbgrader's own runs. After: 35 ms per
submission in ``Gradebook.__init__``, 0.315 s of grading-thread CPU per submission (the whole hw3 corpus command:
116.9 s CPU before, 121.8 s after, both at load averages 5-10 on two cores: within that run-to-run noise).

Left as nbgrader has them, measured the same way: nbformat's validation, 9 ms per submission in all (5 ms of it
nbconvert's validation after each preprocessor), too little to trade for a notebook that is invalid between two
preprocessors being failed differently; the database work itself (SQLite statements, 72 ms) is nbgrader's
bookkeeping of the grades.

If a new nbgrader renames what this replaces, grading only gets slower: no protection depends on it.
"""

from __future__ import annotations

import hashlib
import inspect
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


# sha256 of the source of nbgrader's Gradebook.__init__ and Gradebook.check_course (nbgrader 0.9.6), whose work
# ``gradebook_init`` does: with other versions of them, nbgrader's own runs.
GRADEBOOK_SOURCES = ("c60c420276e8355e", "a083421ba93415aa")


def _source_digest(function: t.Any) -> str:
    try:
        return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return ""


def gradebook_init(self: t.Any, db_url: str, course_id: str = "default_course", authenticator: t.Any = None) -> None:
    """nbgrader's ``Gradebook.__init__`` (0.9.6) for SQLite, without ``create_all`` when the database already has
    every table, and without ``check_course`` when it already has the course (see the module's docstring)."""
    import nbgrader.api as api
    from sqlalchemy.engine import make_url

    if nbgrader_gradebook_init is not None and make_url(db_url).get_backend_name() != "sqlite":
        return nbgrader_gradebook_init(self, db_url, course_id, authenticator)
    self.engine = api.create_engine(db_url, echo=False, future=True)
    self.db = api.scoped_session(api.sessionmaker(autoflush=True, bind=self.engine, future=True))

    names = set(api.inspect(self.engine).get_table_names())
    db_exists = len(names) > 0
    if not all(table.name in names for table in api.Base.metadata.tables.values()):
        api.Base.metadata.create_all(bind=self.engine)

    if not db_exists:
        alembic_version = api.get_alembic_version()
        self.db.execute(api.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL);"))
        self.db.execute(api.text(f"INSERT INTO alembic_version (version_num) VALUES ('{alembic_version}');"))
        self.db.commit()

    if not _has_course(self.engine, course_id):
        self.check_course(course_id=course_id)
    self.course_id = course_id
    self.authenticator = authenticator


_course_query: list[t.Any] = []  # SELECT id FROM course WHERE id = :course_id, built once


def _has_course(engine: t.Any, course_id: str) -> bool:
    if not _course_query:
        import nbgrader.api as api
        from sqlalchemy import bindparam, select

        table = api.Course.__table__
        _course_query.append(select(table.c.id).where(table.c.id == bindparam("course_id")))
    with engine.connect() as connection:
        return connection.execute(_course_query[0], {"course_id": course_id}).first() is not None


nbgrader_gradebook_init: t.Callable[..., None] | None = None  # nbgrader's own, kept by ``install``


def install() -> None:
    """Replace all three in the running process (idempotent)."""
    global nbgrader_gradebook_init
    import nbgrader.api
    import nbgrader.nbgraderformat.common

    if not isinstance(nbgrader.nbgraderformat.common.jsonschema, SchemaCheckedOnce):
        nbgrader.nbgraderformat.common.jsonschema = SchemaCheckedOnce()
    if not isinstance(nbgrader.api.create_engine, EngineKeeper):
        nbgrader.api.create_engine = EngineKeeper(nbgrader.api.create_engine)
    gradebook = nbgrader.api.Gradebook
    if gradebook.__init__ is not gradebook_init and (
            (_source_digest(gradebook.__init__), _source_digest(gradebook.check_course)) == GRADEBOOK_SOURCES):
        nbgrader_gradebook_init = gradebook.__init__
        gradebook.__init__ = gradebook_init
