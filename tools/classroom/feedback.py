"""Feedback without answers: nothing the kernel wrote after it saw a hidden check reaches the student."""

from __future__ import annotations

import builtins

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

HIDDEN_NOTE = "a check in this cell failed; the hidden checks are not shown in feedback"
WITHHELD_NOTE = "[output not shown in feedback: it was written after the hidden checks ran]\n"
# Error names a student's code cannot use to carry text out: Python's own exceptions (others show as "Error").
KNOWN_ERRORS = {name for name, value in vars(builtins).items() if isinstance(value, type)
                and issubclass(value, BaseException)} | {"CellTimeoutError", "DeadKernelError", "NotGraded"}


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback, and every output from the first hidden check on withheld.

    The checks run in the grader's own process (tools/classroom/trusted.py), never in the student's kernel; but a
    hidden check may call the student's function there, which then sees the check's inputs. So from the first
    hidden check on, any output (a stash printed cells later, display data, a value in an error message) may carry
    them: such outputs become a note, and a failure only says that the cell failed, with Python's own error name.
    """

    def preprocess(self, nb, resources):
        starts = [index for index, cell in enumerate(nb.cells) if self.begin_test_delimeter in cell.source]
        self._first_hidden = starts[0] if starts else len(nb.cells)
        nb.metadata.pop("widgets", None)  # widget state is written by the kernel too
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and cell_index >= self._first_hidden:
            errors = [out for out in cell.get("outputs", []) if out.output_type == "error"]
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=WITHHELD_NOTE)] * bool(cell.outputs)
            if errors:
                name = errors[0].ename if errors[0].ename in KNOWN_ERRORS else "Error"
                cell.outputs.append(NotebookNode(output_type="error", ename=name, evalue=HIDDEN_NOTE,
                                                 traceback=[f"{name}: {HIDDEN_NOTE}"]))
        return cell, resources
