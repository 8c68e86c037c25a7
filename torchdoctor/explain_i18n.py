"""explain() in another language through gettext (issue 24: the course in Chinese).

The catalog's titles, causes and fixes are looked up in the gettext domain ``torchdoctor``,
``locale/<language>/LC_MESSAGES/torchdoctor.po`` of the course repository (written by ``make i18n-update``), with
the entry's id and field as context (``mat1-mat2-shapes/cause``). A fix that uses the numbers of the message is
translated as a template (``... nn.Linear({expected}, {out}) ...``) and filled in with them; where the entry's fix
cannot be written as one template, the translated general fix is given instead. Anything without a translation
stays English, and the patterns that recognise a message always do: PyTorch prints English.

The rest of the library's printed text (sanity verdicts, the cheat sheet's captions, chapter titles, ...) is in the
same domain, one context per module: ``tr = translator("sanity")`` then ``tr("ok: all {total} ...", total=n)``.
``make i18n-update`` extracts every ``tr("...")`` call of a module that binds ``translator("<context>")`` (a literal
first argument, ``{name}`` placeholders filled in by keyword), so no such text is lost from the catalogue.

The language: ``TORCHDOCTOR_LANG`` (``zh_CN``; ``en`` forces English), else the notebook's: a notebook whose metadata
has ``torchdoctor.language`` (``make i18n-build`` writes it into each Chinese notebook) chooses it for its kernel, in
any Jupyter that tells the kernel its notebook (``JPY_SESSION_NAME``, which jupyter_server sets, and IPython's
``__session__``; VS Code's ``__vsc_ipynb_file__``), else the locale (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``,
``LANG``, as gettext reads them). ``TORCHDOCTOR_LOCALEDIR`` points at another locale folder.

The .po is compiled in memory with polib when first needed (and again when it changes), so no binary .mo is
committed or can go stale; a ``torchdoctor.mo`` beside it is used where polib is not installed.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gettext
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

DOMAIN = "torchdoctor"
ENV_LANG = "TORCHDOCTOR_LANG"
ENV_LOCALEDIR = "TORCHDOCTOR_LOCALEDIR"
LABELS = "diagnosis"  # the context of the layouts of a printed diagnosis and of the command's messages
CHEATSHEET = "cheatsheet"  # the context of the cheat sheet's column names and "checked on" values
FIELDS = ("title", "cause", "fix", "specific_fix")
CHAPTER = "chapter"  # the context of the chapters' titles (course.toml)
# Where the kernel learns its notebook's path: jupyter_server's environment variable, IPython's and VS Code's names.
NOTEBOOK_ENV = "JPY_SESSION_NAME"
NOTEBOOK_NAMES = ("__session__", "__vsc_ipynb_file__")
_ENGLISH = contextvars.ContextVar("torchdoctor_english", default=False)


@contextlib.contextmanager
def english() -> Iterator[None]:
    """English inside the block whatever the language: for the message of an exception torchdoctor raises, which
    stays English as PyTorch's do (explain() and the notebooks' declarations match it)."""
    token = _ENGLISH.set(True)
    try:
        yield
    finally:
        _ENGLISH.reset(token)


def notebook_path() -> Path | None:
    """The notebook this kernel runs, where the front end says which (JupyterLab, Notebook 7, VS Code); else None."""
    candidates = [os.environ.get(NOTEBOOK_ENV)]
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        candidates += [shell.user_ns.get(name) for name in NOTEBOOK_NAMES]
    for candidate in candidates:
        if not isinstance(candidate, str) or not candidate.endswith(".ipynb"):
            continue
        path = Path(candidate)  # absolute, or relative to the server's root: the kernel runs in the notebook's folder
        for found in (path, Path.cwd() / path, Path.cwd() / path.name):
            if found.is_file():
                return found
    return None


@functools.lru_cache(maxsize=8)
def _notebook_language(path: Path, stamp: float) -> str | None:
    try:
        metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return None
    value = metadata.get("torchdoctor", {}).get("language") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def notebook_language() -> str | None:
    """``metadata.torchdoctor.language`` of the kernel's notebook (``zh_CN`` in a Chinese one), else None."""
    path = notebook_path()
    if path is None:
        return None
    try:
        return _notebook_language(path, path.stat().st_mtime)
    except OSError:
        return None


def language() -> str | None:
    """The language torchdoctor speaks, normalised (``zh_CN``); None for English."""
    if _ENGLISH.get():
        return None
    value = os.environ.get(ENV_LANG)
    if value is None:
        value = notebook_language()
    if value is None:
        for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
            if os.environ.get(var):
                value = os.environ[var].split(":")[0]
                break
    value = (value or "").split(".")[0].split("@")[0].replace("-", "_").strip()
    if not value or value in ("C", "POSIX") or value.lower().startswith("en"):
        return None
    return value


