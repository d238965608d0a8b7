"""The book's one table type: HTML or Markdown in the book, aligned plain text for nbval."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["ResultTable", "TextTable"]


def _cell_markdown(value) -> str:
    """A cell in Markdown code quotes (double ones when it holds a backquote); only strings are quoted."""
    text = str(value)
    if isinstance(value, str):
        text = text.replace("|", "\\|")
        return f"`` {text} ``" if "`" in text else f"`{text}`"
    return text


class ResultTable:
    """A small table: HTML (or Markdown) in the book, aligned plain text for nbval.

    Cells keep their values and are shown with str(). code_columns: headers whose cells Markdown shows as `code`.
    html=False: no HTML form, so the book shows the Markdown (the token tables, whose tokens are code).
    """

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence], code_columns: Sequence[str] = (),
                 html: bool = True):
        if any(len(row) != len(headers) for row in rows):
            raise ValueError(f"every row needs {len(headers)} cells, one per header.")
        self.headers = [str(h) for h in headers]
        self.rows = [list(row) for row in rows]
        self.code_columns = set(code_columns)
        self.html = html

    def __len__(self) -> int:
        return len(self.rows)

    def _repr_html_(self) -> str | None:
        if not self.html:
            return None  # IPython then shows no HTML form at all
        head = "".join(f"<th>{escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                       for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_markdown_(self) -> str:
        """The table as a Markdown (pipe) table; a | inside a cell is escaped."""
        lines = ["| " + " | ".join(self.headers) + " |", "|" + "---|" * len(self.headers)]
        for row in self.rows:
            cells = [_cell_markdown(v) if h in self.code_columns else str(v).replace("|", "\\|")
                     for h, v in zip(self.headers, row, strict=True)]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def __repr__(self) -> str:
        cells = [self.headers] + [[str(v) for v in row] for row in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.headers))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths).rstrip())
        return "\n".join(lines)


def TextTable(headers: Sequence[str], rows: Sequence[Sequence], code_columns: Sequence[str] = ()) -> ResultTable:
    """A ResultTable without its HTML form: Markdown in the book, plain text for nbval (token embeddings)."""
    return ResultTable(headers, rows, code_columns, html=False)
