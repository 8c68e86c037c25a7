"""The Chinese edition's machinery (course_tools.i18n, issue 24): catalogues extracted by cell id, merged with
msgmerge semantics, Chinese notebooks that differ from the English only in markdown text, and a check that fails
when it should."""

import copy

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_tools import i18n
from course_tools.release import REPO

GLOSSARY = [i18n.Term(("tensor",), ("张量",)), i18n.Term(("GPU memory",), ("显存",)),
            i18n.Term(("memory",), ("内存", "显存")), i18n.Term(("learning rate",), ("学习率",))]

INTRO = "# Chapter 9 — Shapes\n\nA tensor has a shape. See https://pytorch.org/docs for `x.view(2, 3)`."
ITEMS = "## 1. Two kinds\n\n- the first kind, 20 features\n- the second kind"
CHINESE = {
    "Chapter 9 — Shapes": "第 9 章 — 形状",
    "A tensor has a shape. See https://pytorch.org/docs for `x.view(2, 3)`.":
        "张量有形状。`x.view(2, 3)` 见 https://pytorch.org/docs 。",
    "1. Two kinds": "1. 两种情况",
    "the first kind, 20 features": "第一种，20 个特征",
    "the second kind": "第二种",
}


def _notebook(tmp_path, intro=INTRO, items=ITEMS):
    nb = new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nb.cells = [new_markdown_cell(intro, id="intro"), new_code_cell("x = 1\nprint(x)", id="code-1",
                                                                    metadata={"tags": ["keep"]}),
                new_markdown_cell(items, id="items")]
    (tmp_path / "course").mkdir(exist_ok=True)
    nbformat.write(nb, tmp_path / "course" / "09_x.ipynb")
    return "course/09_x.ipynb"


def _translate(pofile, table=CHINESE):
    for entry in pofile:
        if entry.msgid in table:
            entry.msgstr = table[entry.msgid]
    return pofile


@pytest.fixture
def project(tmp_path):
    notebook = _notebook(tmp_path)
    catalogue = tmp_path / "locale" / "09_x.po"
    i18n.update(notebook, root=tmp_path, catalogue=catalogue)
    return tmp_path, notebook, catalogue


def _check(project, ready=True):
    root, notebook, catalogue = project
    return i18n.check_notebook(notebook, ready, root=root, catalogue=catalogue, glossary=GLOSSARY).problems


def _edit(catalogue, change):
    pofile = i18n.load(catalogue)
    change(pofile)
    i18n.save(pofile, catalogue)


def test_extraction_keys_markdown_paragraphs_by_cell_id_in_cell_order(project):
    root, notebook, catalogue = project
    text = catalogue.read_text(encoding="utf-8")
    assert '"Language: zh_CN\\n"' in text and "charset=UTF-8" in text
    pofile = i18n.load(catalogue)
    assert [(e.msgctxt, e.msgid) for e in pofile] == [
        ("intro", "Chapter 9 — Shapes"), ("intro", list(CHINESE)[1]),
        ("items", "1. Two kinds"), ("items", "the first kind, 20 features"), ("items", "the second kind")]
    assert all("x = 1" not in e.msgid for e in pofile), "code cells are never extracted"
    assert pofile[3].comment == "section: ## 1. Two kinds"
    assert not any(e.msgstr for e in pofile)


def test_an_entry_without_words_is_filled_in_verbatim(tmp_path):
    notebook = _notebook(tmp_path, items="| a | b |\n| --- | --- |\n| `mat1` | **20** |")
    pofile = i18n.merge(None, i18n.template(notebook, tmp_path))
    assert {e.msgid: e.msgstr for e in pofile if e.msgctxt == "items"} == {"a": "", "b": "", "`mat1`": "`mat1`",
                                                                          "**20**": "**20**"}


