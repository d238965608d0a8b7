"""Measure each notebook against the chapter contract: prose words, code cells, cell and line lengths, figures.

`python -m tools.book.chapter_metrics [book/x.ipynb ...]` prints one row per notebook; tests/book asserts the limits.
Cells tagged 'exercises' (generated from exercises/*.yml) are not counted: the limits are for the chapter's body.
As in the house's own check (shared/hooks/chapter_metrics.py): markdown tagged 'reading-aid' (the "what you will
learn" and summary boxes, which repeat the body) is not prose, and a cell's length counts its non-blank lines.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.book.toc import toc_notebooks

MAX_WORDS, MAX_CODE_CELLS, MAX_CELL_LINES, MAX_LINE_CHARS, MIN_FIGURES = 1800, 26, 15, 80, 2
FIGURE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")
_NOT_PROSE = [
    re.compile(r"```.*?```", re.S),  # fenced code and directives' bodies
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"\$[^$\n]+\$"),  # inline math
    re.compile(r"\{[a-z:]+\}`[^`]*`"),  # roles, glued numbers included
    re.compile(r"`[^`]*`"),  # inline code
    re.compile(r"<[^>]+>|\(https?://[^)]*\)"),  # html tags, link targets
]


@dataclass
class ChapterMetrics:
    name: str
    prose_words: int
    code_cells: int
    longest_cell: int  # lines
    longest_line: int  # characters
    figures: int
    figures_without_alt: int


def _prose_words(markdown: str) -> int:
    for pattern in _NOT_PROSE:
        markdown = pattern.sub(" ", markdown)
    return len(re.findall(r"[A-Za-z0-9][\w'’\-]*", markdown))


def _alt(cell) -> str:
    return str(cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")).strip()


def measure(path: Path) -> ChapterMetrics:
    """The contract's numbers for one notebook, exercise cells left out."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if "exercises" not in c.metadata.get("tags", [])]
    code = [c for c in cells if c.cell_type == "code"]
    lines = [line for c in code for line in c.source.splitlines()] or [""]
    figure_cells = [c for c in code if any(t in o.get("data", {}) for o in c.outputs for t in FIGURE_TYPES)]
    return ChapterMetrics(
        name=path.stem,
        prose_words=sum(_prose_words(c.source) for c in cells
                        if c.cell_type == "markdown" and "reading-aid" not in c.metadata.get("tags", [])),
        code_cells=len(code),
        longest_cell=max((sum(1 for line in c.source.splitlines() if line.strip()) for c in code), default=0),
        longest_line=max(len(line) for line in lines),
        figures=sum(1 for c in code for o in c.outputs if any(t in o.get("data", {}) for t in FIGURE_TYPES)),
        figures_without_alt=sum(1 for c in figure_cells if len(_alt(c)) < 20),
    )


def main(paths: list[str]) -> None:
    """Print the metrics of the given notebooks, or of every notebook in _toc.yml."""
    print(f"{'notebook':34} words cells longest-cell longest-line figures no-alt")
    for path in [Path(p) for p in paths] or toc_notebooks():
        m = measure(path)
        print(f"{m.name:34} {m.prose_words:5} {m.code_cells:5} {m.longest_cell:12} {m.longest_line:12} "
              f"{m.figures:7} {m.figures_without_alt:6}")


if __name__ == "__main__":
    main(sys.argv[1:])
