"""The course in Chinese (issue 24): translation catalogues of the notebooks' markdown cells, the Chinese notebooks
built from them, and the checks that keep both in step with the English.

    python -m course_tools.i18n update   # extract the English text, merge it into locale/zh_CN/<path>.po
    python -m course_tools.i18n build    # write build/zh_CN/<path>.ipynb from the English notebook + catalogue
    python -m course_tools.i18n check    # what `make i18n-check` runs (part of `make test`)
    python -m course_tools.i18n run      # the built Chinese notebooks through the notebook runner's checks

One catalogue per notebook, ``locale/zh_CN/<notebook path without .ipynb>.po``, for every chapter and reference
notebook of course.toml and every assignment's student notebook (exercises/<a>/<a>.ipynb). Markdown cells only:
``msgctxt`` is the cell id, ``msgid`` a paragraph, list item, table cell or heading as mdpo splits Markdown, and
the entries follow the cells' order. Code cells, outputs and all metadata are copied unchanged into the Chinese
notebook, so it runs exactly the same code.

Merging has gettext's msgmerge semantics, done here with polib (no system gettext needed): an entry whose English
is unchanged keeps its translation; an edited paragraph gets the old Chinese marked fuzzy (with the old English as
``#| msgid``); a paragraph that is gone becomes obsolete (``#~``) when it had a translation.

A notebook whose Chinese edition is ready is marked ``zh_CN = "ready"`` on its [[chapter]], [[reference]] or
[[assignment]] in course.toml. Its catalogue must be complete (no untranslated, fuzzy or obsolete entry) and every
translation must keep its English's code spans, URLs and link targets, math, requirement ids and numbers, and use
the glossary's terms (locale/zh_CN/glossary.tsv). For the other notebooks the check prints the translated share
and lists the same problems as warnings.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import polib

REPO = Path(__file__).resolve().parent.parent
LANGUAGE = "zh_CN"
LOCALE = REPO / "locale"
CATALOGUES = LOCALE / LANGUAGE
GLOSSARY = CATALOGUES / "glossary.tsv"
BUILD = REPO / "build" / LANGUAGE
MANIFEST = REPO / "course.toml"
# explain()'s texts: the gettext domain torchdoctor (torchdoctor/explain_i18n.py). Its Chinese is ready when the
# cheat sheet's is (the cheat sheet is made of them).
TORCHDOCTOR_PO = CATALOGUES / "LC_MESSAGES" / "torchdoctor.po"
TORCHDOCTOR_NAME = "torchdoctor explain() (LC_MESSAGES/torchdoctor.po)"
TORCHDOCTOR_READY_WITH = "course/cheatsheet.ipynb"
READY = "ready"
# Below this similarity an edited paragraph is treated as new rather than as a fuzzy match of the old one.
FUZZY_CUTOFF = 0.6
WRAPWIDTH = 78

HEADER = {
    "Project-Id-Version": "torchdoctor-course",
    "Report-Msgid-Bugs-To": "",
    "PO-Revision-Date": "YEAR-MO-DA HO:MI+ZONE",
    "Last-Translator": "FULL NAME <EMAIL@ADDRESS>",
    "Language-Team": "Chinese (simplified)",
    "Language": LANGUAGE,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
    "X-Generator": "course_tools.i18n",
}


# ---------------------------------------------------------------------------------------------------------------
# Which notebooks, and where their catalogues and Chinese editions live


class ManifestFieldError(ValueError):
    pass


def notebooks(manifest: Path = MANIFEST) -> dict[str, bool]:
    """Every translated notebook (a path relative to the repository) -> whether its Chinese edition is ready.

    The field is ``zh_CN = "ready"`` on a [[chapter]], [[reference]] or [[assignment]] of course.toml; absent, the
    translation is in progress. Any other value, or the field on a chapter or assignment that is not ready itself,
    is an error."""
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    found: dict[str, bool] = {}
    for kind in ("chapter", "reference", "assignment"):
        for i, table in enumerate(data.get(kind, [])):
            where = f"{manifest.name} {kind} #{i + 1}"
            value = table.get(LANGUAGE)
            if value is not None and value != READY:
                raise ManifestFieldError(f"{where}: `{LANGUAGE}` must be \"{READY}\" or absent, got {value!r}")
            if kind != "reference" and table.get("status") != "ready":
                if value is not None:
                    raise ManifestFieldError(f"{where}: `{LANGUAGE}` on a {kind} that is not ready itself")
                continue
            name = table.get("name")
            notebook = f"exercises/{name}/{name}.ipynb" if kind == "assignment" else table["notebook"]
            found[notebook] = value == READY
    return found


def catalogue_path(notebook: str) -> Path:
    return CATALOGUES / Path(notebook).with_suffix(".po")


def built_path(notebook: str) -> Path:
    return BUILD / notebook


# ---------------------------------------------------------------------------------------------------------------
# Extraction


def _markdown_entries(source: str) -> list[str]:
    """The msgids of one markdown cell, in order, as mdpo splits it (paragraphs, list items, table cells, headings)."""
    from mdpo.md2po import markdown_to_pofile

    if not source.strip():
        return []
    pofile = markdown_to_pofile(source, wrapwidth=0, location=False)
    seen: list[str] = []
    for entry in pofile:
        if entry.msgid and entry.msgid not in seen:
            seen.append(entry.msgid)
    return seen


_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _headings(source: str) -> list[str]:
    found, fenced = [], False
    for line in source.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            found.append(f"{m.group(1)} {m.group(2)}")
    return found


_SUMMARY = re.compile(r"<summary>(.+?)</summary>", re.DOTALL)


def _summaries(source: str) -> list[str]:
    """The titles of <details> boxes (``<summary>Answer</summary>``): HTML, which mdpo leaves out."""
    prose = _FENCED_BLOCK.sub(" ", source)
    return [" ".join(m.group(1).split()) for m in _SUMMARY.finditer(prose)]


def template(notebook: str | Path, root: Path = REPO) -> polib.POFile:
    """The untranslated catalogue (a POT, with the zh_CN header) of a notebook's markdown cells."""
    nb = nbformat.read(root / notebook, as_version=4)
    pot = polib.POFile(wrapwidth=WRAPWIDTH, check_for_duplicates=False)
    pot.metadata = dict(HEADER)
    pot.header = (f"Chinese (zh_CN) text of {Path(notebook).as_posix()}: one entry per paragraph, list item, table "
                  "cell or heading of\nits markdown cells (msgctxt: the cell id). Written by `make i18n-update`; "
                  "translators fill in msgstr\nand keep code spans, URLs, math and numbers as they are "
                  "(docs/authors.md, \"Translating the course\").")
    section = ""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        own = _headings(cell.source)
        context = own[0] if own else (f"after {section}" if section else "before the first heading")
        if own:
            section = own[-1]
        msgids = _markdown_entries(cell.source)
        msgids += [s for s in _summaries(cell.source) if s not in msgids]
        for msgid in msgids:
            pot.append(polib.POEntry(msgctxt=cell.id, msgid=msgid, msgstr="",
                                     comment=f"section: {context}"))
    return pot


