"""Build the course site (``make site``): static HTML of every ready chapter and of the cheat sheet, from the
executed notebooks in build/notebooks/ (outputs, tracebacks, plots), with a table of contents from course.toml, the
guides of docs/ beside them, a navigation by reader and an offline search box over all of it.

Each page links to its notebook (the committed copy, without outputs) and to its homework (the starter from
exercises/). Solutions are never published: nothing is read from solutions/ or autograder/ for a page, and the
build fails if a solution cell's code appears in a published notebook. Executed notebooks that are missing, or
older than their source, are executed first with ``course_tools.run_notebooks`` (FAST mode, CPU unless --device
says otherwise); with --no-run a missing one is an error and an older one a warning.

The tool is nbconvert (already pinned: it is part of the grading stack) with a small template,
course_tools/site_template/: see docs/authors.md "The course site" for why not Jupyter Book or Sphinx. The guides'
Markdown goes through nbconvert's own Markdown renderer (mistune), each heading with a GitHub-style id; the search
box reads search-index.js, written beside the pages (every section of every page), so it works from file:// too.

The site has both languages of the course (issue 24): every page whose notebook has a ready Chinese edition
(``zh_CN = "ready"`` in course.toml) has a twin under zh_CN/, and the bar on every page has a language switch
(English <-> 中文) to the same page in the other language, or to the other language's contents where there is no
twin (the guides are English only). A Chinese page is the Chinese notebook as `python -m course_tools.i18n run`
executed it (the library prints Chinese there: explain(), the summary tables, the check-yourself feedback), with
its markdown as the catalogue gives it now; `make site` executes the Chinese notebooks that are missing or older
than their notebook or catalogue, as it does the English ones. Where a Chinese run is missing (--no-run, the tests'
sites) the page is the English run with the Chinese markdown, and says so. Its downloadable notebook and homework
starter are the Chinese ones (the starter built from exercises/<a>/<a>.ipynb and its catalogue). The frame's words
(bar, search box, links) are FRAME, translated by locale/zh_CN/site.po; the search cuts Chinese into character
bigrams (search.js), so a two-character term such as 显存 is found.

``--library-reference`` rewrites the generated part of docs/library.md from the docstrings of ``torchdoctor.__all__``
(tests/test_docs.py fails when it is stale) and builds nothing.

Usage: python -m course_tools.site [--out build/site] [--no-run] [--device auto|cpu|cuda|mps] [--library-reference]
       [--update-catalogue] [--language en|zh_CN]  (only which contents page the last line names: the site has both)
"""

from __future__ import annotations

import argparse
import copy
import html
import inspect
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import markupsafe
import nbformat
import polib

from course_tools import i18n
from course_tools.release import REPO
from course_tools.site_answers import hide_answers
from torchdoctor.manifest import load_manifest

BUILD = REPO / "build" / "notebooks"
OUT = REPO / "build" / "site"
TEMPLATE = Path(__file__).resolve().parent / "site_template"
DOCS = REPO / "docs"
LIBRARY = DOCS / "library.md"
REFERENCE_BEGIN = ("<!-- reference: generated from torchdoctor's docstrings by "
                   "`python -m course_tools.site --library-reference`; do not edit -->")
REFERENCE_END = "<!-- end of the generated reference -->"
# The guides, in the order the navigation shows them: file stem -> (label, for whom).
GUIDES = {
    "students": ("Students", "working through the chapters, homework, validating, feedback, the cheat sheet"),
    "instructors": ("Instructors", "releasing, collecting, grading, feedback, limits, a shared server, a big class"),
    "security": ("Grading security", "threats, protections, what is not protected, grading without root"),
    "library": ("Library", "the torchdoctor library: a guide with examples and the reference"),
    "authors": ("Authors", "adding a chapter, an error, an assignment; what CI runs"),
}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FRAME_NOTE = "Interactive in JupyterLab: run the notebook to use these controls."


@dataclass(frozen=True)
class Page:
    """One page of the site: a ready chapter or a reference notebook (the cheat sheet)."""

    notebook: str  # relative to the repository, e.g. course/01_dimensions.ipynb
    title: str
    label: str  # "01 Dimensions and shapes", "Cheat sheet"
    covers: str
    homework: str | None

    @property
    def html_name(self) -> str:
        return Path(self.notebook).with_suffix(".html").name

    @property
    def executed(self) -> Path:
        return BUILD / self.notebook

    def executed_in(self, folder: Path) -> Path:
        return folder / self.notebook

    def chinese_executed_in(self, folder: Path) -> Path:
        """Where `python -m course_tools.i18n run` writes the executed Chinese notebook: build/zh_CN/<notebook>
        under `folder`."""
        return folder / i18n.built_path(self.notebook).relative_to(REPO)


def pages() -> list[Page]:
    manifest = load_manifest()
    ready = set(manifest.assignment_names("ready"))
    chapters = [Page(c.notebook, c.title, c.label, c.covers, c.homework if c.homework in ready else None)
                for c in manifest.chapters if c.status == "ready"]
    references = [Page(r.notebook, r.title, r.title, r.covers, None) for r in manifest.references]
    return chapters + references


