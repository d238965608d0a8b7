"""Each chapter reads in the order it computes: no `{glue}` role cites a key before the cell that glues it
(tools/book/reading_order.py). Static, on the notebooks in book/."""

from __future__ import annotations

import nbformat
import pytest

from tools.book.reading_order import cited_before_computed
from tools.book.toc import toc_notebooks


def notebook(tmp_path, *cells):
    """A notebook file holding `cells` (("markdown" | "code", source) pairs), for the check's own tests."""
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[make[kind](source) for kind, source in cells]), path)
    return path


def test_a_role_ahead_of_its_glue_is_flagged_and_one_after_it_is_not(tmp_path):
    path = notebook(tmp_path, ("markdown", "The norm is {glue:text}`norm:.2f`."),
                    ("code", 'glue("norm", 1.0)\nfinding("wide", True, 3)'),
                    ("markdown", "Again {glue}`norm`, and {glue:text}`wide_verdict`: {glue:md}`wide`."),
                    ("markdown", "Before its cell: {glue}`late`."), ("code", "glue('late', 2)"),
                    ("markdown", "```{glue:figure} late_figure\n```"), ("code", "glue('late_figure', fig)"))
    assert cited_before_computed(path) == [("norm", 0, 1), ("late", 3, 4), ("late_figure", 5, 6)]


def test_a_key_glued_under_a_computed_name_is_found_in_the_stored_outputs(tmp_path):
    path = notebook(tmp_path, ("markdown", "{glue}`row_3`"), ("code", 'for i in rows: glue(f"row_{i}", i)'))
    cells = nbformat.read(path, as_version=4)
    cells.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "3"},
                                                     metadata={"scrapbook": {"name": "row_3"}})]
    nbformat.write(cells, path)
    assert cited_before_computed(path) == [("row_3", 0, 1)]


@pytest.mark.parametrize("chapter", toc_notebooks(), ids=lambda path: path.stem)
def test_no_number_is_cited_before_the_cell_that_computes_it(chapter):
    early = cited_before_computed(chapter)
    assert early == [], "\n".join(f"{key!r}: cited in cell {cited}, glued in cell {glued}"
                                  for key, cited, glued in early)
