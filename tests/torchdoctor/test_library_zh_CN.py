"""What torchdoctor prints for a learner is Chinese under zh_CN (issue 37), and a Chinese notebook chooses Chinese for
its kernel by itself.

The scan calls each learner-facing function under ``TORCHDOCTOR_LANG=zh_CN`` with the course's own catalogue
(locale/zh_CN/LC_MESSAGES/torchdoctor.po) and fails on English prose in what it prints: three English words in a row,
or an English label ("cause:"), outside code spans, quoted text, Python code and the PyTorch messages themselves,
which stay English. The same scan of the English output finds English in every one, so it can fail.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import sys
import types

import pytest
import torch
from torch import nn

from course_tools.i18n_library import _calls, library_entries
from torchdoctor import cheatsheet, explain_i18n, ipython_extension, memory
from torchdoctor.catalog import CATALOG, CHAPTERS
from torchdoctor.explain import explain
from torchdoctor.gradients import NonFiniteReport, find_nonfinite
from torchdoctor.manifest import load_manifest, manifest_path
from torchdoctor.sanity import IndependenceCheck, InitLossCheck, OverfitCheck, UpdateCheck
from torchdoctor.shapes import shape_table

ASCII_RUN = re.compile(r"[\x20-\x7e]+")
WORD = re.compile(r"[A-Za-z][a-z'-]+[,;:?!]?$")  # a plain word: no digits, dots, brackets or inner capitals
# Python's words, which the catalog's fixes use in code written without backticks ("for n, p in ...").
KEYWORDS = {"and", "as", "else", "for", "from", "if", "import", "in", "is", "lambda", "not", "or", "return", "with"}
LABEL = re.compile(r"^[ \t*-]*[A-Za-z][A-Za-z ]+:", re.MULTILINE)
VERDICT = re.compile(r"\b(?:FAILED|PASSED)\b")
QUOTED = re.compile(r"``.*?``|`[^`\n]*`|'[^'\n]*'|\"[^\"\n]*\"|“[^”]*”|‘[^’]*’")
MESSAGES = sorted({line for e in CATALOG for line in (e.example, f"{e.exception_type}: {e.example}".splitlines()[0])},
                  key=len, reverse=True)


def english_prose(text: str, allowed: list[str] = MESSAGES) -> list[str]:
    """The English phrases and labels of a text, PyTorch's messages (``allowed``), code and quotes left out."""
    for message in allowed:
        text = text.replace(message, " ")
    text = QUOTED.sub(" ", text).replace("|", " ")  # a Markdown table's header reads as one phrase
    found = LABEL.findall(text) + VERDICT.findall(text)
    for run in ASCII_RUN.findall(text):
        words: list[str] = []
        for token in [*run.split(), ""]:
            if token and WORD.match(token) and token.rstrip(",;:?!") not in KEYWORDS:
                words.append(token)
                continue
            if len(words) >= 3:
                found.append(" ".join(words))
            words = []
    return found


class _Broken(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x - 10)


def _budget_message() -> tuple[str, list[str]]:
    """The simulated OOM's message; its first sentence is read like PyTorch's and stays English."""
    with pytest.raises(torch.OutOfMemoryError) as info:
        with memory.memory_budget(1024, device="cpu"):
            torch.zeros(1000)
    message = str(info.value)
    head = message[: message.index("in use.") + len("in use.")]
    return message, [head, *MESSAGES]


def _ipython_line(capsys) -> str:
    shell = types.SimpleNamespace(showtraceback=lambda *args, **kwargs: None)
    original = ipython_extension.explain
    ipython_extension.explain = lambda error: (_ for _ in ()).throw(ValueError("boom"))
    try:
        ipython_extension._handler(shell, RuntimeError, RuntimeError("x"), None)
    finally:
        ipython_extension.explain = original
    return capsys.readouterr().out


def _text_of(page: str) -> str:
    """The text a browser shows of an HTML table: each cell on a line of its own."""
    return html.unescape(re.sub(r"<[^>]+>", "\n", page))


