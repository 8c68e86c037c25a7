"""Grade the attack corpus: submissions that try to cheat or break the grader, beside honest controls.

tests/attack_corpus/toy_guard.ipynb is a small assignment written in the course's hidden-test pattern;
tests/attack_corpus/attacks.toml lists submissions built from its solution or starter: ``cells`` replaces
solution cells (``{COURSE}`` and ``{PORT}`` in them become the scratch course's path and a loopback port a
listener watches), ``delete`` / ``empty`` / ``strip`` tamper with cells by grade_id, ``append`` adds cells at the
end (``source`` and optional ``nbgrader`` metadata), ``links`` adds symbolic links to the submitted folder (name:
target), ``deserves`` gives the score
of each graded cell that does not deserve full points, ``tampering`` the cells that must be reported.

Everything is graded in one batch, in a scratch copy of the course, by ``course_tools.grading.autograde``. Then:
every score is the deserved one, no attack reached the listener, no submitted file changed, and the reports
name the tampered cells. The grader's environment holds a made-up credential (``SECRET_ENV``) that no kernel
must see.

Usage: python -m course_tools.grading.attack_corpus
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import nbformat.v4
from nbformat import NotebookNode
from nbgrader.api import Gradebook

from course_tools.grading import autograde
from course_tools.release import COURSE, REPO, nbgrader, solution_notebook

CORPUS = REPO / "tests" / "attack_corpus"
ASSIGNMENT = "toy_guard"
# Scratch-course overrides: short timeouts, so the endless loop and the slow cells cost seconds. The notebook's
# budget leaves the endless loop's submission 30 s after its 8-s cell for a new kernel, the re-run and part 2 (15 s
# was too little on a machine loaded by make test's other parts: part 2 was cut off).
OVERRIDES = ("\nc.ExecutePreprocessor.timeout = 8\nc.SandboxedKernelManager.cpu_seconds = 30\n"
             "c.SandboxedExecute.notebook_timeout = 40\n")
SECRET_ENV = "JUPYTERHUB_API_TOKEN"  # what a grader running on a hub has in its environment


@dataclass
class Attack:
    name: str
    why: str
    base: str = "solution"
    cells: dict[str, str] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    strip: list[str] = field(default_factory=list)
    append: list[dict] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)
    deserves: dict[str, float] = field(default_factory=dict)
    tampering: list[str] = field(default_factory=list)


def load() -> list[Attack]:
    return [Attack(**entry) for entry in tomllib.loads((CORPUS / "attacks.toml").read_text())["submission"]]


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def build(attack: Attack, bases: dict[str, NotebookNode], fill: dict[str, str]) -> NotebookNode:
    nb = copy.deepcopy(bases[attack.base])
    by_id = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    for grade_id, source in attack.cells.items():
        for key, value in fill.items():
            source = source.replace("{" + key + "}", value)
        by_id[grade_id].source = source.strip("\n")
    for grade_id in attack.empty:
        by_id[grade_id].source = ""
    for grade_id in attack.strip:
        del by_id[grade_id].metadata["nbgrader"]
    nb.cells = [c for c in nb.cells if _grade_id(c) not in attack.delete]
    for extra in attack.append:
        cell = nbformat.v4.new_code_cell(extra["source"].strip("\n"))
        if "nbgrader" in extra:
            cell.metadata["nbgrader"] = extra["nbgrader"]
        nb.cells.append(cell)
    return nb


class Listener:
    """A TCP server on the grader's loopback that records whether any kernel reached it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def make_course(scratch: Path, config_text: str | None = None, db_url: str | None = None) -> Path:
    course = scratch / "course"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    text = config_text if config_text is not None else (COURSE / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(text + OVERRIDES)
    shutil.copy(CORPUS / f"{ASSIGNMENT}.ipynb", course / "source" / ASSIGNMENT)
    nbgrader("generate_assignment", ASSIGNMENT, "--force", *([f"--CourseDirectory.db_url={db_url}"] if db_url else []),
             course=course)
    return course


def grade(scratch: Path, attacks: list[Attack], config_text: str | None = None, args: tuple[str, ...] = (),
          db_url: str | None = None) -> dict:
    """Grade every submission in one batch; scores, results JSON, listener hits and the batch's exit status.
    ``args`` go to the autograde command (an engine, a scheduler); ``db_url`` is the gradebook."""
    course = make_course(scratch, config_text, db_url)
    bases = {"release": nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4),
             "solution": solution_notebook(ASSIGNMENT, course)}
    listener = Listener()
    fill = {"COURSE": str(course), "PORT": str(listener.port)}
    for attack in attacks:
        folder = course / "submitted" / attack.name / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(build(attack, bases, fill), folder / f"{ASSIGNMENT}.ipynb")
        for name, target in attack.links.items():
            os.symlink(target.replace("{COURSE}", str(course)), folder / name)
    saved = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = secrets.token_hex(16)
    try:
        status = autograde.main([ASSIGNMENT, "--course", str(course), "--force", *args,
                                 *(["--db-url", db_url] if db_url else [])])
    finally:
        if saved is None:
            del os.environ[SECRET_ENV]
        else:
            os.environ[SECRET_ENV] = saved
    listener.close()
    scores = {}
    with Gradebook(*autograde.gradebook_url(course, db_url)) as gb:
        for attack in attacks:
            nb = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, attack.name)
            scores[attack.name] = {g.name: (g.score, g.max_score, g.manual_score) for g in nb.grades}
    results = json.loads((course / "results" / f"{ASSIGNMENT}.json").read_text())
    return {"scores": scores, "results": results, "connections": listener.connections, "status": status,
            "course": course}


