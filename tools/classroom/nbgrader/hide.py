"""Feedback's preprocessor: hidden checks, and every output written after the first, withheld from students."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

from tools.classroom.nbgrader.records import records_dir

HIDDEN_NOTE = "a check in this cell failed; the hidden checks are not shown in feedback"
WITHHELD_NOTE = "[output not shown in feedback: it was written after the hidden checks ran]\n"
# Error names a student's code cannot use to carry text out: Python's own exceptions (others show as "Error").
KNOWN_ERRORS = {name for name, value in vars(builtins).items() if isinstance(value, type)
                and issubclass(value, BaseException)} | {"CellTimeoutError", "DeadKernelError", "NotGraded"}
GRADED = ("graded", "partly graded")


def _record(config, resources) -> dict | None:
    """The grading record of the submission being converted (records are the grader's, never the kernel's)."""
    root, meta = config.CourseDirectory.get("root"), resources.get("nbgrader", {})
    if not root or "student" not in meta:
        return None
    path = records_dir(Path(root), meta["assignment"]) / f"{meta['student']}.json"
    return json.loads(path.read_text()) if path.exists() else None


def not_graded_text(status: str, reason: str) -> str:
    """What a student reads instead of a score: 'Not graded: <reason>' (refused ones say so)."""
    return f"Not graded{' (refused)' if status == 'refused' else ''}: {reason or 'no reason was recorded'}"


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback, every output from the first hidden check on withheld, and no 0 for what did
    not run.

    The checks run in the grader's own process (tools/classroom/protocol/trusted.py), never in the student's kernel;
    but a hidden check may call the student's function there, which then sees the check's inputs. So from the first
    hidden check on, any output (a stash printed cells later, display data, a value in an error message) may carry
    them: such outputs become a note, and a failure only says that the cell failed, with Python's own error name.
    The cells the grading record lists as not graded (the kernel died, the notebook ran out of time) say so, with
    the record's reason, and show no score; a submission that was not graded at all gets no page from nbgrader (its
    0/N would read as a failure): `python -m tools.classroom feedback` writes one saying why. """

    def preprocess(self, nb, resources):
        record = _record(self.config, resources)
        if record and record["status"] not in GRADED:
            raise ValueError(f"{record['student']}: {not_graded_text(record['status'], record['reason'])}; "
                             "`python -m tools.classroom feedback` writes a page saying so, with no score")
        self._not_graded = set(record["not_graded_cells"]) if record and record["status"] == "partly graded" else ()
        starts = [index for index, cell in enumerate(nb.cells) if self.begin_test_delimeter in cell.source]
        self._first_hidden = starts[0] if starts else len(nb.cells)
        nb.metadata.pop("widgets", None)  # widget state is written by the kernel too
        nb, resources = super().preprocess(nb, resources)
        if self._not_graded:
            missed = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade_id") in self._not_graded
                      and cell.metadata["nbgrader"].get("points")]
            points = ", ".join(f"`{cell.metadata.nbgrader.grade_id}` (worth {cell.metadata.nbgrader.points:g})"
                               for cell in missed)
            nb.cells.insert(0, NotebookNode(cell_type="markdown", metadata={}, source=(
                f"**Partly graded**: {record['reason']}. From there on the cells did not run: they are marked *not "
                f"graded* below and count no points, which is not a failure" + (f" ({points})." if points else "."))))
        return nb, resources

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade_id") in self._not_graded:
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text="Not graded: this cell did not "
                                         "run (see the note at the top), so it has no score.\n")]
            meta["grade"] = False  # nbgrader's page would show its score, 0, as if the cell had failed
            return cell, resources
        if cell.cell_type == "code" and cell_index >= self._first_hidden:
            errors = [out for out in cell.get("outputs", []) if out.output_type == "error"]
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=WITHHELD_NOTE)] * bool(cell.outputs)
            if errors:
                name = errors[0].ename if errors[0].ename in KNOWN_ERRORS else "Error"
                cell.outputs.append(NotebookNode(output_type="error", ename=name, evalue=HIDDEN_NOTE,
                                                 traceback=[f"{name}: {HIDDEN_NOTE}"]))
        return cell, resources
