"""The parts of the course site (course_tools/site.py) that need no browser: widgets drawn from saved state,
progress text, the check that keeps solutions off the site. tests/browser/test_site.py looks at the pages in
Chromium."""

import html
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_tools import i18n, site
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


# ---------------------------------------------------------------------------------------------------------------
# The guides of docs/ on the site, the navigation and the search index (issue 26)


def test_headings_get_the_ids_github_gives_them():
    assert site.github_slug("Hidden tests: observe in the kernel, decide in the grader") == (
        "hidden-tests-observe-in-the-kernel-decide-in-the-grader")
    assert site.github_slug("Verdicts outside the student's process") == "verdicts-outside-the-students-process"
    assert site.github_slug("What `make test` runs") == "what-make-test-runs"
    body = site.render_markdown("## Grading a big class\n\n## Grading a big class\n", REPO / "docs" / "x.md", {})
    assert 'id="grading-a-big-class"' in body and 'id="grading-a-big-class-1"' in body


def test_links_of_a_guide_point_into_the_site():
    source = REPO / "docs" / "students.md"
    chapters = {"course/01_dimensions.ipynb": "01_dimensions.html"}
    body = site.render_markdown(
        "[a](instructors.md#grading-a-big-class) [b](../course/01_dimensions.ipynb) [c](../README.md#chapters) "
        "[d](../views/README.md) [e](https://example.org/) [f](#homework)", source, chapters)
    assert '<a href="instructors.html#grading-a-big-class">a</a>' in body
    assert '<a href="01_dimensions.html">b</a>' in body
    assert '<a href="index.html">c</a>' in body
    assert '<span class="td-repo-path" title="in the repository: ../views/README.md">d</span>' in body
    assert '<a href="https://example.org/">e</a>' in body and '<a href="#homework">f</a>' in body


def test_the_search_index_has_a_section_per_heading_without_navigation_or_prompts():
    body = ('<nav><a href="index.html">Torch Doctor</a></nav><p>intro</p>'
            '<h2 id="Symptom">Symptom<a class="anchor-link" href="#Symptom">¶</a></h2>'
            '<div class="jp-InputPrompt">In [3]:</div><pre>layer(x)</pre><p>RuntimeError: mat1 and mat2</p>'
            '<h3 id="Fix">Fix</h3><script>var x = 1;</script><p>reshape</p>')
    entries = site.search_entries("01_dimensions.html", "01 Dimensions", "chapter", body)
    assert [(e["title"], e["href"]) for e in entries] == [
        ("01 Dimensions", "01_dimensions.html"), ("Symptom", "01_dimensions.html#Symptom"),
        ("Fix", "01_dimensions.html#Fix")]
    assert entries[1]["text"] == "layer(x) RuntimeError: mat1 and mat2" and entries[2]["text"] == "reshape"


def test_every_guide_is_a_page_with_the_navigation_and_the_search(tmp_path):
    import jinja2

    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(site.TEMPLATE / "torchdoctor"), autoescape=True)
    pages = site.build_guides(tmp_path, {p.notebook: p.html_name for p in site.pages()}, templates)
    assert sorted(p.name for p, _ in pages) == sorted(f"{stem}.html" for stem in site.GUIDES)
    for page, _ in pages:
        text = page.read_text(encoding="utf-8")
        assert 'id="td-search"' in text and '<script src="search-index.js"></script>' in text, page.name
        for stem in site.GUIDES:
            assert f'href="{stem}.html"' in text, f"{page.name} does not link the {stem} guide"
    library = (tmp_path / "library.html").read_text(encoding="utf-8")
    assert 'id="explain"' in library and "Diagnose an exception" in library  # the generated reference
    entries = [e for page, body in pages for e in site.search_entries(page.name, page.stem, "guide", body)]
    index = site.write_search_index(tmp_path, entries).read_text(encoding="utf-8")
    assert index.startswith("window.TD_SEARCH_INDEX = [") and "</script" not in index
    assert any(e["href"] == "instructors.html#grading-a-big-class" for e in entries)