def merge(old: polib.POFile | None, pot: polib.POFile) -> polib.POFile:
    """msgmerge semantics, cell by cell (see the module docstring)."""
    merged = polib.POFile(wrapwidth=WRAPWIDTH, check_for_duplicates=False)
    merged.header = pot.header
    merged.metadata = dict(old.metadata) if old is not None else {}
    # The translators' own fields (Last-Translator, PO-Revision-Date) survive an update; the rest is ours.
    merged.metadata = {k: merged.metadata.get(k, v) if k in ("PO-Revision-Date", "Last-Translator",
                                                              "Language-Team") else v for k, v in HEADER.items()}
    previous = list(old) if old is not None else []
    previous += [e for e in (old.obsolete_entries() if old is not None else []) if e not in previous]
    exact = {(e.msgctxt, e.msgid): e for e in previous}
    wanted = {(e.msgctxt, e.msgid) for e in pot}
    unused = [e for e in previous if (e.msgctxt, e.msgid) not in wanted]
    consumed: list[polib.POEntry] = []  # old entries that became a fuzzy match (not obsolete then)
    for ref in pot:
        entry = polib.POEntry(msgctxt=ref.msgctxt, msgid=ref.msgid, msgstr="", comment=ref.comment)
        found = exact.get((ref.msgctxt, ref.msgid))
        if found is not None:
            entry.msgstr = found.msgstr
            entry.tcomment = found.tcomment
            entry.flags = [f for f in found.flags if f != "fuzzy"] + (["fuzzy"] if "fuzzy" in found.flags else [])
            entry.previous_msgid = found.previous_msgid if "fuzzy" in found.flags else None
            entry.previous_msgctxt = found.previous_msgctxt if "fuzzy" in found.flags else None
        elif not _needs_translation(ref.msgid):
            entry.msgstr = ref.msgid
        else:
            match = _fuzzy_match(ref, [e for e in unused if e.msgstr and not any(e is u for u in consumed)])
            if match is not None:
                consumed.append(match)
                entry.msgstr = match.msgstr
                entry.tcomment = match.tcomment
                entry.flags = ["fuzzy"]
                entry.previous_msgid = match.previous_msgid or match.msgid
                if match.msgctxt != ref.msgctxt:
                    entry.previous_msgctxt = match.msgctxt
        merged.append(entry)
    for gone in unused:
        if gone.msgstr and not any(gone is c for c in consumed):
            merged.append(polib.POEntry(msgctxt=gone.msgctxt, msgid=gone.msgid, msgstr=gone.msgstr,
                                        tcomment=gone.tcomment, flags=list(gone.flags), obsolete=True))
    return merged