def test_update_keeps_old_chinese_as_fuzzy_after_an_english_edit_and_obsoletes_a_deleted_paragraph(project):
    root, notebook, catalogue = project
    _edit(catalogue, _translate)
    _notebook(root, items="## 1. Two kinds\n\n- the first kind, 21 features")  # edited, and one item deleted
    merged = i18n.update(notebook, root=root, catalogue=catalogue)
    edited = merged.find("the first kind, 21 features", msgctxt="items")
    assert edited.msgstr == "第一种，20 个特征" and "fuzzy" in edited.flags
    assert edited.previous_msgid == "the first kind, 20 features"
    assert merged.find("Chapter 9 — Shapes", msgctxt="intro").msgstr == "第 9 章 — 形状"
    assert [(e.msgid, e.msgstr) for e in merged.obsolete_entries()] == [("the second kind", "第二种")]
    text = catalogue.read_text(encoding="utf-8")
    assert '#| msgid "the first kind, 20 features"' in text and '#~ msgid "the second kind"' in text
    # the translator fixes the number and drops the flag: the obsolete entry still fails a ready catalogue
    def review(pofile):
        for entry in pofile.fuzzy_entries():
            entry.msgstr, entry.previous_msgid = "第一种，21 个特征", None
            entry.flags.remove("fuzzy")

    _edit(catalogue, review)
    assert _check((root, notebook, catalogue)) == ["1 obsolete entries (#~): delete them once their text is reused"]
    # a second update changes nothing
    before = catalogue.read_text(encoding="utf-8")
    i18n.update(notebook, root=root, catalogue=catalogue)
    assert catalogue.read_text(encoding="utf-8") == before


def test_a_moved_paragraph_keeps_its_chinese_as_fuzzy_under_the_new_cell_id(project):
    root, notebook, catalogue = project
    _edit(catalogue, _translate)
    nb = nbformat.read(root / notebook, as_version=4)
    nb.cells[2].id = "items-renamed"
    nbformat.write(nb, root / notebook)
    merged = i18n.update(notebook, root=root, catalogue=catalogue)
    moved = merged.find("the second kind", msgctxt="items-renamed")
    assert moved.msgstr == "第二种" and "fuzzy" in moved.flags and moved.previous_msgctxt == "items"


def test_a_complete_translation_passes_and_builds_a_notebook_that_differs_only_in_markdown(project):
    root, notebook, catalogue = project
    _edit(catalogue, _translate)
    assert _check(project) == []
    english = nbformat.read(root / notebook, as_version=4)
    chinese = i18n.build_notebook(notebook, i18n.load(catalogue), root)
    assert [c.id for c in chinese.cells] == [c.id for c in english.cells]
    assert chinese.cells[1] == english.cells[1] and i18n.without_language(chinese.metadata) == english.metadata
    assert chinese.metadata["torchdoctor"]["language"] == "zh_CN"  # torchdoctor speaks Chinese in its kernel
    assert chinese.cells[0].source.startswith("# 第 9 章 — 形状\n\n张量有形状。")
    assert "- 第一种，20 个特征" in chinese.cells[2].source
    assert i18n.structure_problems(english, chinese) == []


@pytest.mark.parametrize("change, expected", [
    (lambda po: setattr(po[4], "msgstr", ""), "1 untranslated entries"),
    (lambda po: po[4].flags.append("fuzzy"), "fuzzy (the English changed"),
    (lambda po: setattr(po[1], "msgstr", "张量有形状。`x.view(3, 2)` 见 https://pytorch.org/docs 。"),
     "code spans differ from the English: missing ['x.view(2, 3)']"),
    (lambda po: setattr(po[1], "msgstr", "张量有形状。`x.view(2, 3)` 见 https://pytorch.org/ 。"),
     "URLs and link targets differ"),
    (lambda po: setattr(po[3], "msgstr", "第一种，十个特征"), "numbers differ from the English: missing ['20']"),
    (lambda po: setattr(po[1], "msgstr", "张量有形状。`x.view(2, 3)` 见 https://pytorch.org/docs $x$。"),
     "math differ"),
    (lambda po: setattr(po[1], "msgstr", "张量有形状。`x.view(2, 3)` 见 https://pytorch.org/docs 。[R1.2]"),
     "requirement ids differ"),
    (lambda po: setattr(po[1], "msgstr", "张力有形状。`x.view(2, 3)` 见 https://pytorch.org/docs 。"),
     "glossary: 'tensor' is translated as '张量'"),
])
def test_a_ready_catalogue_fails_on(project, change, expected):
    root, notebook, catalogue = project
    _edit(catalogue, lambda po: (_translate(po), change(po)))
    problems = _check(project)
    assert any(expected in p for p in problems), problems