# ---------------------------------------------------------------------------------------------------------------
# The site in both languages (issue 24): Chinese pages under zh_CN/ from the English run, a switch on every page


def chinese_chapter() -> str:
    chapters = [p.notebook for p in site.pages() if p.notebook in site.chinese_notebooks()]
    assert chapters, "no chapter is zh_CN = \"ready\" in course.toml"
    return chapters[0]


def executed_copy(notebook: str, word: str = "output") -> nbformat.NotebookNode:
    """The committed notebook with an output on every code cell ("output 3"), as if the runner had executed it."""
    nb = nbformat.read(REPO / notebook, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = [new_output("stream", name="stdout", text=f"{word} {i}\n")]
            cell.execution_count = i
    return nb


def test_a_chinese_page_is_the_english_run_with_the_chinese_markdown():
    from course_tools import i18n

    notebook = chinese_chapter()
    english = executed_copy(notebook)
    page = site.chinese_executed(english, notebook)
    chinese = i18n.build_notebook(notebook, i18n.load(i18n.catalogue_path(notebook)))
    assert [c.id for c in page.cells] == [c.id for c in english.cells]
    for ran, shown, built in zip(english.cells, page.cells, chinese.cells, strict=True):
        if ran.cell_type == "code":
            assert shown == ran, f"code cell {ran.id}: not the English run's"
        else:
            assert shown.source == built.source and shown.metadata == ran.metadata
    assert any(s.source != e.source for s, e in zip(page.cells, english.cells, strict=True)), "nothing was translated"


def test_a_chinese_page_needs_every_cell_executed():
    notebook = chinese_chapter()
    english = executed_copy(notebook)
    del english.cells[-1]
    with pytest.raises(ValueError, match="not in the executed notebook"):
        site.chinese_executed(english, notebook)


def test_the_language_switch_leads_to_the_twin_or_to_the_other_contents():
    assert site.language_switch("en", "zh_CN/01_dimensions.html")["href"] == "zh_CN/01_dimensions.html"
    assert site.language_switch("en", None)["href"] == "zh_CN/index.html"
    assert site.language_switch("zh_CN", None) == {"href": "index.html", "label": "English", "lang": "en",
                                                   "twin": False}
    nav = site.navigation("01_dimensions.html", "../", site.language_switch("zh_CN", "../01_dimensions.html"))
    assert 'href="../01_dimensions.html" hreflang="en"' in nav and '<script src="../search-index.js">' in nav
    assert 'href="../students.html"' in nav and 'window.TD_SEARCH_ROOT = "../"' in nav


ENGLISH_RUN, CHINESE_RUN = "printed-by-the-English-run", "中文运行的输出"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> tuple[Path, list[site.Page]]:
    """A site of chapters 01-03 (which hold the searched terms) and the cheat sheet, from fake executed copies
    (nothing executed): each page's English run, and a Chinese run of each Chinese page but the cheat sheet's,
    which keeps the English run's outputs."""
    executed = tmp_path_factory.mktemp("executed")
    names = ("01_dimensions", "02_gradients", "03_memory", "cheatsheet")
    chosen = [p for p in site.pages() if Path(p.notebook).stem in names]
    assert len(chosen) == len(names)
    for page in chosen:
        target = page.executed_in(executed)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed_copy(page.notebook, ENGLISH_RUN), target)
        if page.notebook in site.chinese_notebooks() and page.notebook != "course/cheatsheet.ipynb":
            target = page.chinese_executed_in(executed)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(executed_copy(page.notebook, CHINESE_RUN), target)
    out = tmp_path_factory.mktemp("site") / "site"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(site, "pages", lambda: chosen)
        patch.setattr(site, "ensure_executed", lambda *a: pytest.fail("the test's site executes nothing"))
        site.build(out, run=False, executed=executed)
    return out, chosen