def printed(capsys) -> dict[str, tuple[str, list[str]]]:
    """Every learner-facing text of the library (but the quiz's and the clinic's, tested with them), by name, with
    the English it may quote."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    texts = {
        "sanity: initial loss ok": InitLossCheck(2.30, math.log(10), 0.25, -1.0, 1.0, 2.0),
        "sanity: initial loss too high": InitLossCheck(9.0, math.log(10), 0.25, -9.0, 9.0, 2.0),
        "sanity: initial loss too low": InitLossCheck(0.1, math.log(10), 0.25, -9.0, 9.0, 2.0),
        "sanity: softmax before the loss": InitLossCheck(2.30, math.log(10), 0.25, 0.01, 0.3, 0.0),
        "sanity: sigmoid before the loss": InitLossCheck(2.30, math.log(10), 0.25, 0.01, 0.9, 3.0),
        "sanity: overfit ok": OverfitCheck([2.3, 0.01], 0.05),
        "sanity: overfit failed": OverfitCheck([2.3, 2.2], 0.05),
        "sanity: independent": IndependenceCheck(0),
        "sanity: samples mixed": IndependenceCheck(0, [1, 2]),
        "sanity: all updated": UpdateCheck([], 4),
        "sanity: not updated": UpdateCheck(["0.weight"], 4),
        "gradients: nothing found": NonFiniteReport(),
        "gradients: created here": NonFiniteReport("1 (LogScale)", "NaN", True),
        "gradients: came in": NonFiniteReport("1 (LogScale)", "Inf", False),
        "memory: report": memory.measure_memory(lambda: torch.zeros(1000), "cpu"),
    }
    out = {name: (str(value), MESSAGES) for name, value in texts.items()}
    out["memory: simulated budget"] = _budget_message()
    ok, failed = shape_table(model, torch.randn(2, 4)), shape_table(model, torch.randn(2, 5))
    out |= {"shapes: table": (str(ok), MESSAGES), "shapes: markdown": (ok._repr_markdown_(), MESSAGES)}
    failure = str(failed.error)
    out |= {"shapes: failed": (str(failed), [failure, *MESSAGES]),
            "shapes: failed markdown": (failed._repr_markdown_(), [failure, *MESSAGES])}
    table = cheatsheet.cheatsheet_table()
    out |= {"cheat sheet": (str(table), MESSAGES), "cheat sheet markdown": (table._repr_markdown_(), MESSAGES),
            "cheat sheet html": (_text_of(table._repr_html_()), MESSAGES)}
    empty = cheatsheet.cheatsheet_table(search="no such words here")
    out["cheat sheet, nothing found"] = (empty._repr_markdown_() + _text_of(empty._repr_html_()),
                                         ["no such words here"])
    widget = cheatsheet.interactive_cheatsheet()
    menu, search = widget.children[0].children
    out["cheat sheet widget"] = (f"{menu.options[0][0]}\n{search.placeholder}", MESSAGES)
    root = manifest_path().parent
    for chapter in load_manifest().chapters:
        if (root / chapter.notebook).is_file():
            summary = cheatsheet.chapter_summary(chapter.slug)
            out[f"summary of {chapter.slug}"] = (summary._repr_markdown_() + str(summary), MESSAGES)
    for entry in CATALOG:
        diagnosis = explain(entry.example)
        out[f"explain {entry.id}"] = (str(diagnosis) + "\n" + diagnosis._repr_markdown_(), MESSAGES)
    out["ipython: no diagnosis"] = (_ipython_line(capsys), ["ValueError: boom"])
    return out


@pytest.fixture
def speak(monkeypatch):
    """The course's own catalogue, in the language given."""
    monkeypatch.delenv(explain_i18n.ENV_LOCALEDIR, raising=False)
    monkeypatch.delenv(explain_i18n.NOTEBOOK_ENV, raising=False)
    return lambda language: monkeypatch.setenv(explain_i18n.ENV_LANG, language)


def test_what_the_library_prints_under_zh_CN_has_no_english_prose(speak, capsys):
    speak("zh_CN")
    texts = printed(capsys)
    english = {name: found for name, (text, allowed) in texts.items() if (found := english_prose(text, allowed))}
    assert not english, f"English under zh_CN (translate it in torchdoctor.po): {english}"


def test_the_scan_finds_english_in_every_text_printed_in_english(speak, capsys):
    speak("en")
    silent = [name for name, (text, allowed) in printed(capsys).items() if not english_prose(text, allowed)]
    assert not silent, f"the scan would not notice these untranslated: {silent}"


def test_chapters_and_the_last_line_of_explain_are_named_in_chinese(speak):
    speak("zh_CN")
    assert CHAPTERS["memory"] == "03 内存与显存" and cheatsheet.chapter_title("dimensions") == "01 维度与形状"
    assert all(re.search(r"[\u4e00-\u9fff]", label) for label in CHAPTERS.values())
    oom = next(e for e in CATALOG if e.id == "simulated-memory-budget")
    assert str(explain(oom.example)).splitlines()[-1].endswith("（03 内存与显存）")
    speak("en")
    assert CHAPTERS["memory"] == "03 Memory"


def test_torchdoctors_own_errors_stay_english_for_explain(speak):
    """An exception torchdoctor raises is read like PyTorch's, so its message is English in every language."""
    speak("zh_CN")
    net = nn.Sequential(nn.Identity(), _Broken())
    with pytest.raises(RuntimeError, match=r"first NaN in the output of 1 \(_Broken\): its input was finite") as info:
        with find_nonfinite(net):
            net(torch.ones(2, 3))
    assert explain(info.value).id == "nonfinite-forward"
    message, _ = _budget_message()
    assert message.startswith("Simulated CPU memory budget exceeded") and "张量" in message
    assert explain(message).id == "simulated-memory-budget" and memory.oom_numbers(message)["budget"] == 1024


# --- the notebook chooses the language ---------------------------------------------------------------------------