def _needs_translation(msgid: str) -> bool:
    """False for an entry with no words outside its code spans, math, URLs and requirement ids (a table cell `4` or
    `mat1`): its Chinese is its English, filled in by the merge."""
    prose = _PLACEHOLDER.sub(" ", _REQUIREMENT.sub(" ", _URL.sub(" ", _MATH.sub(" ", _CODE_SPAN.sub(" ", msgid)))))
    return bool(re.search(r"[^\W\d_]", prose))


def _fuzzy_match(ref: polib.POEntry, candidates: list[polib.POEntry]) -> polib.POEntry | None:
    """The old entry an edited paragraph most likely came from: the same English in another cell (a cell whose id
    changed), else the most similar English of the same cell."""
    for old in candidates:
        if old.msgid == ref.msgid:
            return old
    best, score = None, FUZZY_CUTOFF
    for old in candidates:
        if old.msgctxt != ref.msgctxt:
            continue
        ratio = difflib.SequenceMatcher(None, old.msgid, ref.msgid, autojunk=False).ratio()
        if ratio >= score:
            best, score = old, ratio
    return best


def save(pofile: polib.POFile, path: Path) -> bool:
    """Write a catalogue; True when its text changed."""
    text = pofile.__unicode__()
    if not text.endswith("\n"):
        text += "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def load(path: Path) -> polib.POFile:
    return polib.pofile(str(path), encoding="utf-8", wrapwidth=WRAPWIDTH, check_for_duplicates=False)


def update(notebook: str, root: Path = REPO, catalogue: Path | None = None) -> polib.POFile:
    """Extract a notebook's English and merge it into its catalogue (created when missing); returns the result."""
    path = catalogue or catalogue_path(notebook)
    old = load(path) if path.is_file() else None
    merged = merge(old, template(notebook, root))
    save(merged, path)
    return merged


def torchdoctor_template() -> polib.POFile:
    """The untranslated catalogue of the gettext domain ``torchdoctor``: each catalog entry's title, cause, general
    fix and (where it is one template) specific fix, with ``<entry id>/<field>`` as context, then the layouts of a
    printed diagnosis."""
    from course_tools.i18n_library import library_entries
    from torchdoctor.__main__ import NO_TEXT, NOT_FOUND
    from torchdoctor.catalog import CATALOG
    from torchdoctor.catalog._entry import CHECKED_ON
    from torchdoctor.cheatsheet import COLUMNS
    from torchdoctor.explain import HANDLED_MARKDOWN, HANDLED_TEXT, MARKDOWN_LAYOUT, TEXT_LAYOUT
    from torchdoctor.explain_i18n import CHEATSHEET, LABELS, specific_template

    pot = polib.POFile(wrapwidth=WRAPWIDTH, check_for_duplicates=False)
    pot.metadata = dict(HEADER)
    pot.header = ("Chinese (zh_CN) text of torchdoctor's explain(): the error catalog's titles, causes and fixes "
                  "(msgctxt: <entry id>/<field>).\nWritten by `make i18n-update` from torchdoctor/catalog/; the "
                  "patterns stay English. Keep {placeholders}, identifiers\nand numbers as they are.")
    for entry in sorted(CATALOG, key=lambda e: (e.chapter, e.id)):
        note = f"chapter {entry.chapter}; message: {entry.example}"
        for name in ("title", "cause", "fix"):
            pot.append(polib.POEntry(msgctxt=f"{entry.id}/{name}", msgid=getattr(entry, name), comment=note))
        specific = specific_template(entry)
        if specific is not None:
            pot.append(polib.POEntry(msgctxt=f"{entry.id}/specific_fix", msgid=specific, flags=["python-brace-format"],
                                     comment=f"{note}; the fix for this message, {{names}} filled in from it"))
    for layout in (TEXT_LAYOUT, MARKDOWN_LAYOUT):
        pot.append(polib.POEntry(msgctxt=LABELS, msgid=layout, flags=["python-brace-format"],
                                 comment="how a diagnosis prints (as text, as Markdown in a notebook)"))
    for line in (HANDLED_TEXT, HANDLED_MARKDOWN):
        pot.append(polib.POEntry(msgctxt=LABELS, msgid=line, flags=["python-brace-format"],
                                 comment="the line under a diagnosis of an exception that the code handling it "
                                 "followed with another (\"During handling of the above exception\"); "
                                 "{handler_error}: that last exception, \"Type: message\""))
    for message in (NO_TEXT, NOT_FOUND):
        pot.append(polib.POEntry(msgctxt=LABELS, msgid=message, comment="python -m torchdoctor explain"))
    for name in ("chapter", *COLUMNS, *CHECKED_ON.values()):
        pot.append(polib.POEntry(msgctxt=CHEATSHEET, msgid=name, comment="a column name or a 'checked on' value of "
                                 "the cheat sheet and the chapters' summary tables"))
    pot.extend(quiz_entries())
    pot.extend(library_entries())  # the rest of what the library prints, and the chapters' titles
    return pot