def _stale(executed: Path, *sources: Path) -> bool:
    return executed.stat().st_mtime < max(source.stat().st_mtime for source in sources)


def ensure_executed(wanted: list[Page], run: bool, device: str, chinese: list[Page] = ()) -> None:
    """Execute (FAST mode) the notebooks whose executed copy is missing or older than the source: the English ones,
    and the Chinese ones of `chinese` (built from the catalogue, run with their language, through the runner's
    checks). Without `run`, a missing English copy is an error and a missing Chinese one a warning: that page shows
    the English run's outputs."""
    missing = [p.notebook for p in wanted if not p.executed.exists()]
    stale = [p.notebook for p in wanted if p.executed.exists() and _stale(p.executed, REPO / p.notebook)]
    chinese_missing = [p.notebook for p in chinese if not p.chinese_executed_in(BUILD).exists()]
    chinese_stale = [p.notebook for p in chinese if p.notebook not in chinese_missing and _stale(
        p.chinese_executed_in(BUILD), REPO / p.notebook, i18n.catalogue_path(p.notebook))]
    if not run:
        if missing:
            raise SystemExit(f"not executed yet: {', '.join(missing)}. Run `make test-notebooks` (or leave out "
                             "--no-run).")
        if stale:
            print(f"warning: executed before their last change, published as they were: {', '.join(stale)}")
        if chinese_missing:
            print(f"warning: not executed in Chinese, their Chinese pages show the English run's outputs: "
                  f"{', '.join(chinese_missing)}. Run `make i18n-test-notebooks` (or leave out --no-run).")
        if chinese_stale:
            print(f"warning: executed in Chinese before their last change (or their catalogue's), published as they "
                  f"were: {', '.join(chinese_stale)}")
        return
    if missing or stale:
        print(f"executing first: {', '.join(missing + stale)}", flush=True)
        subprocess.run([sys.executable, "-m", "course_tools.run_notebooks", "--device", device, *missing, *stale],
                       cwd=REPO, check=True)
    if chinese_missing or chinese_stale:
        redo = chinese_missing + chinese_stale
        print(f"executing in Chinese first: {', '.join(redo)}", flush=True)
        subprocess.run([sys.executable, "-m", "course_tools.i18n", "build", *redo], cwd=REPO, check=True)
        subprocess.run([sys.executable, "-m", "course_tools.i18n", "run", "--device", device, *redo], cwd=REPO,
                       check=True)


# ---------------------------------------------------------------------------------------------------------------
# Outputs a static page cannot run: widgets (tqdm's progress bars, the cheat sheet's search) drawn from the state
# the runner saved, and progress text written with carriage returns.


def _widget_html(model_id: str, state: dict, depth: int = 0) -> str:
    model = state.get(model_id)
    if model is None or depth > 20:
        return ""
    name = model.get("model_name", "")
    s = model.get("state", {})
    children = [c.removeprefix("IPY_MODEL_") for c in s.get("children", [])]
    if name in ("HBoxModel", "VBoxModel", "BoxModel", "GridBoxModel"):
        kind = "hbox" if name == "HBoxModel" else "vbox"
        inner = "".join(_widget_html(c, state, depth + 1) for c in children)
        return f'<div class="td-widget td-{kind}">{inner}</div>'
    if name in ("HTMLModel", "HTMLMathModel"):
        return f'<div class="td-widget td-html">{s.get("description", "")}{s.get("value", "")}</div>'
    if name in ("LabelModel",):
        return f'<span class="td-widget">{html.escape(str(s.get("value", "")))}</span>'
    if name in ("FloatProgressModel", "IntProgressModel"):
        value, top = s.get("value", 0), s.get("max", 100)
        style = s.get("bar_style", "") or "info"
        return f'<progress class="td-progress td-{style}" value="{value}" max="{top}"></progress>'
    if name in ("TextModel", "TextareaModel"):
        placeholder = html.escape(str(s.get("placeholder", "")))
        return (f'<input class="td-widget" type="text" disabled placeholder="{placeholder}" '
                f'value="{html.escape(str(s.get("value", "")))}">')
    if name in ("DropdownModel", "SelectModel"):
        labels = s.get("_options_labels", [])
        index = s.get("index") or 0
        label = labels[index] if 0 <= index < len(labels) else ""
        return f'<select class="td-widget" disabled><option>{html.escape(str(label))}</option></select>'
    return ""


def static_widgets(nb: nbformat.NotebookNode, note: str = FRAME_NOTE) -> int:
    """Replace each widget output by HTML drawn from the saved widget state; return how many were replaced. `note`
    goes under the controls a static page cannot run (in the page's language)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            drawn = _widget_html(data[WIDGET_VIEW].get("model_id", ""), state)
            interactive = any(m.get("model_name") in ("TextModel", "DropdownModel")
                              for m in (state.get(data[WIDGET_VIEW].get("model_id", ""), {}),))
            shown_note = (f'<p class="td-note">{html.escape(note)}</p>'
                          if interactive or "<input" in drawn or "<select" in drawn else "")
            del data[WIDGET_VIEW]
            if drawn:
                data["text/html"] = drawn + shown_note
            replaced += 1
    nb.metadata.pop("widgets", None)  # no widget manager (and no script from a CDN) on a static page
    return replaced


def settle_carriage_returns(nb: nbformat.NotebookNode) -> None:
    """Keep what a terminal shows of text rewritten in place with \\r (text-mode progress bars)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and "\r" in output.get("text", ""):
                lines = output["text"].replace("\r\n", "\n").split("\n")
                output["text"] = "\n".join(line.rsplit("\r", 1)[-1] for line in lines)