def test_the_site_has_both_languages(built_site):
    """Every page has the switch; a Chinese page offers the Chinese notebook and homework; nothing is executed."""
    out, chosen = built_site
    chapter = chosen[0]
    notebook = chapter.notebook
    english = (out / chapter.html_name).read_text(encoding="utf-8")
    chinese = (out / "zh_CN" / chapter.html_name).read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in chinese and '<html lang="en">' in english
    assert f'href="zh_CN/{chapter.html_name}" hreflang="zh-CN"' in english
    assert f'href="../{chapter.html_name}" hreflang="en"' in chinese
    for guide in site.GUIDES:
        assert 'id="td-language-switch"' in (out / f"{guide}.html").read_text(encoding="utf-8")
    index = (out / "zh_CN" / "index.html").read_text(encoding="utf-8")
    assert f'href="{chapter.html_name}"' in index and 'href="../index.html" hreflang="en"' in index
    downloaded = nbformat.read(out / "zh_CN" / "notebooks" / Path(notebook).name, as_version=4)
    assert all(not c.get("outputs") for c in downloaded.cells if c.cell_type == "code")
    assert downloaded.cells[0].source != nbformat.read(REPO / notebook, as_version=4).cells[0].source
    assert downloaded.metadata["torchdoctor"]["language"] == "zh_CN"  # it speaks Chinese in any Jupyter
    if chapter.homework:
        starter = nbformat.read(out / "zh_CN" / "homework" / f"{chapter.homework}.ipynb", as_version=4)
        english_starter = nbformat.read(REPO / "exercises" / chapter.homework / f"{chapter.homework}.ipynb",
                                        as_version=4)
        assert [c.source for c in starter.cells if c.cell_type == "code"] == [
            c.source for c in english_starter.cells if c.cell_type == "code"]
        assert f'href="homework/{chapter.homework}.ipynb"' in chinese
    index_js = (out / "search-index.js").read_text(encoding="utf-8")
    assert f'"href":"zh_CN/{chapter.html_name}' in index_js
    assert '"kind":"chapter","title"' in index_js and '"lang":"zh-CN"' in index_js


# ---------------------------------------------------------------------------------------------------------------
# The Chinese site in Chinese (issue 37 item 3): its outputs from the Chinese run, its titles, frame and search


def frame_of(page: str) -> str:
    """What a reader sees of the parts of a page that the site writes around the notebook (the bar, the page's links
    and the pager): their text, and the placeholders, labels and tooltips of their elements."""
    parts = re.findall(r'<nav [^>]*class="td-(?:bar|site-nav|pager)"[^>]*>.*?</nav>', page, flags=re.S)
    assert len(parts) == 3, "a chapter page has the bar, its links and the pager"
    frame = "\n".join(parts)
    shown = re.findall(r'(?:placeholder|aria-label|title)="([^"]*)"', frame)
    return html.unescape(" | ".join([re.sub(r"<[^>]+>", " | ", frame), *shown]))


def test_a_chinese_page_shows_the_chinese_run_where_there_is_one(built_site):
    out, chosen = built_site
    for page in chosen:
        if page.notebook not in site.chinese_notebooks():
            continue
        text = (out / "zh_CN" / page.html_name).read_text(encoding="utf-8")
        if page.notebook == "course/cheatsheet.ipynb":  # no Chinese run: the English outputs, and the page says so
            assert ENGLISH_RUN in text and CHINESE_RUN not in text, page.html_name
            assert "输出是英文版运行的输出" in text
        else:
            assert CHINESE_RUN in text and ENGLISH_RUN not in text, page.html_name
            assert "由课程的测试以中文执行" in text and "英文版运行" not in text, page.html_name