def quiz_entries() -> list[polib.POEntry]:
    """torchdoctor.quiz's verdict lines, then every question's staged hints, answer and misconceptions
    (torchdoctor/hints/<notebook>.toml; context ``quiz/<notebook>/<question>/<field>``)."""
    from torchdoctor import hints, quiz

    frame = ("NOT_ANSWERED", "CORRECT", "NOT_YET", "NOT_YET_GIVEN", "HINT", "STUCK", "ANSWER", "RUN_CHECK_FIRST")
    entries = [polib.POEntry(msgctxt=quiz.CONTEXT, msgid=getattr(quiz, name), flags=["python-brace-format"],
                             comment="a verdict of a check-yourself question (torchdoctor.quiz)") for name in frame]
    for notebook in hints.notebooks():
        for question in hints.load(notebook).values():
            texts = [(name, question.context(name), getattr(question, name)) for name in hints.TEXTS]
            texts += [(f"misconception {key}", question.context(f"misconceptions/{key}"), text)
                      for key, text in question.misconceptions.items()]
            entries += [polib.POEntry(msgctxt=context, msgid=text, flags=["python-brace-format"],
                                      comment=f"{notebook} {question.name}: {label}")
                        for label, context, text in texts if text]
    return entries


def update_torchdoctor(catalogue: Path = TORCHDOCTOR_PO) -> polib.POFile:
    old = load(catalogue) if catalogue.is_file() else None
    merged = merge(old, torchdoctor_template())
    save(merged, catalogue)
    return merged


# ---------------------------------------------------------------------------------------------------------------
# The Chinese notebook


def _translations(pofile: polib.POFile) -> dict[str, dict[str, str]]:
    """cell id -> {English: Chinese} for the entries that are translated and not fuzzy."""
    table: dict[str, dict[str, str]] = {}
    for entry in pofile:
        if entry.msgstr and "fuzzy" not in entry.flags and not entry.obsolete:
            table.setdefault(entry.msgctxt or "", {})[entry.msgid] = entry.msgstr
    return table


def translate_markdown(source: str, translations: dict[str, str]) -> str:
    """One markdown cell in Chinese: mdpo renders it again with each translated paragraph replaced."""
    if all(msgid == msgstr for msgid, msgstr in translations.items()):
        return source  # nothing translated yet (a table cell `4` is its own translation): the English, untouched
    from mdpo.po2md import Po2Md

    pofile = polib.POFile()
    for msgid, msgstr in translations.items():
        pofile.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    renderer = Po2Md([], wrapwidth=0)
    renderer.pofiles = [pofile]
    output = renderer.translate(source)
    output = _SUMMARY.sub(lambda m: f"<summary>{translations.get(' '.join(m.group(1).split()), m.group(1))}"
                                    "</summary>", output)
    # mdpo drops an HTML block that closes a paragraph without a blank line (`</details>` after an answer).
    for tag in ("</details>",):
        missing = source.count(tag) - output.count(tag)
        if missing > 0 and source.rstrip().endswith(tag):
            output = output.rstrip("\n") + "\n" + "\n".join([tag] * missing)
    return output.rstrip("\n")


def build_notebook(notebook: str, pofile: polib.POFile, root: Path = REPO) -> nbformat.NotebookNode:
    """The Chinese notebook: the English one with its markdown cells' source translated and its language in the
    metadata (``torchdoctor.language``: torchdoctor speaks it in this notebook's kernel), nothing else changed."""
    english = nbformat.read(root / notebook, as_version=4)
    chinese = copy.deepcopy(english)
    chinese.metadata.setdefault("torchdoctor", {})["language"] = LANGUAGE
    table = _translations(pofile)
    for cell in chinese.cells:
        if cell.cell_type == "markdown" and cell.id in table:
            cell.source = translate_markdown(cell.source, table[cell.id])
    return chinese