# ---------------------------------------------------------------------------------------------------------------


def solution_cells() -> list[str]:
    """The code of every solution cell of every assignment (three lines or more): none may reach the site."""
    sources = []
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            code = cell.source.strip()
            if cell.metadata.get("nbgrader", {}).get("solution") and code.count("\n") >= 2:
                sources.append(code)
    return sources


def leaked_solutions(notebooks: list[Path]) -> list[str]:
    """Which published notebooks hold a solution cell's code verbatim."""
    secrets = solution_cells()
    found = []
    for path in notebooks:
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        found += [f"{path.name}: {code.splitlines()[0]} ..." for code in secrets if code in text]
    return found


def inline_code(text: str) -> markupsafe.Markup:
    """course.toml's Markdown backticks as <code>, the rest escaped."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


# ---------------------------------------------------------------------------------------------------------------
# The library reference (docs/library.md), generated from the docstrings of torchdoctor.__all__.


def _rst_to_markdown(text: str) -> str:
    """Docstrings' reStructuredText bits as Markdown: ``x`` and :func:`x` as code (a public name links to its entry)."""
    import torchdoctor

    def role(match: re.Match) -> str:
        name = match.group(1).lstrip("~").split(".")[-1]
        return f"[`{name}`](#{github_slug(name)})" if name in torchdoctor.__all__ else f"`{name}`"

    text = re.sub(r":(?:func|class|meth|mod|data|attr):`([^`]+)`", role, text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


class _Annotation(str):
    """An annotation kept as text (``from __future__ import annotations``), shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


def _signature(name: str, obj: object) -> str:
    signature = inspect.signature(obj)

    def plain(annotation):
        return _Annotation(annotation) if isinstance(annotation, str) else annotation

    parameters = [p.replace(annotation=plain(p.annotation)) for p in signature.parameters.values()]
    return name + str(signature.replace(parameters=parameters, return_annotation=plain(signature.return_annotation)))


def _defining_module(name: str):
    """The torchdoctor module whose source assigns `name` at its top level."""
    import torchdoctor  # noqa: F401  (imports every module that __all__ names)

    for module_name in sorted(m for m in sys.modules if m == "torchdoctor" or m.startswith("torchdoctor.")):
        module = sys.modules[module_name]
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        if re.search(rf"^{re.escape(name)}\s*[:=]", source, flags=re.M):
            return module
    raise LookupError(f"no torchdoctor module assigns {name}")


def _module_comment(module: object, name: str) -> str:
    """The comment lines just above `name = ...` at the top level of `module`'s source ('' when none)."""
    lines = inspect.getsource(module).splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"{re.escape(name)}\s*[:=]", line):
            comment = []
            for above in reversed(lines[:i]):
                if not above.startswith("#"):
                    break
                comment.insert(0, above.lstrip("# ").rstrip())
            return " ".join(comment)
    return ""