def test_an_obsolete_entry_fails_a_ready_catalogue(project):
    root, notebook, catalogue = project
    _edit(catalogue, lambda po: (_translate(po), po.append(i18n.polib.POEntry(
        msgctxt="gone", msgid="Old text", msgstr="旧文", obsolete=True))))
    assert "1 obsolete entries" in " ".join(_check(project))


def test_a_catalogue_behind_the_english_fails(project):
    root, notebook, catalogue = project
    _edit(catalogue, _translate)
    _notebook(root, items=ITEMS + "\n- a third kind")
    assert any("out of date with the English (1 new" in p for p in _check(project))


def test_numbers_and_code_are_compared_as_tokens_whatever_the_chinese_around_them():
    assert i18n.verbatim_problems("See chapter 2: (4x20 and 10x32), 1,000 steps.",
                                  "见第2章：(4x20 and 10x32)，1000 步。") == []
    assert i18n.verbatim_problems("the 3rd of `x[0]`", "`x[0]` 的第 3 个") == []
    assert i18n.verbatim_problems("chapter 03", "第 3 章") == [], "a leading zero is not part of the number"
    assert i18n.verbatim_problems("lr 0.1", "学习率 0.01") == ["numbers differ from the English: missing ['0.1']; "
                                                             "not in the English ['0.01']"]


def test_the_glossary_prefers_the_longer_term_and_ignores_code():
    assert i18n.glossary_problems("Free GPU memory first.", "先释放显存。", GLOSSARY) == []
    assert i18n.glossary_problems("Host memory.", "主机记忆。", GLOSSARY) == [
        "glossary: 'memory' is translated as '内存/显存' (not found in the translation)"]
    assert i18n.glossary_problems("Call `tensor.view`.", "调用 `tensor.view`。", GLOSSARY) == []
    assert i18n.glossary_problems("Two tensors and a Learning Rate.", "两个张量和学习率。", GLOSSARY) == []
    assert i18n.glossary_problems("A learning-rate finder.", "学习率查找器。", GLOSSARY) == []


def test_a_translator_comment_exempts_one_term_of_one_entry_with_a_reason():
    exempt, problems = i18n.glossary_exemptions("glossary-ok: memory: 'from memory' means recall here")
    assert exempt == {"memory"} and problems == []
    assert i18n.glossary_problems("Don't type it from memory; free the GPU memory.", "不要凭记忆输入；释放显存。",
                                  GLOSSARY, exempt) == []
    assert i18n.glossary_problems("Type it from memory, tensor by tensor.", "凭记忆逐个输入。", GLOSSARY, exempt) == [
        "glossary: 'tensor' is translated as '张量' (not found in the translation)"]
    assert i18n.glossary_exemptions("glossary-ok: memory")[1], "an exemption without a reason is a problem"


def test_the_course_glossary_parses_and_has_the_issues_terms():
    terms = {e: t.chinese for t in i18n.load_glossary() for e in t.english}
    for english, chinese in [("tensor", "张量"), ("gradient", "梯度"), ("backward pass", "反向传播"),
                             ("GPU memory", "显存"), ("checkpoint", "检查点"), ("learning rate", "学习率"),
                             ("batch", "批量"), ("loss", "损失"), ("optimizer", "优化器"), ("forward pass", "前向传播"),
                             ("weight", "权重"), ("parameter", "参数"), ("dtype", "数据类型"), ("device", "设备"),
                             ("mixed precision", "混合精度"), ("overfitting", "过拟合"), ("convergence", "收敛")]:
        assert chinese in terms[english], english