def build(notebook: str, root: Path = REPO, out: Path | None = None) -> Path:
    path = out or built_path(notebook)
    pofile = load(catalogue_path(notebook))
    chinese = build_notebook(notebook, pofile, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(chinese, path)
    return path


def run(chosen: list[str], device: str = "cpu", seed: int = 0, full: bool = False, jobs: int = 1,
        out: Path = REPO / "build" / "notebooks") -> int:
    """The Chinese notebooks (build them first) through the notebook runner with the English ones' checks: every
    declared error raised, every check-yourself cell working; a homework starter may fail only where the student has
    work to do. Executed copies go to build/notebooks/build/zh_CN/<path>."""
    from concurrent.futures import ProcessPoolExecutor

    from course_tools.run_notebooks import print_table, resolve_device, run_one

    missing = [n for n in chosen if not built_path(n).is_file()]
    if missing:
        print(f"No Chinese notebook for {missing}: run `make i18n-build`", file=sys.stderr)
        return 2
    device = resolve_device(device)
    parameters = {"DEVICE": device, "FAST": not full, "SEED": seed}
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(chosen)))) as pool:
        futures = [pool.submit(run_one, built_path(n), parameters, out.resolve(), n.startswith("exercises/"))
                   for n in chosen]
        results = [f.result() for f in futures]
    for r in results:
        for problem in r.problems:
            print(f"FAIL {r.path}: {problem}")
    print_table(results, device)
    failed = [r for r in results if r.problems]
    print(f"\n{len(results) - len(failed)} of {len(results)} Chinese notebooks passed their checks.")
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------------------------
# Checks


def without_language(metadata: dict) -> dict:
    """A notebook's metadata without the language the Chinese build adds."""
    metadata = copy.deepcopy(dict(metadata))
    mine = metadata.get("torchdoctor", {})
    mine.pop("language", None)
    if not mine:
        metadata.pop("torchdoctor", None)
    return metadata


def structure_problems(english: nbformat.NotebookNode, chinese: nbformat.NotebookNode) -> list[str]:
    """How a Chinese notebook differs from its English one other than in markdown cells' source."""
    problems = []
    if chinese.get("metadata", {}).get("torchdoctor", {}).get("language") != LANGUAGE:
        problems.append(f"the notebook metadata does not give torchdoctor.language = {LANGUAGE!r}")
    if without_language(chinese.get("metadata", {})) != english.get("metadata"):
        problems.append("the notebook metadata differs from the English")
    if (chinese.get("nbformat"), chinese.get("nbformat_minor")) != (english.get("nbformat"),
                                                                    english.get("nbformat_minor")):
        problems.append("the nbformat version differs from the English")
    ids_en = [(c.get("id"), c.cell_type) for c in english.cells]
    ids_zh = [(c.get("id"), c.cell_type) for c in chinese.cells]
    if ids_en != ids_zh:
        if len(ids_en) != len(ids_zh):
            problems.append(f"{len(ids_zh)} cells instead of the English {len(ids_en)}")
        else:
            problems.append("cells differ from the English in id, type or order: "
                            + ", ".join(f"#{i} {z} for {e}" for i, (e, z) in enumerate(zip(ids_en, ids_zh, strict=True))
                                        if e != z)[:300])
        return problems
    for en, zh in zip(english.cells, chinese.cells, strict=True):
        if en.cell_type == "markdown":
            rest_en = {k: v for k, v in en.items() if k != "source"}
            rest_zh = {k: v for k, v in zh.items() if k != "source"}
            if rest_en != rest_zh:
                problems.append(f"markdown cell {en.id}: metadata or attachments differ from the English")
            if sorted(_FENCED_BLOCK.findall(en.source)) != sorted(_FENCED_BLOCK.findall(zh.source)):
                problems.append(f"markdown cell {en.id}: its code blocks differ from the English")
            if _html_tags(en.source) != _html_tags(zh.source):
                problems.append(f"markdown cell {en.id}: its HTML tags differ from the English")
        elif en != zh:
            problems.append(f"{en.cell_type} cell {en.id}: differs from the English (source, metadata or outputs)")
    return problems


_FENCED_BLOCK = re.compile(r"^ {0,3}((?:```|~~~)[^\n]*\n.*?^ {0,3}(?:```|~~~)[ \t]*$)", re.MULTILINE | re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?>")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.DOTALL)
_URL = re.compile(r"https?://[^\s)<>\]]+")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REQUIREMENT = re.compile(r"\[R\d+\.\d+\]")
_PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}")
# A number not glued to an ASCII word (the 32 of 10x32 is part of a token): Chinese text puts digits right after a
# character (第2章), so only ASCII counts as glue.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:[.,]\d+)*")
# 第 3 章 for chapter 03: a leading zero is not part of the number.
_LEADING_ZEROS = re.compile(r"^0+(?=\d)")


def _html_tags(markdown: str) -> list[str]:
    """The HTML tags of a markdown text outside its code blocks and code spans."""
    prose = _CODE_SPAN.sub(" ", _FENCED_BLOCK.sub(" ", markdown))
    return sorted(" ".join(tag.split()) for tag in _HTML_TAG.findall(prose))


