"""The chapters' staged hints: one TOML file per notebook (``torchdoctor/hints/<notebook stem>.toml``).

Each question is a table::

    [Q3]
    nudge = "what to look at: a cell, a line of the message, a concept"    # after the first wrong answer
    narrower = "a narrower hint"                                           # after the second and later ones
    answer = "the answer, shown only by reveal('Q3'); may use {expected}"   # and the check's other fields
    correct = "what a right answer shows (optional); may use the check's fields"
    keywords = ["no_grad", "detach"]   # the answer's key words: no nudge, narrower hint or misconception has them
                                       # ([] where the answer is a value the check computes: the runner audits it)

    [Q3.misconceptions]   # the likely wrong answers, by the names the check cell gives them
    mean-of-means = "what that wrong answer is: the misconception behind it, not the answer"

The English here is the source; ``make i18n-update`` puts every text in the gettext domain ``torchdoctor`` with
``quiz/<notebook>/<question>/<field>`` as context (``.../misconceptions/<name>`` for a misconception), so a
Chinese kernel prints the Chinese of ``locale/zh_CN/LC_MESSAGES/torchdoctor.po``.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from torchdoctor import explain_i18n

FOLDER = Path(__file__).resolve().parent
STAGED = ("nudge", "narrower")
TEXTS = ("nudge", "narrower", "answer", "correct")


@dataclass(frozen=True)
class Question:
    """The hints of one question of one notebook."""

    notebook: str
    name: str
    nudge: str
    narrower: str
    answer: str
    correct: str = ""
    keywords: tuple[str, ...] = ()
    misconceptions: dict[str, str] = field(default_factory=dict)

    def context(self, text: str) -> str:
        return f"quiz/{self.notebook}/{self.name}/{text}"

    def text(self, name: str) -> str:
        """One of TEXTS, in the current language."""
        english = getattr(self, name)
        return explain_i18n.text(self.context(name), english) if english else ""

    def misconception(self, name: str) -> str:
        return explain_i18n.text(self.context(f"misconceptions/{name}"), self.misconceptions[name])


def notebooks() -> list[str]:
    """Every notebook that has a hint file."""
    return sorted(path.stem for path in FOLDER.glob("*.toml"))


@functools.cache
def load(notebook: str, folder: Path = FOLDER) -> dict[str, Question]:
    """The questions of ``notebook`` (its stem, ``03_memory``); a clear error for a missing or malformed file."""
    path = Path(folder) / f"{notebook}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"no hints for {notebook!r}: write {path} (one table per question, see "
                                f"{__name__}'s docstring); notebooks with hints: {', '.join(notebooks())}")
    with open(path, "rb") as f:
        tables = tomllib.load(f)
    questions = {}
    for name, table in tables.items():
        missing = [key for key in ("nudge", "narrower", "answer") if not table.get(key)]
        missing += [] if "keywords" in table else ["keywords"]
        unknown = set(table) - {*TEXTS, "keywords", "misconceptions"}
        not_text = [key for key, text in table.get("misconceptions", {}).items() if not isinstance(text, str)]
        if missing or unknown or not_text:
            raise ValueError(f"{path.name} [{name}]: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) +
                ([f"unknown keys {', '.join(sorted(unknown))}"] if unknown else []) +
                ([f"misconceptions {', '.join(not_text)} are not one text each (quote a name with a dot: "
                  f'"like-2.4" = "...")'] if not_text else [])))
        questions[name] = Question(notebook, name, table["nudge"], table["narrower"], table["answer"],
                                   table.get("correct", ""), tuple(table.get("keywords", ())),
                                   dict(table.get("misconceptions", {})))
    return questions
