"""ResultTable: the same rows as Markdown, HTML (escaped) and aligned plain text; TextTable: the same without HTML."""

from __future__ import annotations

import pytest
from IPython.core.formatters import format_display_data

from helpers import ResultTable, TextTable


def test_result_table_renders_markdown_and_text():
    table = ResultTable(["probe", "value"], [["mae", "1.5"], ["cv", 0.25]])
    assert table._repr_markdown_().splitlines() == ["| probe | value |", "|---|---|", "| mae | 1.5 |",
                                                    "| cv | 0.25 |"]
    assert repr(table).splitlines()[2].split() == ["mae", "1.5"]
    assert "<th>probe</th><th>value</th>" in table._repr_html_()
    assert "<tr><td>cv</td><td>0.25</td></tr>" in ResultTable(["a", "b"], [["cv", 0.25]])._repr_html_()
    assert "&lt;b&gt;" in ResultTable(["x"], [["<b>"]])._repr_html_()  # cells are escaped


def test_rows_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match="one per header"):
        ResultTable(["a", "b"], [["only one"]])
    with pytest.raises(ValueError, match="one per header"):
        TextTable(["a", "b"], [[1, 2, 3]])


def test_plain_text_is_aligned_in_columns_two_spaces_apart():
    table = ResultTable(["id", "token"], [[101, "[CLS]"], [7, "a"]])
    assert repr(table) == "id   token\n---  -----\n101  [CLS]\n7    a"
    assert len(table) == 2


def test_what_ipython_shows_with_and_without_html():
    """IPython leaves out a form whose _repr_*_ returns None: a TextTable has no HTML, so the book shows Markdown."""
    rows = [["a", 1]]
    shown, _ = format_display_data(ResultTable(["x", "y"], rows))
    assert set(shown) == {"text/plain", "text/markdown", "text/html"}
    shown, _ = format_display_data(TextTable(["x", "y"], rows))
    assert set(shown) == {"text/plain", "text/markdown"}
    assert shown["text/markdown"] == "| x | y |\n|---|---|\n| a | 1 |"
    assert isinstance(TextTable(["x"], [[1]]), ResultTable)  # one table type


def test_code_columns_and_pipes_in_markdown():
    table = TextTable(["token", "id", "note"], [["##ing", 3, "a|b"], ["x`y", 4, ""]], code_columns=["token", "id"])
    assert table._repr_markdown_().splitlines()[2:] == [
        "| `##ing` | 3 | a\\|b |",  # a string in a code column is quoted; a number is not; | is escaped
        "| `` x`y `` | 4 |  |",  # a backquote inside needs double quotes with spaces (CommonMark code spans)
    ]
