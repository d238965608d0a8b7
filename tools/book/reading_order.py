"""Does a chapter read in the order it computes? A `{glue}` role may cite a key only after the cell that glues it.

The cell that glues a key is found two ways: its source calls `glue("key", ...)` or `finding("key", ...)` (which
glues `key`, `key_verdict` and `key_value`), or its stored outputs carry the key (myst-nb's scrapbook record), which
also covers keys glued under a computed name. `python -m tools.book.reading_order` prints every chapter's offenders.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

from tools.book.toc import toc_notebooks

ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)")  # {glue}`key`, {glue:text}`key:.2f`, {glue:md}`key`
GLUE = re.compile(r"""\bglue\(\s*["']([^"'{]+)["']""")
FINDING = re.compile(r"""\bfinding\(\s*["']([^"'{]+)["']""")
FIGURE = re.compile(r"^```\{glue(?::figure)?\}\s+(\S+)", re.M)  # a glued figure pasted by a directive


def glued_in(cell) -> set[str]:
    """Every key a code cell glues, read from its source and from its stored outputs."""
    keys = set(GLUE.findall(cell.source))
    for name in FINDING.findall(cell.source):
        keys |= {name, f"{name}_verdict", f"{name}_value"}
    for output in cell.get("outputs", []):
        keys.add(output.get("metadata", {}).get("scrapbook", {}).get("name"))
    return keys - {None}


def cited_in(cell) -> list[str]:
    """Every key a markdown cell cites, by role or by a glue directive, in order."""
    return [key.strip() for key in ROLE.findall(cell.source) + FIGURE.findall(cell.source)]


def cited_before_computed(notebook: Path) -> list[tuple[str, int, int]]:
    """(key, cell citing it, first cell gluing it) for each citation that comes before the glue; cells count from 0."""
    cells = nbformat.read(notebook, as_version=4).cells
    first: dict[str, int] = {}
    for index, cell in enumerate(cells):
        if cell.cell_type == "code":
            for key in glued_in(cell):
                first.setdefault(key, index)
    return [(key, index, first[key]) for index, cell in enumerate(cells) if cell.cell_type == "markdown"
            for key in cited_in(cell) if key in first and first[key] > index]


def main() -> int:
    """Print each chapter's citations that run ahead of their glue; exit 1 when there is one."""
    total = 0
    for notebook in toc_notebooks():
        early = cited_before_computed(notebook)
        total += len(early)
        for key, cited, glued in early:
            print(f"{notebook.stem}: {key!r} cited in cell {cited}, glued in cell {glued}")
    print(f"{total} citations before the cell that computes them")
    return int(total > 0)


if __name__ == "__main__":
    sys.exit(main())
