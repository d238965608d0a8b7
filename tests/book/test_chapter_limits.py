"""The chapter contract's limits (DESIGN.md), measured on every notebook of the book by tools.book.chapter_metrics."""

from __future__ import annotations

import nbformat
import pytest

from tools.book import chapter_metrics as cm
from tools.book.toc import toc_notebooks


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_chapter_within_the_contract(path):
    m = cm.measure(path)  # prose: "Title Three plain words and and"
    assert m.prose_words <= cm.MAX_WORDS, f"{m.prose_words} prose words"
    assert m.code_cells <= cm.MAX_CODE_CELLS, f"{m.code_cells} code cells"
    assert m.longest_cell <= cm.MAX_CELL_LINES, f"a code cell of {m.longest_cell} lines"
    assert m.longest_line <= cm.MAX_LINE_CHARS, f"a code line of {m.longest_line} characters"
    assert m.figures >= cm.MIN_FIGURES, f"{m.figures} figures"
    assert m.figures_without_alt == 0, "a figure cell without alt text (metadata mystnb.image.alt, ≥ 20 chars)"


def test_measure_counts_what_the_contract_counts(tmp_path):
    figure = nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})
    plotted = nbformat.v4.new_code_cell("plot()\n" + "x = 1\n" * 15, outputs=[figure])
    plotted.metadata["mystnb"] = {"image": {"alt": "Two curves that cross at position 64."}}
    exercise = nbformat.v4.new_markdown_cell("many words " * 900, metadata={"tags": ["exercises"]})
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\nThree plain words, `code` and $x^2$ and {glue:text}`n`."),
        plotted, nbformat.v4.new_code_cell("y" * 81, outputs=[figure]), exercise,
    ])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    m = cm.measure(path)  # prose: "Title Three plain words and and"
    assert (m.prose_words, m.code_cells, m.longest_cell, m.longest_line) == (6, 2, 16, 81)
    assert (m.figures, m.figures_without_alt) == (2, 1)