def _verbatim(text: str) -> dict[str, list[str]]:
    """What a translation must keep exactly: code spans, math, URLs and link targets, requirement ids, numbers."""
    spans = sorted(m.group(2).strip() for m in _CODE_SPAN.finditer(text))
    rest = _CODE_SPAN.sub(" ", text)
    math = sorted((m.group(1) or m.group(2)).strip() for m in _MATH.finditer(rest))
    rest = _MATH.sub(" ", rest)
    urls = sorted(_URL.findall(rest) + [t for t in _LINK_TARGET.findall(rest) if not t.startswith("http")])
    rest = _LINK_TARGET.sub("]", _URL.sub(" ", rest))
    requirements = sorted(_REQUIREMENT.findall(rest))
    rest = _REQUIREMENT.sub(" ", rest)
    placeholders = sorted(_PLACEHOLDER.findall(rest))
    rest = _PLACEHOLDER.sub(" ", rest)
    numbers = sorted(_LEADING_ZEROS.sub("", n.replace(",", "")) for n in _NUMBER.findall(rest))
    return {"code spans": spans, "math": math, "URLs and link targets": urls, "requirement ids": requirements,
            "placeholders": placeholders, "numbers": numbers}


def verbatim_problems(msgid: str, msgstr: str) -> list[str]:
    english, chinese = _verbatim(msgid), _verbatim(msgstr)
    problems = []
    for what, expected in english.items():
        got = chinese[what]
        if got != expected:
            lost = sorted(set(expected) - set(got))
            added = sorted(set(got) - set(expected))
            detail = "; ".join(p for p in (f"missing {lost}" if lost else "", f"not in the English {added}"
                                           if added else "") if p) or "a different count"
            problems.append(f"{what} differ from the English: {detail}")
    return problems


@dataclass(frozen=True)
class Term:
    english: tuple[str, ...]
    chinese: tuple[str, ...]
    note: str = ""
    rejected: tuple[str, ...] = ()


def load_glossary(path: Path = GLOSSARY) -> list[Term]:
    """The glossary: a TSV with a header line, `english<TAB>chinese<TAB>rejected<TAB>note`. English alternatives
    are separated by `/`; the Chinese is one preferred form (one per sense where a term has two, as memory has:
    内存 for the host's, 显存 for the GPU's); `rejected` lists, separated by `/`, the other translations, which the
    check refuses where the English has the term."""
    terms = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t") + ["", ""]
        if not cols[1].strip():
            raise ValueError(f"{path}:{number}: expected `english<TAB>chinese<TAB>rejected<TAB>note`")
        english, chinese, rejected = (tuple(t.strip() for t in c.split("/") if t.strip()) for c in cols[:3])
        if set(chinese) & set(rejected):
            raise ValueError(f"{path}:{number}: {sorted(set(chinese) & set(rejected))} is preferred and rejected")
        terms.append(Term(english, chinese, cols[3].strip(), rejected))
    return terms


def _term_pattern(term: str) -> re.Pattern:
    words = r"\s+".join(re.escape(w) for w in term.split())
    return re.compile(rf"(?<![\w-]){words}(?:s|es)?(?![\w-])", re.IGNORECASE)


def _chinese_pattern(form: str) -> re.Pattern:
    """A form in the Chinese text: a Chinese one as it is, a Latin one (stride, notebook) as a whole word in any
    case, plural too; Python counts Chinese characters as word characters, so the word boundaries are ASCII."""
    if not form.isascii():
        return re.compile(re.escape(form))
    return re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(form)}(?:s|es)?(?![A-Za-z0-9_-])", re.IGNORECASE)


# Chinese prose numbers chapters without a leading zero: 第 1 章 where the English says chapter 01.
_CHAPTER_WITH_ZERO = re.compile(r"第\s*0\d+\s*章")


GLOSSARY_OK = "glossary-ok:"


def glossary_exemptions(tcomment: str) -> tuple[set[str], list[str]]:
    """The glossary terms a translator comment exempts for its entry, and the problems of those comments.

    A word can be a glossary term in one sentence and not in another ("type it from memory" means recall, not
    内存): the translator writes ``# glossary-ok: memory: 'from memory' means recall here`` above the entry, the
    term and a reason, and the check skips that term for that entry only."""
    exempt, problems = set(), []
    for line in (tcomment or "").splitlines():
        if not line.strip().startswith(GLOSSARY_OK):
            continue
        term, _, reason = line.strip()[len(GLOSSARY_OK):].partition(":")
        if not term.strip() or not reason.strip():
            problems.append(f"'{line.strip()}': write `{GLOSSARY_OK} <english term>: <why it is not the term here>`")
            continue
        exempt.add(term.strip().lower())
    return exempt, problems