def localedir() -> Path:
    return Path(os.environ.get(ENV_LOCALEDIR) or Path(__file__).resolve().parent.parent / "locale")


def catalogue(lang: str, folder: Path | None = None) -> Path:
    return (folder or localedir()) / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


@functools.lru_cache(maxsize=8)
def _load(po: Path, stamp: float | None) -> gettext.NullTranslations:
    if stamp is not None:
        try:
            import polib
        except ImportError:
            pass
        else:
            return gettext.GNUTranslations(io.BytesIO(polib.pofile(str(po), encoding="utf-8").to_binary()))
    with_mo = po.with_suffix(".mo")
    if with_mo.is_file():
        with open(with_mo, "rb") as f:
            return gettext.GNUTranslations(f)
    return gettext.NullTranslations()


def translations() -> gettext.NullTranslations:
    lang = language()
    if lang is None:
        return gettext.NullTranslations()
    for candidate in dict.fromkeys((lang, lang.split("_")[0])):
        po = catalogue(candidate)
        if po.is_file() or po.with_suffix(".mo").is_file():
            return _load(po, po.stat().st_mtime if po.is_file() else None)
    return gettext.NullTranslations()


def layout(template: str, **values: str) -> str:
    """A printed diagnosis: its layout (``torchdoctor: {title} [{id}]\\n  cause: {cause} ...``) in the current
    language, filled in; the English layout where the translation does not fit the values."""
    translated = translations().pgettext(LABELS, template)
    try:
        return translated.format(**values)
    except (KeyError, IndexError, ValueError):
        return template.format(**values)


def text(context: str, message: str) -> str:
    """One short text (a column name of the cheat sheet) in the current language."""
    return translations().pgettext(context, message)


def translator(context: str) -> Callable[..., str]:
    """The translation function of one module's printed texts: ``tr(message, **values)`` gives ``message`` in the
    current language with its ``{name}`` placeholders filled in from ``values`` (the English where a translation
    does not fit them). The texts are extracted by ``make i18n-update`` (course_tools/i18n.py)."""

    def tr(message: str, /, **values: object) -> str:
        translated = translations().pgettext(context, message)
        try:
            return translated.format(**values)
        except (KeyError, IndexError, ValueError):
            return message.format(**values)

    tr.context = context  # how `make i18n-update` finds the module's texts
    return tr


def chapter_label(number: int, title: str) -> str:
    """'01 Dimensions and shapes' in the current language (the title translated in the context ``chapter``)."""
    return f"{number:02d} {translations().pgettext(CHAPTER, title)}"


def specific_template(entry, groups: Mapping[str, str] | None = None) -> str | None:
    """The entry's specific fix with ``{name}`` for each group of its pattern, or None where the fix is not one
    template (it computes with the numbers, or picks its words by them: then it differs from the real text)."""
    if entry.specific_fix is None:
        return None
    # Sentinels first, then the fix's own braces doubled ("map_location={'cuda:1': ...}"), then the placeholders.
    sentinels = {name: f"\x00{name}\x00" for name in entry.regex.groupindex}
    try:
        template = entry.specific_fix(sentinels).replace("{", "{{").replace("}", "}}")
        for name, sentinel in sentinels.items():
            template = template.replace(sentinel, "{" + name + "}")
        if groups is not None and template.format(**groups) != entry.specific_fix(groups):
            return None
    except Exception:  # a fix that does arithmetic on a group cannot take a placeholder
        return None
    return template


def translate(entry, groups: Mapping[str, str | None]) -> tuple[str, str, str]:
    """(title, cause, fix) of a catalog entry for a message whose pattern groups are ``groups``."""
    english_fix = entry.fix_for(groups)
    t = translations()
    if type(t) is gettext.NullTranslations:
        return entry.title, entry.cause, english_fix
    title = t.pgettext(f"{entry.id}/title", entry.title)
    cause = t.pgettext(f"{entry.id}/cause", entry.cause)
    fix = t.pgettext(f"{entry.id}/fix", entry.fix)
    if english_fix != entry.fix:  # the specific fix applied
        complete = {k: v for k, v in groups.items() if v is not None}
        template = specific_template(entry, complete)
        translated = t.pgettext(f"{entry.id}/specific_fix", template) if template is not None else None
        if translated is not None and translated != template:
            try:
                fix = translated.format(**complete)
            except (KeyError, IndexError, ValueError):
                fix = english_fix if fix == entry.fix else fix
        elif fix == entry.fix:
            fix = english_fix  # no Chinese for either: the English specific fix, as without a language
    return title, cause, fix