def test_chinese_pages_have_chinese_titles_lang_and_frame(built_site):
    out, chosen = built_site
    english_frame = [words for key, words in site.FRAME.items() if "{" not in words]
    for page in chosen:
        if page.notebook not in site.chinese_notebooks():
            continue
        text = (out / "zh_CN" / page.html_name).read_text(encoding="utf-8")
        built = i18n.build_notebook(page.notebook, i18n.load(i18n.catalogue_path(page.notebook)))
        title = site.chinese_title(built, "no heading")
        assert re.search(r"[\u4e00-\u9fff]", title), f"{page.notebook}: its first heading is not Chinese: {title}"
        assert f"<title>{html.escape(title, quote=False)} · Torch Doctor</title>" in text, page.html_name
        assert text.count('<html lang="zh-CN">') == 1, page.html_name
        frame = frame_of(text)
        shown = [words for words in english_frame if re.search(rf"\b{re.escape(words)}\b", frame)]
        assert not shown, f"zh_CN/{page.html_name}: English words in its frame: {shown}"
        assert "搜索章节、速查表、指南" in frame and "搜索课程" in frame and "下载本 notebook" in frame
    english = (out / chosen[0].html_name).read_text(encoding="utf-8")
    assert f"<title>{html.escape(chosen[0].label, quote=False)} · Torch Doctor</title>" in english
    assert 'placeholder="Search chapters, cheat sheet, guides"' in english


def test_the_frames_catalogue_is_complete_and_in_step_with_the_site():
    catalogue = i18n.load(site.FRAME_CATALOGUE)
    merged = i18n.merge(catalogue, site.frame_template())
    assert not merged.untranslated_entries() and not merged.fuzzy_entries() and not merged.obsolete_entries()
    assert [(e.msgctxt, e.msgid) for e in catalogue] == [(e.msgctxt, e.msgid) for e in site.frame_template()], (
        "run `python -m course_tools.site --update-catalogue` and translate the new words")
    glossary = i18n.load_glossary()
    for entry in catalogue:
        assert not i18n.verbatim_problems(entry.msgid, entry.msgstr), entry.msgctxt
        assert not i18n.glossary_problems(entry.msgid, entry.msgstr, glossary), entry.msgctxt
    chinese = site.frame_text("zh_CN")
    assert all(chinese[key] != english for key, english in site.FRAME.items()), "an untranslated word"


def test_chinese_is_indexed_by_its_character_bigrams():
    assert site.cjk_bigrams("梯度爆炸了 and 显存") == ["度爆", "显存", "梯度", "炸了", "爆炸"]
    assert site.cjk_bigrams("out of memory 显") == []
    long = "<h2 id=\"a\">显存</h2><p>" + "x " * site.SECTION_TEXT + "叶子张量</p>"
    entry = site.search_entries("zh_CN/03.html", "第 3 章", "chapter", long)[-1]
    assert len(entry["text"]) == site.SECTION_TEXT and "叶子" not in entry["text"]
    assert {"显存", "叶子", "子张", "张量"} <= set(entry["grams"].split()), "the whole section is indexed"


def hits(index: list[dict], query: str) -> list[dict]:
    """The Chinese entries search.js finds for a Chinese query: those holding each of its bigrams (as the browser
    test checks it in Chromium)."""
    wanted = site.cjk_bigrams(query)
    assert wanted, query
    return [e for e in index if e.get("lang") == "zh-CN"
            and set(wanted) <= set(e.get("grams", "").split()) | set(site.cjk_bigrams(e["title"]))]


@pytest.mark.parametrize("term", ["显存", "维度", "梯度爆炸", "叶子张量"])
def test_a_chinese_term_finds_sections_of_the_chinese_pages(built_site, term):
    out, _ = built_site
    text = (out / "search-index.js").read_text(encoding="utf-8")
    index = json.loads(text.removeprefix("window.TD_SEARCH_INDEX = ").rstrip().removesuffix(";"))
    found = hits(index, term)
    assert found, f"{term}: no section of a Chinese page"
    assert all(e["href"].startswith("zh_CN/") for e in found)
