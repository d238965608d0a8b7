"""Result tables that read well in the book (HTML, Markdown) and in plain text for nbval."""

from __future__ import annotations

import html

__all__ = ["ResultTable"]


class ResultTable:
    """A small table that renders as HTML (or Markdown) in the book and as aligned plain text for nbval."""

    def __init__(self, headers: list[str], rows: list[list]):
        if any(len(row) != len(headers) for row in rows):
            raise ValueError(f"every row needs {len(headers)} cells, one per header.")
        self.headers = [str(h) for h in headers]
        self.rows = [[str(cell) for cell in row] for row in rows]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(self.headers) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        widths = [max(len(r[i]) for r in [self.headers, *self.rows]) for i in range(len(self.headers))]
        fmt = lambda row: "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        return "\n".join([fmt(self.headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in self.rows])
