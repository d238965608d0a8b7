"""ResultTable: the same rows as Markdown, HTML (escaped) and aligned plain text."""

from __future__ import annotations

import pytest

from helpers import ResultTable


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
