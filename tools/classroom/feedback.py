"""Feedback without answers: generate_feedback with the hidden checks, and what their failures print, removed."""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests

HIDDEN_NOTE = "a check in this cell failed; the hidden checks are not shown in feedback"


class HideHiddenTests(ClearHiddenTests):
    """ClearHiddenTests for feedback: a test cell loses its hidden code, and its error output only names the error."""

    def preprocess_cell(self, cell, resources, cell_index):
        had_hidden = self.begin_test_delimeter in cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if had_hidden:
            for output in cell.get("outputs", []):
                if output.output_type == "error":  # a traceback quotes the hidden line and the values it compared
                    output.evalue = HIDDEN_NOTE
                    output.traceback = [f"{output.ename}: {HIDDEN_NOTE}"]
        return cell, resources
