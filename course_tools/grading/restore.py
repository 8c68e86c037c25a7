"""Put back the locked cells a student deleted, emptied or stripped of metadata, and report it.

nbgrader's OverwriteCells restores the source of a locked cell only while the cell still carries its nbgrader
metadata; a test cell that was deleted, or whose metadata was stripped, is simply gone, and its points wait for a
manual grade (``add_missing_cells`` adds back grade cells only, not the locked cells they rely on). This runs just
before OverwriteCells: every locked cell of the gradebook missing from the submission is inserted after its
predecessor in the source, with the metadata the gradebook gives it; every cell that keeps a known grade_id gets
its canonical nbgrader metadata back (grade, solution, locked, points), so OverwriteCells then restores its
source and it is graded.

Cells with nbgrader metadata the gradebook does not know (a made-up 100-point test cell, a cell pasted from
another notebook) lose that metadata and run as plain cells: nbgrader would otherwise fail the whole submission.

Symbolic links and special files in the submitted folder are left out of grading (and of feedback), and reported.

Each student's tampering goes to the notebook's metadata (``torchdoctor.tampering``), for the JSON results. A test
cell whose only change is its missing hidden tests (what every student receives) is not tampering and is not
reported; nbgrader's own log still prints its checksum notices.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nbconvert.exporters.exporter import ResourcesDict
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


def released_source(source: str) -> str:
    """A test cell's source as students receive it: hidden tests removed."""
    cell = new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False}})
    ClearHiddenTests().preprocess_cell(cell, {}, 0)
    return cell.source


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class RestoreCells(NbGraderPreprocessor):
    """Restore deleted, emptied and stripped locked cells from the gradebook; report them per student."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            notebook = gb.find_notebook(info["notebook"], info["assignment"])
            points = {g.name: g.max_score for g in notebook.grade_cells}
            solutions = {c.name for c in notebook.solution_cells}
            sources = [(c.name, c.cell_type, c.source, c.locked, c.checksum) for c in notebook.source_cells]
        tampering: list[dict[str, str]] = []
        known = {s[0] for s in sources}
        for c in nb.cells:  # nbgrader metadata the gradebook does not know (made up, or from another notebook)
            meta = c.get("metadata", {}).get("nbgrader")
            if meta is None or meta.get("grade_id") in known:
                continue
            del c.metadata["nbgrader"]  # else nbgrader fails the whole submission, silently scored 0
            if any(meta.get(k) for k in ("grade", "solution", "locked", "task")):
                what = "unknown to the gradebook: run as a plain cell"
                tampering.append({"cell": str(meta.get("grade_id")), "what": what})
        present = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
        loose = [c for c in nb.cells if not _grade_id(c)]
        for name, cell_type, source, locked, checksum in sources:
            meta = {"grade": name in points, "grade_id": name, "locked": locked, "solution": name in solutions,
                    "task": False, "schema_version": 3, "checksum": checksum}
            if name in points:
                meta["points"] = points[name]
            cell = present.get(name)
            if cell is not None:
                expected = released_source(source) if locked else None
                if locked and cell.source != expected and cell.source != source:
                    tampering.append({"cell": name, "what": "emptied" if not cell.source.strip() else "modified"})
                # nbgrader treats a grade cell that is not a solution as locked whatever its flag says (is_locked),
                # and the gradebook stores it so: only a difference nbgrader acts on is tampering.
                if (any(bool(cell.metadata.nbgrader.get(k)) != meta[k] for k in ("grade", "solution"))
                        or utils.is_locked(cell) != bool(locked)):
                    tampering.append({"cell": name, "what": "metadata changed"})
                cell.metadata.nbgrader.update(meta)
                continue
            if not locked:
                continue
            stripped = any(c.source.strip() == released_source(source).strip() for c in loose)
            tampering.append({"cell": name, "what": "metadata stripped" if stripped else "deleted"})
            restored = (new_code_cell if cell_type == "code" else new_markdown_cell)(source)
            restored.metadata["nbgrader"] = meta
            restored.metadata.update(deletable=False, editable=False)
            self._insert(nb, restored, [s[0] for s in sources], name)
            present[name] = restored
        tampering += [{"cell": f"file {name}", "what": "not a plain file (a symbolic link?): left out of grading"}
                      for name in self._drop_links(info["student"], info["assignment"])]
        nb.metadata["torchdoctor"] = {"tampering": tampering}
        for item in tampering:
            self.log.warning("Tampering: cell %s %s; restored from the gradebook", item["cell"], item["what"])
        return nb, resources

    def _drop_links(self, student: str, assignment: str) -> list[str]:
        """Symbolic links and special files of the submission. nbgrader copies a submission's files into
        autograded/ (and feedback/ from there) following links, as the grader: a link to the source notebook or
        the gradebook would hand the student solutions, hidden tests and everyone's grades. Their copies are
        removed (the kernel's working copy skips them too: ``files.copy_in``)."""
        coursedir = CourseDirectory(config=self.config)
        submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
        autograded = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
        source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
        found = []
        for folder, dirs, files in os.walk(submitted):  # never follows links to folders
            for name in dirs + files:
                path = Path(folder, name)
                if stat.S_ISREG(path.lstat().st_mode) or stat.S_ISDIR(path.lstat().st_mode):
                    continue
                relative = path.relative_to(submitted)
                found.append(str(relative))
                copy = autograded / relative
                if not (source / relative).exists() and (copy.is_file() or copy.is_symlink()):
                    copy.unlink()  # a master copy from source/ has replaced it otherwise: kept
        return sorted(found)

    @staticmethod
    def _insert(nb: NotebookNode, cell: NotebookNode, order: list[str], name: str) -> None:
        """Insert after the nearest preceding gradebook cell present in the notebook (else first)."""
        positions = {_grade_id(c): i for i, c in enumerate(nb.cells) if _grade_id(c)}
        earlier = [positions[n] for n in order[: order.index(name)] if n in positions]
        nb.cells.insert(max(earlier) + 1 if earlier else 0, cell)