def problems(attacks: list[Attack], graded: dict) -> list[str]:
    found = []
    if graded["status"] != 0:
        found.append(f"the batch exited with status {graded['status']}")
    if graded["connections"]:
        found.append(f"{graded['connections']} connection(s) reached the grader's loopback listener")
    results = graded["results"]
    if results["submitted_files_changed"] or results["ungraded"]:
        found.append(f"changed: {results['submitted_files_changed']}, ungraded: {results['ungraded']}")
    for attack in attacks:
        for cell, (score, most, manual) in sorted(graded["scores"][attack.name].items()):
            deserved = attack.deserves.get(cell, most)
            if score != deserved or manual is not None:
                found.append(f"{attack.name} ({attack.why.strip()}): {cell} scored {score} of {most} "
                             f"(manual score {manual}), deserves {deserved}; the cell showed: "
                             f"{cell_outcome(graded['course'], attack.name, cell)}")
        reported = sorted({item["cell"] for item in results["tampering"].get(attack.name, [])})
        if reported != sorted(attack.tampering):
            found.append(f"{attack.name}: tampering reported for {reported}, expected {sorted(attack.tampering)}")
    return found


def cell_outcome(course: Path, student: str, cell: str, limit: int = 600) -> str:
    """What grade cell ``cell`` of ``student``'s autograded notebook showed (the grader's verdict, errors, streams):
    why it scored what it did, quoted where a score differs from the one deserved."""
    path = course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not path.is_file():
        return f"nothing: {path} is missing"
    graded = next((c for c in nbformat.read(path, as_version=4).cells
                   if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell), None)
    if graded is None:
        return f"nothing: no cell {cell!r} in {path}"
    shown = [f"verdict: {verdict}"] if (verdict := graded.metadata.get("torchdoctor", {}).get("verdict")) else []
    for output in graded.get("outputs", []):
        if output.output_type == "error":
            shown.append(f"{output.ename}: {output.evalue}")
        elif output.output_type == "stream":
            shown.append(f"{output.name}: {output.text[:200]!r}")
    return " | ".join(shown)[:limit] or "no output"


def main() -> int:
    attacks = load()
    with tempfile.TemporaryDirectory(prefix="attacks-") as scratch:
        graded = grade(Path(scratch), attacks)
        found = problems(attacks, graded)  # reads the autograded notebooks, in the scratch folder
    for attack in attacks:
        cells = graded["scores"][attack.name]
        total, most = sum(s for s, _, _ in cells.values()), sum(m for _, m, _ in cells.values())
        print(f"{attack.name:<22} {total:4.1f} / {most:.1f}  {attack.why.strip().splitlines()[0]}")
    for problem in found:
        print(f"FAIL {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