# Issue 37 item 4: one preferred form per term. Each variant the issue found in the Chinese text, in a sentence
# whose English has the term, and the preferred form in the same sentence.
VARIANTS = [
    ("What older tutorials get wrong", "旧教程的常见错误", "旧教程错在哪里"),
    ("What older tutorials get wrong", "较早的教程错在哪里", "旧教程错在哪里"),
    ("What older tutorials get wrong", "旧教程的错误之处", "旧教程错在哪里"),
    ("Then a box on what older tutorials get wrong.", "然后是一个旧教程常见错误的专栏。",
     "然后是一个“旧教程错在哪里”专栏。"),
    ("Check yourself", "自我检测", "自测"),
    ("The grader checks it on other inputs.", "评分器会在其他输入上检查它。", "评分程序会在其他输入上检查它。"),
    ("Run this notebook.", "运行这个笔记本。", "运行这个 notebook。"),
    ("Run the notebook on a laptop.", "在笔记本电脑上运行这个笔记本。", "在笔记本电脑上运行这个 notebook。"),
    ("It says CUDA out of memory.", "它报告 CUDA 显存不足。", "它报告 CUDA 显存溢出。"),
    ("Anatomy of the out-of-memory message", "剖析显存不足的报错信息", "剖析显存溢出的报错信息"),
    ("Use activation checkpointing.", "使用激活检查点。", "使用梯度检查点。"),
    ("Use gradient checkpointing.", "使用激活检查点。", "使用梯度检查点。"),
    ("Each dimension has a stride.", "每个维度都有一个步长。", "每个维度都有一个步幅。"),
    ("Each dimension has a stride.", "每个维度都有一个 stride。", "每个维度都有一个步幅（stride）。"),
    ("A strided convolution.", "一个带步长的卷积。", "一个带步幅的卷积。"),
    ("See chapter 01, §3.", "见第 01 章，§3。", "见第 1 章，§3。"),
    ("As chapter 7 teaches.", "正如第 07 章所教的。", "正如第 7 章所教的。"),
]


@pytest.mark.parametrize("english, variant, preferred", VARIANTS)
def test_the_glossary_check_rejects_each_variant_the_issue_found(english, variant, preferred):
    glossary = i18n.load_glossary()
    rejected = i18n.glossary_problems(english, variant, glossary) + i18n.verbatim_problems(english, variant)
    assert any(p.startswith("glossary:") for p in rejected), (english, variant)
    assert i18n.glossary_problems(english, preferred, glossary) + i18n.verbatim_problems(english, preferred) == []


def test_a_laptop_is_not_a_notebook_and_a_rejected_form_counts_only_where_the_english_has_the_term():
    glossary = i18n.load_glossary()
    assert i18n.glossary_problems("Most readers have a laptop.", "大多数读者用的是笔记本电脑。", glossary) == []
    assert i18n.glossary_problems("On a laptop, run the notebook.", "在笔记本电脑上运行 notebook。", glossary) == []
    assert i18n.glossary_problems("Most readers have a laptop.", "大多数读者用的是笔记本。", glossary) == [
        "glossary: 'laptop' is translated as '笔记本电脑' (not found in the translation)"]
    # 步长 is the size of a step: only where the English says stride is it the wrong word.
    assert i18n.glossary_problems("The learning rate sets the step size.", "学习率决定步长。", glossary) == []
    # A quoted PyTorch message keeps its English: the translator exempts the term for that entry.
    quoted = "A pooling layer fails with *stride should not be zero*."
    chinese = "池化层会报错 *stride should not be zero*。"
    assert i18n.glossary_problems(quoted, chinese, glossary)
    exempt, _ = i18n.glossary_exemptions("glossary-ok: stride: it is PyTorch's English message, quoted")
    assert i18n.glossary_problems(quoted, chinese, glossary, exempt) == []