def glossary_problems(msgid: str, msgstr: str, glossary: list[Term], exempt: set[str] = frozenset()) -> list[str]:
    """Each glossary term of the English (outside code, math, URLs and placeholders) whose preferred Chinese the
    translation lacks or whose rejected forms it uses, except the English terms in ``exempt``
    (``glossary_exemptions``); and a chapter number written with a leading zero."""
    prose = _PLACEHOLDER.sub(" ", _URL.sub(" ", _MATH.sub(" ", _CODE_SPAN.sub(" ", msgid))))
    chinese = _PLACEHOLDER.sub(" ", _URL.sub(" ", _MATH.sub(" ", _CODE_SPAN.sub(" ", msgstr))))
    preferred = {form for term in glossary for form in term.chinese}
    problems = []
    # Longer terms first, each blanked once found, so "GPU memory" is not also checked as "memory".
    for term in sorted(glossary, key=lambda t: -max(len(e) for e in t.english)):
        found = False
        for english in term.english:
            prose, count = _term_pattern(english).subn(" ", prose)
            found = found or (count > 0 and english.lower() not in exempt)
        if not found:
            continue
        if not any(_chinese_pattern(c).search(msgstr) for c in term.chinese):
            problems.append(f"glossary: '{'/'.join(term.english)}' is translated as "
                            f"'{'/'.join(term.chinese)}' (not found in the translation)")
        # The English in brackets after the preferred form is a gloss, not a translation: 步幅（stride）.
        glossed = chinese
        for form in term.chinese:
            glossed = re.sub(rf"{re.escape(form)}\s*[（(][^（()）]*[）)]", form, glossed)
        for form in term.rejected:
            # Another term's preferred form that contains this one is that term (笔记本电脑, laptop, is not 笔记本).
            text = glossed
            for other in sorted((p for p in preferred if form in p and p != form), key=len, reverse=True):
                text = text.replace(other, " ")
            if _chinese_pattern(form).search(text):
                problems.append(f"glossary: '{'/'.join(term.english)}' is translated as "
                                f"'{'/'.join(term.chinese)}', not '{form}'")
    for match in _CHAPTER_WITH_ZERO.finditer(chinese):
        problems.append(f"glossary: '{match.group()}': a chapter number takes no leading zero in Chinese "
                        f"(第 1 章, not 第 01 章)")
    return problems


@dataclass
class Report:
    notebook: str
    ready: bool
    total: int = 0
    translated: int = 0
    fuzzy: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.translated / self.total if self.total else 1.0


def check_catalogue(report: Report, path: Path, pot: polib.POFile, glossary: list[Term] | None = None,
                    root: Path = REPO) -> polib.POFile | None:
    """The checks every catalogue gets (header, in step with the English, each entry's state and text); fills in
    ``report`` and returns the catalogue (None when there is none)."""
    if not path.is_file():
        report.problems.append(f"no catalogue {path.relative_to(root) if path.is_relative_to(root) else path}: "
                               "run `make i18n-update`")
        return None
    pofile = load(path)
    if pofile.metadata.get("Language") != LANGUAGE:
        report.problems.append(f"the catalogue's header says Language: {pofile.metadata.get('Language')!r}, "
                               f"not {LANGUAGE}")
    if "charset=UTF-8" not in pofile.metadata.get("Content-Type", ""):
        report.problems.append("the catalogue is not declared UTF-8 (Content-Type: text/plain; charset=UTF-8)")
    expected = [(e.msgctxt, e.msgid) for e in pot]
    live = [e for e in pofile if not e.obsolete]
    present = [(e.msgctxt, e.msgid) for e in live]
    if present != expected:
        new = len(set(expected) - set(present))
        gone = len(set(present) - set(expected))
        report.problems.append(f"the catalogue is out of date with the English ({new} new, {gone} no longer there"
                               f"{', order differs' if not new and not gone else ''}): run `make i18n-update`")
    glossary = load_glossary() if glossary is None else glossary
    report.total = len(live)
    for entry in live:
        where = f"{entry.msgctxt}: '{entry.msgid[:60]}'"
        if "fuzzy" in entry.flags:
            report.fuzzy += 1
            report.problems.append(f"{where}: fuzzy (the English changed; check the translation, drop the flag)")
            continue
        if not entry.msgstr:
            continue
        report.translated += 1
        exempt, comment_problems = glossary_exemptions(entry.tcomment)
        for problem in (comment_problems + verbatim_problems(entry.msgid, entry.msgstr)
                        + glossary_problems(entry.msgid, entry.msgstr, glossary, exempt)):
            report.problems.append(f"{where}: {problem}")
    untranslated = report.total - report.translated - report.fuzzy
    if untranslated:
        report.problems.append(f"{untranslated} untranslated entries")
    obsolete = pofile.obsolete_entries()
    if obsolete:
        report.problems.append(f"{len(obsolete)} obsolete entries (#~): delete them once their text is reused")
    return pofile