def library_reference() -> str:
    """The reference part of docs/library.md: one entry per name of torchdoctor.__all__, in that order, from its
    signature and its docstring (for a constant: its annotation and the comment above it, or its class's docstring)."""
    import torchdoctor

    parts = []
    for name in torchdoctor.__all__:
        obj = getattr(torchdoctor, name)
        if inspect.isclass(obj):
            kind, home = "class", obj.__module__
            signature = _signature(name, obj)
            doc = inspect.getdoc(obj) or ""
        elif callable(obj) and (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
            kind, home = "function", obj.__module__
            signature = _signature(name, obj)
            doc = inspect.getdoc(obj) or ""
        else:
            module = _defining_module(name)
            kind, home = "constant", module.__name__
            annotation = module.__annotations__.get(name) if hasattr(module, "__annotations__") else None
            if isinstance(annotation, str):
                annotation = _Annotation(annotation)
            signature = name if annotation is None else f"{name}: {inspect.formatannotation(annotation)}"
            doc = _module_comment(module, name)
            if not doc and type(obj).__module__.startswith("torchdoctor"):
                doc = inspect.getdoc(type(obj)) or ""
        parts.append(f"### {name}\n\n```python\n{signature}\n```\n\n*{kind} in `{home}`*\n\n"
                     f"{_rst_to_markdown(doc) if doc else 'No docstring.'}\n")
    return "\n".join(parts).rstrip("\n")


def split_library(text: str) -> tuple[str, str, str]:
    """docs/library.md before the generated reference (through its first marker), the reference, and the rest."""
    if text.count(REFERENCE_BEGIN) != 1 or text.count(REFERENCE_END) != 1:
        raise ValueError(f"{LIBRARY} must hold the marker lines {REFERENCE_BEGIN!r} and {REFERENCE_END!r} once each")
    head, rest = text.split(REFERENCE_BEGIN)
    part, tail = rest.split(REFERENCE_END)
    return head + REFERENCE_BEGIN, part.strip("\n"), REFERENCE_END + tail


def library_with_reference(text: str) -> str:
    head, _, tail = split_library(text)
    return f"{head}\n\n{library_reference()}\n\n{tail}"


# ---------------------------------------------------------------------------------------------------------------
# The guides (docs/*.md) as pages, and the search index over every page.


def github_slug(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = html.unescape(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _heading_ids(body: str) -> str:
    """Give each heading that nbconvert's renderer wrote the id GitHub would give it (duplicates numbered as GitHub
    does), so an anchor that works on GitHub works on the site."""
    seen: dict[str, int] = {}

    def one(match: re.Match) -> str:
        level, inner = match.group(1), match.group(3)
        slug = github_slug(inner)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slug = f"{slug}-{count}" if count else slug
        return f'<h{level} id="{slug}">{inner}<a class="anchor-link" href="#{slug}">&#182;</a></h{level}>'

    return re.sub(r'<h([1-6]) id="([^"]*)">(.*?)<a class="anchor-link" href="#[^"]*">[^<]*</a></h\1>', one, body)


def site_href(target: str, source: Path, chapter_pages: dict[str, str]) -> str | None:
    """Where a relative link of a guide (in `source`, a file of the repository) points on the site: a guide's page, a
    chapter's page, a homework starter or the contents page; None for any other file of the repository."""
    path, _, fragment = target.partition("#")
    if not path:
        return target
    resolved = (source.parent / path).resolve()
    try:
        relative = resolved.relative_to(REPO).as_posix()
    except ValueError:
        return None
    if relative == "README.md":
        return "index.html"
    if relative.startswith("docs/") and relative.endswith(".md") and resolved.stem in GUIDES:
        return f"{resolved.stem}.html" + (f"#{fragment}" if fragment else "")
    if relative in chapter_pages:
        return chapter_pages[relative]
    match = re.fullmatch(r"exercises/([^/]+)/\1\.ipynb", relative)
    if match and (REPO / relative).is_file():
        return f"homework/{match.group(1)}.ipynb"
    return None


def _rewrite_links(body: str, source: Path, chapter_pages: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        href, inner = html.unescape(match.group(1)), match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", href):  # absolute (https:, mailto:) or within the page
            return match.group(0)
        target = site_href(href, source, chapter_pages)
        if target is None:  # a file of the repository that the site does not publish: its path
            return f'<span class="td-repo-path" title="in the repository: {html.escape(href)}">{inner}</span>'
        return f'<a href="{html.escape(target)}">{inner}</a>'

    return re.sub(r'<a href="([^"]*)">(.*?)</a>', one, body, flags=re.S)


def render_markdown(text: str, source: Path, chapter_pages: dict[str, str]) -> str:
    """A guide's Markdown as HTML, through nbconvert's renderer (mistune), with GitHub's heading ids and links that
    point into the site."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return _rewrite_links(_heading_ids(markdown2html_mistune(text)), source, chapter_pages)


class _Sections(HTMLParser):
    """The text of a page, cut at its headings (h1 to h3): [(id, heading, text)], the first one for what precedes
    the first heading. Scripts, styles, navigation, prompts and anchor marks are left out."""

    SKIPPED = {"script", "style", "nav", "head"}
    BLOCKS = {"p", "div", "li", "tr", "td", "th", "pre", "br", "h4", "h5", "h6", "table", "ul", "ol", "blockquote"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[list] = [["", "", []]]
        self.skip_depth = 0  # inside an element left out: how many open tags deep
        self.heading: list[str] | None = None
        self.heading_id = ""

    def handle_starttag(self, tag, attrs):
        if tag in self.BLOCKS and not self.skip_depth:
            self.sections[-1][2].append(" ")
        if tag in self.VOID:
            return
        attributes = dict(attrs)
        if self.skip_depth:
            self.skip_depth += 1
            return
        classes = attributes.get("class") or ""
        if tag in self.SKIPPED or "Prompt" in classes or "anchor-link" in classes:
            self.skip_depth = 1
            return
        if tag in ("h1", "h2", "h3") and attributes.get("id"):
            self.heading, self.heading_id = [], attributes["id"]

    def handle_endtag(self, tag):
        if tag in self.BLOCKS and not self.skip_depth:
            self.sections[-1][2].append(" ")
        if tag in self.VOID:
            return
        if self.skip_depth:
            self.skip_depth -= 1
            return
        if self.heading is not None and tag in ("h1", "h2", "h3"):
            self.sections.append([self.heading_id, " ".join("".join(self.heading).split()), []])
            self.heading = None

    def handle_data(self, data):
        if self.skip_depth:
            return
        (self.heading if self.heading is not None else self.sections[-1][2]).append(data)


SECTION_TEXT = 1500  # characters of each section's text kept in the index
CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")  # the characters search.js cuts into bigrams (the same range)


def page_sections(body: str) -> list[tuple[str, str, str]]:
    """(anchor, heading, whole text) of each section of a page."""
    parser = _Sections()
    parser.feed(body)
    parser.close()
    return [(anchor, heading, " ".join("".join(text).split()))
            for anchor, heading, text in parser.sections if heading or "".join(text).strip()]


def cjk_bigrams(text: str) -> list[str]:
    """Every pair of adjacent Chinese characters of `text`, once each, sorted: Chinese writes no spaces between
    words, so the search looks a term up by its bigrams (a two-character word such as 显存 is one)."""
    return sorted({run[i:i + 2] for run in CJK_RUN.findall(text) for i in range(len(run) - 1)})


def search_entries(href: str, label: str, kind: str, body: str) -> list[dict]:
    """The index entries of one page: one per section, with the page's label, the section's link, the start of its
    text and, where it has Chinese, the bigrams of its whole text (``grams``, space-separated)."""
    entries = []
    for anchor, heading, text in page_sections(body):
        entry = {"page": label, "kind": kind, "title": heading or label,
                 "href": f"{href}#{anchor}" if anchor else href, "text": text[:SECTION_TEXT]}
        grams = cjk_bigrams(f"{heading} {text}")
        if grams:
            entry["grams"] = " ".join(grams)
        entries.append(entry)
    return entries


def write_search_index(out: Path, entries: list[dict]) -> Path:
    """search-index.js: a script (not JSON to fetch, which browsers refuse from file://) that sets the index."""
    target = out / "search-index.js"
    payload = json.dumps(entries, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    target.write_text(f"window.TD_SEARCH_INDEX = {payload};\n", encoding="utf-8")
    return target


def navigation(current: str, root: str = "", switch: dict | None = None, language: str = "en") -> markupsafe.Markup:
    """The bar on every page: the course, the guides by reader, the search box and the language switch, in the
    page's `language`. `root` is the way from the page's folder to the site's root ("" or "../" for a page under
    zh_CN/); `switch` is the other language's link: {"href", "label", "lang", "twin"} (`language_switch`)."""
    text = frame_text(language)
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE / "torchdoctor"), autoescape=True)
    switch_title = None
    if switch:
        switch_title = text["switch_twin" if switch["twin"] else "switch_contents"].format(language=switch["label"])
    kinds = {kind: text[f"kind/{kind}"] for kind in ("chapter", "cheat sheet", "guide")}
    return markupsafe.Markup(templates.get_template("nav.html.j2").render(
        guides=[{"href": f"{stem}.html", "label": text[f"guide/{stem}"], "about": text[f"guide/{stem}/about"]}
                for stem in GUIDES],
        current=current, root=root, switch=switch, switch_title=switch_title, text=text,
        kinds=json.dumps(kinds, ensure_ascii=False)))


# ---------------------------------------------------------------------------------------------------------------
# The Chinese edition (issue 24): pages under zh_CN/, a language switch on every page.

CHINESE = i18n.LANGUAGE  # the folder of the Chinese pages, and the language's code in course.toml
LANGUAGE_LABELS = {"en": "English", CHINESE: "中文"}
HTML_LANG = {"en": "en", CHINESE: "zh-CN"}
# The words of the site's frame (the bar, the search box, a chapter page's links, the pager), by key. Their
# translations are in one catalogue, locale/zh_CN/site.po (msgctxt "site/<key>"), kept in step with these by
# `python -m course_tools.site --update-catalogue`; the notebooks themselves are translated by their own catalogues.
FRAME = {
    "download": "Download this notebook",
    "homework": "Homework: {name}",
    "contents": "Contents",
    "planned": "planned",
    "not_translated": "not in this language yet",
    "executed": "Executed by the course's tests ({executed}); run it yourself in JupyterLab.",
    "executed_in_english": "Executed by the course's tests ({executed}) in English: its outputs are the English "
                           "run's, its text is Chinese; run it yourself in JupyterLab.",
    "guides": "Guides:",
    "search_placeholder": "Search chapters, cheat sheet, guides",
    "search_label": "Search the course",
    "nothing_found": "Nothing found for “{query}”.",
    "kind/chapter": "chapter",
    "kind/cheat sheet": "cheat sheet",
    "kind/guide": "guide",
    "switch_twin": "this page in {language}",
    "switch_contents": "the contents in {language}",
    "widget_note": FRAME_NOTE,
    **{f"guide/{stem}": label for stem, (label, _) in GUIDES.items()},
    **{f"guide/{stem}/about": about for stem, (_, about) in GUIDES.items()},
}
FRAME_CONTEXT = "site"
FRAME_CATALOGUE = i18n.CATALOGUES / "site.po"


def frame_template() -> polib.POFile:
    """The untranslated catalogue of the frame's words."""
    pot = polib.POFile(wrapwidth=i18n.WRAPWIDTH, check_for_duplicates=False)
    pot.metadata = dict(i18n.HEADER)
    pot.header = ("Chinese (zh_CN) words of the course site's frame (course_tools/site.py FRAME): the bar, the "
                  "search box,\na chapter page's links. Written by `python -m course_tools.site --update-catalogue`; "
                  "keep {placeholders}.")
    for key, english in FRAME.items():
        pot.append(polib.POEntry(msgctxt=f"{FRAME_CONTEXT}/{key}", msgid=english,
                                      flags=["python-brace-format"] if "{" in english else []))
    return pot


def frame_text(language: str, catalogue: Path = FRAME_CATALOGUE) -> dict[str, str]:
    """The frame's words in `language`: FRAME, each replaced by its translation where the catalogue has one (not
    fuzzy) for the same English."""
    if language == "en":
        return dict(FRAME)
    translated = {(e.msgctxt, e.msgid): e.msgstr for e in i18n.load(catalogue)
                  if e.msgstr and "fuzzy" not in e.flags and not e.obsolete}
    return {key: translated.get((f"{FRAME_CONTEXT}/{key}", english), english) for key, english in FRAME.items()}


def update_frame_catalogue(catalogue: Path = FRAME_CATALOGUE) -> polib.POFile:
    merged = i18n.merge(i18n.load(catalogue) if catalogue.is_file() else None, frame_template())
    i18n.save(merged, catalogue)
    return merged


def language_switch(language: str, twin: str | None) -> dict:
    """The switch of a page in `language` to the other language: its twin page (a path from the site's root) or,
    when it has none, the other language's contents page."""
    other = "en" if language == CHINESE else CHINESE
    href = twin or ("index.html" if other == "en" else f"{CHINESE}/index.html")
    return {"href": href, "label": LANGUAGE_LABELS[other], "lang": HTML_LANG[other], "twin": twin is not None}


def chinese_notebooks() -> set[str]:
    """The notebooks (paths in the repository) whose Chinese edition is ready."""
    return {notebook for notebook, ready in i18n.notebooks().items() if ready}


def chinese_executed(executed: nbformat.NotebookNode, notebook: str) -> nbformat.NotebookNode:
    """The Chinese page's notebook: an executed one (code, outputs, metadata as they ran) with each markdown cell's
    source replaced by the Chinese notebook's cell of the same id, as the catalogue gives it now. `executed` is the
    Chinese run (its outputs printed in Chinese) or, where there is none, the English run: the Chinese notebook's
    code cells are the English ones (`make i18n-check` checks it), only what the library prints differs. Code cells
    are kept as executed (the page then hides the answers the runner filled in). Every cell of the Chinese notebook must
    be in the executed one, as the same kind of cell."""
    chinese = i18n.build_notebook(notebook, i18n.load(i18n.catalogue_path(notebook)))
    by_id = {cell.id: cell for cell in chinese.cells}
    page = copy.deepcopy(executed)
    for cell in page.cells:
        twin = by_id.get(cell.get("id"))
        if twin is None:
            continue  # the parameters cell papermill injected
        if twin.cell_type != cell.cell_type:
            raise ValueError(f"{notebook}: cell {cell.id} is {cell.cell_type} in English, {twin.cell_type} in Chinese")
        if cell.cell_type == "markdown":
            cell.source = twin.source
    missing = sorted(set(by_id) - {c.get("id") for c in page.cells})
    if missing:
        raise ValueError(f"{notebook}: cells {missing} are not in the executed notebook: execute it again")
    return page


def chinese_title(nb: nbformat.NotebookNode, fallback: str) -> str:
    """A Chinese page's title: its first heading ("第 1 章 —— 形状与维度"), else the English label."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#{1,2}\s+(.+?)\s*#*\s*$", cell.source, flags=re.M)
            if match:
                return match.group(1)
    return fallback


def site_css() -> str:
    """The guides' stylesheet: plain reading typography and Pygments' colours for the code blocks."""
    from pygments.formatters import HtmlFormatter

    return """body { font-family: system-ui, sans-serif; line-height: 1.5; margin: 0; color: #1f2328; }
.td-doc { max-width: 1000px; margin: 1em auto; padding: 0 16px; }
.td-doc table { border-collapse: collapse; margin: 1em 0; display: block; overflow-x: auto; }
.td-doc th, .td-doc td { border: 1px solid #d0d7de; padding: 4px 8px; vertical-align: top; text-align: left; }
.td-doc code { background: #f3f4f6; padding: 0 3px; border-radius: 3px; font-size: 90%; }
.td-doc pre { background: #f6f8fa; padding: 10px; overflow-x: auto; border-radius: 4px; }
.td-doc pre code { background: none; padding: 0; }
.td-doc .anchor-link { visibility: hidden; margin-left: 6px; text-decoration: none; }
.td-doc h1:hover .anchor-link, .td-doc h2:hover .anchor-link, .td-doc h3:hover .anchor-link { visibility: visible; }
.td-repo-path { font-family: monospace; font-size: 90%; }
.td-doc-footer { max-width: 1000px; margin: 2em auto; padding: 8px 16px; border-top: 1px solid #ddd; color: #555; }
""" + HtmlFormatter().get_style_defs(".highlight")


def build_guides(out: Path, chapter_pages: dict[str, str], templates: jinja2.Environment) -> list[tuple[Path, str]]:
    """Write each guide of docs/ as a page beside the chapters (library.md with its reference regenerated from the
    docstrings); return each page with its body, for the search index."""
    (out / "site.css").write_text(site_css(), encoding="utf-8")
    pages = []
    for stem, (label, _) in GUIDES.items():
        source = DOCS / f"{stem}.md"
        text = source.read_text(encoding="utf-8")
        if source == LIBRARY:
            text = library_with_reference(text)
        body = render_markdown(text, source, chapter_pages)
        title = next(iter(re.findall(r"^# (.+)$", text, flags=re.M)), label)
        page = templates.get_template("doc_page.html.j2").render(
            title=title, body=markupsafe.Markup(body),
            nav=navigation(f"{stem}.html", "", language_switch("en", None)),
            source=source.relative_to(REPO).as_posix())
        target = out / f"{stem}.html"
        target.write_text(page, encoding="utf-8")
        pages.append((target, body))
    return pages


def build(out: Path = OUT, run: bool = True, device: str = "cpu", executed: Path = BUILD) -> list[Path]:
    """Write the site to `out` from the executed notebooks under `executed` (build/notebooks/, or a snapshot of
    it: the tests use one): the English pages, then the Chinese ones under zh_CN/, each from its Chinese run
    (`executed`/build/zh_CN/<notebook>, written by `python -m course_tools.i18n run`) or, where there is none, from
    the English run with the Chinese text (its page says so)."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    wanted = pages()
    ready_chinese = chinese_notebooks()
    chinese_pages = [p for p in wanted if p.notebook in ready_chinese]
    if executed == BUILD:
        ensure_executed(wanted, run, device, chinese_pages)
    if out.exists():
        shutil.rmtree(out)
    for folder in ("notebooks", "homework", f"{CHINESE}/notebooks", f"{CHINESE}/homework"):
        (out / folder).mkdir(parents=True)

    # <html lang="...">: nbconvert takes ISO 639-1 codes only ("zh"), the page is set to its own below ("zh-CN")
    exporter = HTMLExporter(config=Config({"TemplateExporter": {"extra_template_basedirs": [str(TEMPLATE)]}}),
                            template_name="torchdoctor")

    manifest = load_manifest()
    executed_nbs = {p.notebook: nbformat.read(p.executed_in(executed), as_version=4) for p in wanted}
    ran_in_chinese = {p.notebook for p in chinese_pages if p.chinese_executed_in(executed).is_file()}
    chinese_nbs = {p.notebook: chinese_executed(
        nbformat.read(p.chinese_executed_in(executed), as_version=4) if p.notebook in ran_in_chinese
        else executed_nbs[p.notebook], p.notebook) for p in chinese_pages}
    chinese_labels = {p.notebook: chinese_title(chinese_nbs[p.notebook], p.label) for p in chinese_pages}

    ready_pages = {p.notebook for p in wanted}

    def toc_of(language: str) -> list[dict]:
        shown = {p.notebook for p in (chinese_pages if language == CHINESE else wanted)}
        entries = [(c.notebook, c.label, c.covers) for c in manifest.chapters]
        entries += [(r.notebook, r.title, r.covers) for r in manifest.references]
        return [{"label": chinese_labels.get(notebook, label) if language == CHINESE else label, "covers": covers,
                 "href": Path(notebook).with_suffix(".html").name if notebook in shown else None,
                 "ready": notebook in ready_pages}
                for notebook, label, covers in entries]

    written: list[Path] = []
    index_entries: list[dict] = []
    chapter_notebooks = {c.notebook for c in manifest.chapters}
    for language, shown in (("en", wanted), (CHINESE, chinese_pages)):
        folder = out if language == "en" else out / CHINESE
        root = "" if language == "en" else "../"
        prefix = "" if language == "en" else f"{CHINESE}/"
        text = frame_text(language)
        toc = toc_of(language)
        for i, page in enumerate(shown):
            nb = copy.deepcopy(executed_nbs[page.notebook] if language == "en" else chinese_nbs[page.notebook])
            hide_answers(nb, nbformat.read(REPO / page.notebook, as_version=4))  # the questions, not the answers
            label = page.label if language == "en" else chinese_labels[page.notebook]
            nb.metadata["title"] = f"{label} · Torch Doctor"  # the page's <title> (nbconvert's default: "Notebook")
            static_widgets(nb, text["widget_note"])
            settle_carriage_returns(nb)
            notebook_name = Path(page.notebook).name
            if language == "en":
                shutil.copy2(REPO / page.notebook, folder / "notebooks" / notebook_name)
            else:
                nbformat.write(i18n.build_notebook(page.notebook, i18n.load(i18n.catalogue_path(page.notebook))),
                               folder / "notebooks" / notebook_name)
            homework = None
            student = f"exercises/{page.homework}/{page.homework}.ipynb" if page.homework else None
            if student and language == "en":
                shutil.copy2(REPO / student, folder / "homework")
            elif student and student in ready_chinese:
                nbformat.write(i18n.build_notebook(student, i18n.load(i18n.catalogue_path(student))),
                               folder / "homework" / f"{page.homework}.ipynb")
            else:
                student = None  # no Chinese edition of the homework yet: the page does not offer one
            if student:
                homework = {"label": text["homework"].format(name=page.homework),
                            "href": f"homework/{page.homework}.ipynb"}
            parameters = nb.metadata.get("papermill", {}).get("parameters", {})
            ran_with = ", ".join(f"{k}={v!r}" for k, v in parameters.items())
            previous = shown[i - 1] if i > 0 else None
            following = shown[i + 1] if i + 1 < len(shown) else None
            twin = (f"{CHINESE}/{page.html_name}" if page in chinese_pages else None) if language == "en" \
                else page.html_name
            in_english = language == CHINESE and page.notebook not in ran_in_chinese
            site = {
                "title": label,
                "lang": HTML_LANG[language],
                "text": {**text, "executed": text["executed_in_english" if in_english else "executed"].format(
                    executed=ran_with)},
                "toc": toc,
                "current": page.html_name,
                "notebook": f"notebooks/{notebook_name}",
                "homework": homework,
                "previous": previous.html_name if previous else None,
                "previous_label": (previous.label if language == "en" else chinese_labels[previous.notebook])
                if previous else None,
                "next": following.html_name if following else None,
                "next_label": (following.label if language == "en" else chinese_labels[following.notebook])
                if following else None,
                "executed": ran_with,
                "nav": navigation(page.html_name, root, language_switch(language, twin and root + twin), language),
            }
            body, _ = exporter.from_notebook_node(nb, resources={"torchdoctor": site})
            body = re.sub(r'<html lang="[^"]*">', f'<html lang="{HTML_LANG[language]}">', body, count=1)
            target = folder / page.html_name
            target.write_text(body, encoding="utf-8")
            written.append(target)
            kind = "chapter" if page.notebook in chapter_notebooks else "cheat sheet"
            entries = search_entries(prefix + page.html_name, label, kind, body)
            index_entries += [{**e, "lang": HTML_LANG[language]} for e in entries]

    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE / "torchdoctor"), autoescape=True)
    templates.filters["code"] = inline_code
    index = templates.get_template("site_index.html.j2").render(
        toc=toc_of("en"), pages=[{"label": p.label, "href": p.html_name, "homework": p.homework} for p in wanted],
        course=manifest, nav=navigation("index.html", "", language_switch("en", f"{CHINESE}/index.html")))
    (out / "index.html").write_text(index, encoding="utf-8")
    written.append(out / "index.html")
    chinese_index = templates.get_template("site_index_zh_CN.html.j2").render(
        toc=toc_of(CHINESE), homework={p.html_name: p.homework for p in chinese_pages if p.homework and
                                       (out / CHINESE / "homework" / f"{p.homework}.ipynb").is_file()},
        nav=navigation("index.html", "../", language_switch(CHINESE, "../index.html"), CHINESE))
    (out / CHINESE / "index.html").write_text(chinese_index, encoding="utf-8")
    written.append(out / CHINESE / "index.html")

    chapter_pages = {p.notebook: p.html_name for p in wanted}
    for page, body in build_guides(out, chapter_pages, templates):
        written.append(page)
        index_entries += search_entries(page.name, GUIDES[page.stem][0], "guide", body)
    write_search_index(out, index_entries)
    shutil.copy2(TEMPLATE / "torchdoctor" / "search.js", out / "search.js")

    homework = sorted((out / "homework").glob("*.ipynb")) + sorted((out / CHINESE / "homework").glob("*.ipynb"))
    leaked = leaked_solutions(homework)
    if leaked:
        raise SystemExit(f"solution code reached the site's homework, refusing to publish it: {leaked[:3]}")
    # A chapter may teach what a homework then asks for; said, so that its author can decide.
    for line in leaked_solutions([p.executed_in(executed) for p in wanted]):
        print(f"warning: a chapter shows a homework solution cell verbatim: {line}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-run", action="store_true", help="fail instead of executing missing notebooks")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--language", choices=sorted(LANGUAGE_LABELS), default="en",
                        help="which contents page to name at the end (the site has both languages)")
    parser.add_argument("--library-reference", action="store_true",
                        help="rewrite the generated reference in docs/library.md from the docstrings, build nothing")
    parser.add_argument("--update-catalogue", action="store_true",
                        help=f"merge the frame's words (FRAME) into {FRAME_CATALOGUE.relative_to(REPO)}, build nothing")
    args = parser.parse_args(argv)
    if args.update_catalogue:
        merged = update_frame_catalogue()
        print(f"{FRAME_CATALOGUE.relative_to(REPO)}: {len(merged.untranslated_entries())} untranslated, "
              f"{len(merged.fuzzy_entries())} fuzzy")
        return 0
    if args.library_reference:
        LIBRARY.write_text(library_with_reference(LIBRARY.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the reference in {LIBRARY.relative_to(REPO)}")
        return 0
    started = time.perf_counter()
    written = build(args.out, run=not args.no_run, device=args.device)
    contents = args.out / ("index.html" if args.language == "en" else f"{CHINESE}/index.html")
    print(f"wrote {len(written)} pages to {args.out} (English and 中文) in {time.perf_counter() - started:.1f} s; "
          f"open {contents}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