@pytest.fixture
def no_language(monkeypatch):
    for var in (explain_i18n.ENV_LANG, explain_i18n.NOTEBOOK_ENV, "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    return monkeypatch


def _notebook(path, language: str | None):
    metadata = {"kernelspec": {"name": "python3"}} | ({"torchdoctor": {"language": language}} if language else {})
    path.write_text(json.dumps({"cells": [], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_a_chinese_notebook_chooses_chinese_for_its_kernel(no_language, tmp_path):
    chinese = _notebook(tmp_path / "03_memory.ipynb", "zh_CN")
    assert explain_i18n.language() is None
    no_language.setenv(explain_i18n.NOTEBOOK_ENV, str(chinese))  # what jupyter_server gives the kernel
    assert explain_i18n.language() == "zh_CN" and str(UpdateCheck([], 3)) == "正常：全部 3 个可训练参数都变了"
    no_language.setenv(explain_i18n.ENV_LANG, "en")
    assert explain_i18n.language() is None, "TORCHDOCTOR_LANG wins over the notebook"
    no_language.delenv(explain_i18n.ENV_LANG)
    no_language.setenv(explain_i18n.NOTEBOOK_ENV, str(_notebook(tmp_path / "english.ipynb", None)))
    assert explain_i18n.language() is None
    no_language.setenv(explain_i18n.NOTEBOOK_ENV, "course/03_memory.ipynb")  # relative to the server's root
    no_language.chdir(tmp_path)  # the kernel runs in the notebook's folder
    assert explain_i18n.language() == "zh_CN"


def test_the_notebook_path_is_read_from_ipython_and_vs_code_too(no_language, tmp_path):
    chinese = _notebook(tmp_path / "c.ipynb", "zh_CN")
    shell = types.SimpleNamespace(user_ns={"__vsc_ipynb_file__": str(chinese)})
    no_language.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert explain_i18n.notebook_path() == chinese and explain_i18n.language() == "zh_CN"
    shell.user_ns = {"__session__": str(tmp_path / "missing.ipynb")}
    assert explain_i18n.notebook_path() is None and explain_i18n.language() is None


def test_a_kernel_started_for_a_built_chinese_notebook_prints_chinese(no_language, tmp_path):
    """As JupyterLab starts it: JPY_SESSION_NAME names the notebook (ipykernel also sets ``__session__`` from it)."""
    from jupyter_client.manager import start_new_kernel

    from course_tools import i18n

    notebook = i18n.build("course/cheatsheet.ipynb", out=tmp_path / "cheatsheet.ipynb")
    assert json.loads(notebook.read_text())["metadata"]["torchdoctor"]["language"] == "zh_CN"
    env = {k: v for k, v in os.environ.items() if k != explain_i18n.ENV_LANG}
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path),
                                       env=env | {explain_i18n.NOTEBOOK_ENV: str(notebook)})
    try:
        lines = []
        client.execute_interactive("import torchdoctor; print(__session__); print(torchdoctor.chapter_title('memory'))",
                                   output_hook=lambda msg: lines.append(msg["content"].get("text", "")), timeout=120)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert "".join(lines).split() == [str(notebook), "03", "内存与显存"]


# --- extraction -----------------------------------------------------------------------------------------------------


def test_every_printed_text_is_extracted_for_the_catalogue():
    entries = {(e.msgctxt, e.msgid) for e in library_entries()}
    assert ("sanity", "ok: all {total} trainable parameters changed") in entries
    assert ("cheatsheet", "Errors in this chapter: {chapter}") in entries
    assert {("chapter", c.title) for c in load_manifest().chapters} <= entries


def test_a_text_that_is_not_a_literal_cannot_be_extracted_and_fails(tmp_path, monkeypatch):
    import course_tools.i18n_library as library

    monkeypatch.setattr(library, "REPO", tmp_path)
    source = tmp_path / "module.py"
    source.write_text('tr = translator("x")\nok = tr("fine {n}", n=1)\nbad = tr(f"not {ok}")\n')
    with pytest.raises(ValueError, match="module.py:3: tr\\(\\) needs a literal string"):
        _calls(source, {"tr": "x"})


def test_the_notebook_runner_tells_the_kernel_its_notebook(no_language, tmp_path):
    """`make i18n-test-notebooks` (papermill) runs a Chinese notebook in Chinese, as JupyterLab does, and an English
    one in English; the runner's own process keeps no notebook."""
    import nbformat

    from course_tools.run_notebooks import run_one

    printed_titles = []
    for language in ("zh_CN", None):
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
        if language:
            nb.metadata["torchdoctor"] = {"language": language}
        nb.cells = [nbformat.v4.new_code_cell('DEVICE = "auto"\nFAST = False\nSEED = 0',
                                              metadata={"tags": ["parameters"]}),
                    nbformat.v4.new_code_cell("import torchdoctor\nprint(torchdoctor.chapter_title('memory'))")]
        path = tmp_path / f"{language or 'en'}.ipynb"
        nbformat.write(nb, path)
        result = run_one(path, {"DEVICE": "cpu", "FAST": True, "SEED": 0}, build=tmp_path / "run")
        assert result.problems == []
        executed = nbformat.read(tmp_path / "run" / path.name, as_version=4)
        printed_titles.append("".join(o.get("text", "") for o in executed.cells[-1].outputs).strip())
    assert printed_titles == ["03 内存与显存", "03 Memory"]
    assert explain_i18n.NOTEBOOK_ENV not in os.environ