def check_notebook(notebook: str, ready: bool, root: Path = REPO, catalogue: Path | None = None,
                   glossary: list[Term] | None = None) -> Report:
    report = Report(notebook, ready)
    pofile = check_catalogue(report, catalogue or catalogue_path(notebook), template(notebook, root), glossary, root)
    if pofile is not None:
        english = nbformat.read(root / notebook, as_version=4)
        chinese = build_notebook(notebook, pofile, root)
        report.problems += [f"Chinese notebook: {p}" for p in structure_problems(english, chinese)]
    return report


def check_torchdoctor(ready: bool, catalogue: Path = None, glossary: list[Term] | None = None) -> Report:
    report = Report(TORCHDOCTOR_NAME, ready)
    check_catalogue(report, catalogue or TORCHDOCTOR_PO, torchdoctor_template(), glossary)
    return report


def nbgrader_problems(notebook: str, root: Path = REPO) -> list[str]:
    """A markdown cell that nbgrader locks or grades would make a translated notebook fail its checksums."""
    nb = nbformat.read(root / notebook, as_version=4)
    return [f"markdown cell {c.id} is an nbgrader {k} cell: a translation would break its checksum"
            for c in nb.cells if c.cell_type == "markdown"
            for k in ("grade", "locked", "solution", "task") if c.metadata.get("nbgrader", {}).get(k)]


# ---------------------------------------------------------------------------------------------------------------
# Command line


def _print(report: Report, extra: list[str] = ()) -> bool:
    """Print one catalogue's line and its problems; True when it fails the check."""
    problems = report.problems + list(extra)
    # Whatever the state of the translation, the Chinese notebook must be the English one's twin.
    always = ("Chinese notebook", "no catalogue", "the catalogue's header", "the catalogue is not", "markdown cell")
    blocking = problems if report.ready else [p for p in problems if p.startswith(always)]
    status = "ready" if report.ready else "in progress"
    print(f"{report.notebook:52} {status:12} {report.translated:4}/{report.total:<4} translated "
          f"({report.share:6.1%}), {report.fuzzy} fuzzy{'  FAILED' if blocking else ''}")
    for problem in blocking:
        print(f"    {problem}")
    warnings = [p for p in problems if p not in blocking and "untranslated entries" not in p]
    for problem in warnings[:20]:
        print(f"    warning: {problem}")
    if len(warnings) > 20:
        print(f"    warning: ... and {len(warnings) - 20} more")
    return bool(blocking)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["update", "build", "check", "run"])
    parser.add_argument("notebooks", nargs="*", help="notebook paths (default: every translated notebook, and "
                        "explain()'s catalogue)")
    parser.add_argument("--device", default="cpu", help="run: auto, cpu, cuda or mps (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="run: SEED (default 0)")
    parser.add_argument("--full", action="store_true", help="run: FAST=False")
    parser.add_argument("--jobs", type=int, default=1, help="run: notebooks at once (default 1)")
    args = parser.parse_intermixed_args(argv)  # `run --device cpu NOTEBOOK...`, as make passes them
    every = notebooks()
    unknown = [n for n in args.notebooks if n not in every]
    if unknown:
        parser.error(f"not a translated notebook of course.toml: {unknown}; known: {sorted(every)}")
    chosen = {n: every[n] for n in (args.notebooks or every)}
    with_torchdoctor = not args.notebooks
    if args.command == "update":
        merged_files = [(catalogue_path(n), update(n)) for n in chosen]
        if with_torchdoctor:
            merged_files.append((TORCHDOCTOR_PO, update_torchdoctor()))
        for path, merged in merged_files:
            live = len(merged) - len(merged.obsolete_entries())
            print(f"{path.relative_to(REPO)}: {live} entries, {len(merged.translated_entries())} translated, "
                  f"{len(merged.fuzzy_entries())} fuzzy, {len(merged.obsolete_entries())} obsolete")
        return 0
    if args.command == "build":
        for notebook in chosen:
            print(f"{build(notebook).relative_to(REPO)}")
        return 0
    if args.command == "run":
        return run(list(chosen), args.device, args.seed, args.full, args.jobs)
    failed = 0
    glossary = load_glossary()
    for notebook, ready in chosen.items():
        report = check_notebook(notebook, ready, glossary=glossary)
        failed += _print(report, nbgrader_problems(notebook) if notebook.startswith("exercises/") else [])
    if with_torchdoctor:
        failed += _print(check_torchdoctor(every.get(TORCHDOCTOR_READY_WITH, False), glossary=glossary))
    print(f"{sum(chosen.values())} of {len(chosen)} notebooks ready in {LANGUAGE}; "
          + ("all checks passed" if not failed else f"{failed} failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