def test_the_glossary_has_one_preferred_form_and_its_rejected_forms(tmp_path):
    path = tmp_path / "glossary.tsv"
    path.write_text("english\tchinese\trejected\tnote\ngrader\t评分程序\t评分器/判分器\tthe homework's grading\n"
                    "tensor\t张量\n", encoding="utf-8")
    grader = i18n.Term(("grader",), ("评分程序",), "the homework's grading", ("评分器", "判分器"))
    assert i18n.load_glossary(path) == [grader, i18n.Term(("tensor",), ("张量",))]
    path.write_text("english\tchinese\trejected\tnote\ngrader\t评分程序\t评分程序/评分器\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="preferred and rejected"):
        i18n.load_glossary(path)
    several = [t for t in i18n.load_glossary() if len(t.chinese) > 1]
    assert {e for t in several for e in t.english} == {"memory", "out of memory", "out-of-memory"}, \
        "only a term with two senses (host and GPU memory) has two Chinese forms"


def test_structure_problems_catch_any_change_outside_markdown_text(project):
    root, notebook, _ = project
    english = nbformat.read(root / notebook, as_version=4)

    def changed(edit):
        chinese = copy.deepcopy(english)
        chinese.metadata["torchdoctor"] = {"language": "zh_CN"}  # as i18n.build_notebook writes it
        edit(chinese)
        return " ".join(i18n.structure_problems(english, chinese))

    assert "code cell code-1: differs" in changed(lambda nb: setattr(nb.cells[1], "source", "x = 2"))
    assert "code cell code-1: differs" in changed(lambda nb: nb.cells[1].metadata.update(tags=[]))
    assert "code cell code-1: differs" in changed(lambda nb: nb.cells[1].outputs.append(
        nbformat.v4.new_output("stream", text="1\n")))
    assert "in id, type or order" in changed(lambda nb: nb.cells.reverse())
    assert "in id, type or order" in changed(lambda nb: setattr(nb.cells[0], "id", "other"))
    assert "2 cells instead of the English 3" in changed(lambda nb: nb.cells.pop())
    assert "markdown cell intro: metadata" in changed(lambda nb: nb.cells[0].metadata.update(x=1))
    assert "torchdoctor.language" in changed(lambda nb: nb.metadata.pop("torchdoctor"))
    assert "notebook metadata" in changed(lambda nb: nb.metadata.update(language_info={"name": "python"}))
    assert "code blocks differ" in changed(lambda nb: setattr(nb.cells[2], "source", "```python\nx\n```"))
    assert changed(lambda nb: setattr(nb.cells[0], "source", "# 第 9 章")) == ""


@pytest.mark.parametrize("notebook", list(i18n.notebooks()))
def test_every_course_notebook_translated_in_full_keeps_its_structure_and_every_paragraph(notebook):
    """A stand-in translation of every entry: the Chinese notebook has the English cells, code and metadata, and
    every translated paragraph appears in it (mdpo renders each cell again, so this is what could go wrong)."""
    pofile = i18n.merge(None, i18n.template(notebook))
    english = nbformat.read(REPO / notebook, as_version=4)
    untranslated = i18n.build_notebook(notebook, pofile)
    untranslated.metadata = i18n.without_language(untranslated.metadata)
    assert untranslated == english, "untranslated, the Chinese notebook is the English one but for its language"
    for entry in pofile:
        entry.msgstr = entry.msgstr or f"译文：{entry.msgid}"
    chinese = i18n.build_notebook(notebook, pofile)
    assert i18n.structure_problems(english, chinese) == []
    text = " ".join(" ".join(c.source.split()) for c in chinese.cells if c.cell_type == "markdown")
    missing = [e.msgid for e in pofile if e.msgstr.startswith("译文") and " ".join(e.msgstr.split()) not in text]
    assert not missing


@pytest.mark.parametrize("notebook", [n for n in i18n.notebooks() if n.startswith("exercises/")])
def test_nbgrader_never_locks_or_grades_a_markdown_cell_of_the_homework(notebook):
    """A translated markdown cell must not change a checksum: nbgrader would then refuse the Chinese submission."""
    name = notebook.split("/")[1]
    assert i18n.nbgrader_problems(notebook) == []
    assert i18n.nbgrader_problems(f"autograder/source/{name}/{name}.ipynb") == []


def test_the_course_check_passes_on_main_and_prints_each_notebooks_share(capsys):
    assert i18n.main(["check"]) == 0
    out = capsys.readouterr().out
    for notebook in i18n.notebooks():
        assert notebook in out
    assert "translated (" in out and "notebooks ready in zh_CN" in out


# --- explain() in Chinese: the gettext domain torchdoctor ---------------------------------------------------------

MAT1 = "mat1 and mat2 shapes cannot be multiplied (32x128 and 784x10)"
FAKE = {
    "mat1-mat2-shapes/title": "全连接层的输入大小不匹配",
    "mat1-mat2-shapes/specific_fix": "该层是 nn.Linear({expected}, {out})，输入是 {rows} 行、每行 {got} 个特征。",
}
ZH_LAYOUT = "torchdoctor：{title} [{id}]\n  原因：{cause}\n  解决：{fix}\n  更多：第 '{chapter}' 章（{chapter_title}）"


@pytest.fixture
def chinese_explain(tmp_path, monkeypatch):
    """A locale folder whose torchdoctor.po translates one entry (its cause only fuzzily) and the printed layout,
    chosen by TORCHDOCTOR_LANG=zh_CN."""
    from torchdoctor.explain import TEXT_LAYOUT

    pofile = i18n.merge(None, i18n.torchdoctor_template())
    for entry in pofile:
        if entry.msgctxt in FAKE:
            entry.msgstr = FAKE[entry.msgctxt]
        elif entry.msgctxt == "diagnosis" and entry.msgid == TEXT_LAYOUT:
            entry.msgstr = ZH_LAYOUT
        elif entry.msgctxt == "mat1-mat2-shapes/cause":
            entry.msgstr, entry.flags = "一个未经审校的译文", ["fuzzy"]  # never shown
    path = tmp_path / "zh_CN" / "LC_MESSAGES" / "torchdoctor.po"
    i18n.save(pofile, path)
    monkeypatch.setenv("TORCHDOCTOR_LOCALEDIR", str(tmp_path))
    monkeypatch.setenv("TORCHDOCTOR_LANG", "zh_CN")
    return tmp_path


def test_explain_speaks_chinese_with_torchdoctor_lang(chinese_explain):
    from torchdoctor.catalog import get_entry
    from torchdoctor.explain import explain

    diagnosis = explain(MAT1)
    assert diagnosis.id == "mat1-mat2-shapes"  # matched by the English pattern
    assert diagnosis.title == "全连接层的输入大小不匹配"
    assert diagnosis.fix == "该层是 nn.Linear(784, 10)，输入是 32 行、每行 128 个特征。"
    assert diagnosis.cause == get_entry("mat1-mat2-shapes").cause, "a fuzzy translation is never shown"
    assert str(diagnosis).startswith("torchdoctor：全连接层的输入大小不匹配 [mat1-mat2-shapes]\n  原因：")
    other = explain("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!")
    assert other.title == get_entry(other.id).title, "an untranslated entry stays English"


def test_explain_stays_english_without_a_language(chinese_explain, monkeypatch):
    from torchdoctor.catalog import get_entry
    from torchdoctor.explain import explain

    monkeypatch.setenv("TORCHDOCTOR_LANG", "en")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    english = explain(MAT1)
    assert english.title == get_entry("mat1-mat2-shapes").title and str(english).startswith("torchdoctor: Linear")
    monkeypatch.delenv("TORCHDOCTOR_LANG")
    assert explain(MAT1).title == "全连接层的输入大小不匹配", "the locale chooses Chinese too"
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert explain(MAT1) == english


def test_the_cheat_sheet_speaks_chinese_with_torchdoctor_lang(chinese_explain, monkeypatch):
    from torchdoctor.cheatsheet import cheatsheet_table

    table = cheatsheet_table(search="mat1 and mat2")
    assert "全连接层的输入大小不匹配" in table._repr_markdown_() and "全连接层的输入大小不匹配" in str(table)
    monkeypatch.setenv("TORCHDOCTOR_LANG", "en")
    assert "全连接层" not in table._repr_html_()


def test_python_m_torchdoctor_explain_honours_torchdoctor_lang(chinese_explain):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "torchdoctor", "explain", MAT1], capture_output=True, text=True,
                         env=os.environ, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "全连接层的输入大小不匹配" in out.stdout and "nn.Linear(784, 10)" in out.stdout


def test_the_torchdoctor_catalogue_is_in_step_with_the_error_catalog():
    report = i18n.check_torchdoctor(ready=False)
    assert not [p for p in report.problems if "out of date" in p or "no catalogue" in p], report.problems[:3]
    assert report.total > 3 * 80  # title, cause and fix of every entry


def test_a_translated_homework_starter_passes_the_notebook_runners_checks(tmp_path):
    """The runner's checks on a Chinese notebook (every markdown paragraph replaced): a starter fails only where
    the student has work to do, exactly as the English one."""
    from course_tools.run_notebooks import run_one

    notebook = "exercises/hw1_dimensions/hw1_dimensions.ipynb"
    pofile = i18n.merge(None, i18n.template(notebook))
    for entry in pofile:
        entry.msgstr = entry.msgstr or f"译文：{entry.msgid}"
    chinese = i18n.build_notebook(notebook, pofile)
    assert any("译文" in c.source for c in chinese.cells if c.cell_type == "markdown")
    path = tmp_path / "hw1_dimensions.ipynb"
    nbformat.write(chinese, path)
    result = run_one(path, {"DEVICE": "cpu", "FAST": True, "SEED": 0}, build=tmp_path / "run", starter=True)
    assert result.problems == []
