"""The one reader of _toc.yml: the book's pages and its chapter notebooks, in book order."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools.environment import ROOT


def toc_pages(root: Path = ROOT) -> list[str]:
    """Every page of _toc.yml (root, chapters, their sections) as its path without suffix, root first."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    chapters = toc.get("chapters", []) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    pages = [toc["root"]]
    for entry in chapters:
        pages += [entry["file"]] + [section["file"] for section in entry.get("sections", [])]
    return pages


def is_notebook(page: str, root: Path = ROOT) -> bool:
    """True for a page built from a notebook."""
    return (root / f"{page}.ipynb").exists()


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks _toc.yml lists, in book order."""
    return [root / f"{page}.ipynb" for page in toc_pages(root) if is_notebook(page, root)]
