"""Every explicit label in the book is unique book-wide: the single-page (PDF) build puts all pages in one document,
where two pages defining the same label break references. Labels: `(name)=` anchors, `:label:`/`:name:` options
of directives, and figure names in a notebook cell's `mystnb` metadata."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from tools.environment import ROOT

ANCHOR = re.compile(r"^\(([\w.-]+)\)=\s*$", re.M)
OPTION = re.compile(r"^\s*:(?:label|name):\s*(\S+)\s*$", re.M)


def labels_in_markdown(text: str) -> list[str]:
    """The labels a MyST text defines."""
    return ANCHOR.findall(text) + OPTION.findall(text)


def page_labels(path: Path) -> list[str]:
    """The labels one page defines (a notebook: markdown cells and figure metadata; a .md page: its text)."""
    if path.suffix == ".md":
        return labels_in_markdown(path.read_text())
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            found += labels_in_markdown("".join(cell["source"]))
        name = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")
        if name:
            found.append(name)
    return found


def test_labels_are_found():
    text = "(seed-notebooks)=\n# Intro\n\n````{exercise} T\n:label: t5-last-bucket\n````\n"
    assert labels_in_markdown(text) == ["seed-notebooks", "t5-last-bucket"]


def test_every_label_is_unique_book_wide():
    pages = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))
    where = {}
    counts = Counter()
    for page in pages:
        for label in page_labels(page):
            counts[label] += 1
            where.setdefault(label, []).append(page.name)
    assert sum(counts.values()) > 20  # the book has labels: the search itself works
    assert {label: where[label] for label, n in counts.items() if n > 1} == {}
