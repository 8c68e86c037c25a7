"""The course manifest (course.toml) agrees with the files on disk, and everything that lists chapters or
assignments reads it instead of keeping a list of its own."""

import re

import pytest

from course_tools import readme_table
from course_tools.grading_corpus import CORPUS
from course_tools.release import COURSE, REPO
from course_tools.run_notebooks import default_notebooks
from torchdoctor.manifest import ManifestError, load_manifest

MANIFEST = load_manifest()
READY = MANIFEST.assignment_names("ready")


def _notebooks_in(folder: str) -> set[str]:
    return {str(p.relative_to(REPO)) for p in (REPO / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts}


def _folders_in(path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")} if path.is_dir() else set()


@pytest.mark.parametrize("chapter", MANIFEST.chapters, ids=lambda c: c.slug)
def test_a_chapter_notebook_exists_exactly_when_the_chapter_is_ready(chapter):
    exists = (REPO / chapter.notebook).is_file()
    if chapter.status == "ready":
        assert exists, f"course.toml marks {chapter.slug} ready, but {chapter.notebook} does not exist"
    else:
        assert not exists, f"{chapter.notebook} exists: mark {chapter.slug} ready in course.toml"
    assert chapter.notebook.startswith(f"course/{chapter.number:02d}_"), "name chapter notebooks course/NN_slug"


def test_reference_notebooks_exist():
    missing = [r.notebook for r in MANIFEST.references if not (REPO / r.notebook).is_file()]
    assert not missing, f"course.toml lists reference notebooks that do not exist: {missing}"


def test_every_notebook_in_course_is_in_the_manifest():
    listed = {c.notebook for c in MANIFEST.chapters} | {r.notebook for r in MANIFEST.references}
    unlisted = sorted(_notebooks_in("course") - listed)
    assert not unlisted, f"add these to course.toml (a [[chapter]] or a [[reference]]): {unlisted}"


def test_nbgrader_sources_are_the_ready_assignments():
    assert _folders_in(COURSE / "source") == set(READY), "autograder/source/ must hold exactly the ready assignments"
    for name in READY:
        assert (COURSE / "source" / name / f"{name}.ipynb").is_file(), f"autograder/source/{name}/{name}.ipynb"


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_generated_homework_is_there_for_ready_assignments_only(folder):
    assert _folders_in(REPO / folder) == set(READY), f"{folder}/ must hold exactly the ready assignments"
    expected = {f"{folder}/{name}/{name}.ipynb" for name in READY}
    assert _notebooks_in(folder) == expected, "run `make release`"


def test_a_grading_corpus_for_each_ready_assignment_and_no_other():
    assert {p.stem for p in CORPUS.glob("*.toml")} == set(READY), "tests/grading_corpus/<assignment>.toml"


@pytest.mark.parametrize("assignment", MANIFEST.assignments, ids=lambda a: a.name)
def test_an_assignment_belongs_to_a_chapter_that_is_ready_first(assignment):
    assert assignment.chapter, f"no [[chapter]] names {assignment.name} as its homework"
    if assignment.status == "ready":
        assert MANIFEST.chapter(assignment.chapter).status == "ready", (
            f"{assignment.name} is ready, its chapter {assignment.chapter} is not")


def test_catalog_chapters_are_manifest_chapters():
    from torchdoctor.catalog import CATALOG

    unknown = sorted({e.chapter for e in CATALOG} - {c.slug for c in MANIFEST.chapters})
    assert not unknown, f"catalog entries name chapters course.toml does not have: {unknown}"


def test_the_notebook_runner_runs_what_the_manifest_lists():
    expected = [c.notebook for c in MANIFEST.chapters if c.status == "ready"]
    expected += [r.notebook for r in MANIFEST.references]
    expected += [f"{folder}/{a}/{a}.ipynb" for folder in ("solutions", "exercises") for a in READY]
    assert [str(p.relative_to(REPO)) for p in default_notebooks()] == expected


def test_the_chinese_edition_covers_every_chapter_reference_and_homework_with_a_catalogue():
    from course_tools import i18n

    translated = i18n.notebooks()  # raises on a zh_CN value other than "ready", or one on a notebook not ready
    expected = [c.notebook for c in MANIFEST.chapters if c.status == "ready"]
    expected += [r.notebook for r in MANIFEST.references]
    expected += [f"exercises/{a}/{a}.ipynb" for a in READY]
    assert list(translated) == expected
    missing = [str(i18n.catalogue_path(n).relative_to(REPO)) for n in translated
               if not i18n.catalogue_path(n).is_file()]
    assert not missing, f"no catalogue for {missing}: run `make i18n-update`"


@pytest.mark.parametrize("table, message", [
    ('[[chapter]]\nnotebook = "course/01_one.ipynb"\nstatus = "ready"\nzh_CN = "done"\n',
     r"must be \"ready\" or absent"),
    ('[[assignment]]\nname = "hw9"\nstatus = "planned"\nzh_CN = "ready"\n', "on a assignment that is not ready itself"),
])
def test_a_wrong_zh_cn_field_is_a_clear_error(tmp_path, table, message):
    from course_tools import i18n

    path = tmp_path / "course.toml"
    path.write_text(table, encoding="utf-8")
    with pytest.raises(i18n.ManifestFieldError, match=message):
        i18n.notebooks(path)


def test_the_readme_chapter_table_is_generated_from_the_manifest():
    _, current, _ = readme_table.split((REPO / "README.md").read_text(encoding="utf-8"))
    assert current == readme_table.generated(MANIFEST), "run `python -m course_tools.readme_table --write`"


@pytest.mark.parametrize("path", ["Makefile", "course_tools/release.py", "course_tools/grading/autograde.py",
                                  "course_tools/grading_corpus.py", ".github/workflows/ci.yml"])
def test_no_hard_coded_assignment_lists(path):
    text = (REPO / path).read_text(encoding="utf-8")
    named = [a.name for a in MANIFEST.assignments if a.name in text]
    assert not named, f"{path} names assignments {named}: read them from course.toml"
    # discovery by listing folders, as `ls source` or (course / "source").iterdir() did
    listing = re.findall(r"ls\s+\S*source|[\"']source[\"']\s*\)\s*\.\s*(?:iterdir|glob|rglob)\(|"
                         r"grading_corpus[\"']?\s*\)?\s*\.\s*glob\(|CORPUS\.glob\(", text)
    assert not listing, f"{path} discovers assignments by listing folders ({listing}); use course.toml"


# --- the loader's errors on a malformed manifest ---------------------------------------------------------

CHAPTER = '[[chapter]]\nnumber = 1\nslug = "one"\ntitle = "One"\nnotebook = "course/01_one.ipynb"\ncovers = "x"\n'


@pytest.mark.parametrize("text, message", [
    ("[[chapter]]\nnumber = ", "not valid TOML"),
    (CHAPTER.replace('slug = "one"\n', ""), r"chapter #1: `slug` must be a str"),
    (CHAPTER.replace("number = 1", 'number = "1"') + 'status = "ready"\n', r"chapter #1: `number` must be a int"),
    (CHAPTER + 'status = "done"\n', r"status must be one of \('ready', 'planned'\), got 'done'"),
    (CHAPTER + 'status = "ready"\n' + CHAPTER.replace("number = 1", "number = 2") + 'status = "ready"\n',
     "duplicate chapter slug: one"),
    (CHAPTER + 'status = "ready"\nhomework = "hw9"\n', r"chapters name homework with no \[\[assignment\]\]: hw9"),
    (CHAPTER + 'status = "ready"\nhomework = 9\n', r"chapter #1: `homework` must be a str"),
    ('[[assignment]]\nname = "hw1"\nstatus = "ready"\n[[assignment]]\nname = "hw1"\nstatus = "planned"\n',
     "duplicate assignment name: hw1"),
    ('[[reference]]\nnotebook = "course/cheatsheet.ipynb"\ntitle = "Cheat sheet"\n', r"reference #1: `covers`"),
    ('[chapter]\nnumber = 1\n', r"`chapter` must be an array of tables, each written \[\[chapter\]\]"),
])
def test_a_malformed_manifest_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "course.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


def test_a_missing_manifest_says_where_it_was_looked_for(tmp_path):
    with pytest.raises(ManifestError, match="no course manifest at .*TORCHDOCTOR_MANIFEST"):
        load_manifest(tmp_path / "course.toml")
