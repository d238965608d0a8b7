"""`python -m tools.book.class_build` (make book-class): the book for a class, the same pages without the solutions.

Built from the same execution cache as `make book` into _build/class/_build/html: sphinx-exercise's `hide_solutions`
drops every solution, and the pages offer no notebook download, launch button or page source (each would hold the
solutions).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.book.side_build import build_beside, relocated_config
from tools.book.toc import ROOT

CLASS_BUILD = ROOT / "_build" / "class"
CLASS_HTML = CLASS_BUILD / "_build" / "html"  # where --path-output puts it


def class_config(root: Path = ROOT) -> dict:
    """The book's _config.yml for a class: solutions hidden, sources not copied, paths made absolute."""
    config = relocated_config(root)
    config["sphinx"].setdefault("config", {}).update(hide_solutions=True, html_copy_source=False)
    config.setdefault("html", {}).update(use_download_button=False, use_repository_button=False)
    config.setdefault("parse", {}).setdefault("myst_substitutions", {})["book_pdf"] = ""  # the PDF holds solutions
    config["launch_buttons"] = {}  # Binder and Colab would open the repository's notebook, solutions included
    return config


def main() -> None:
    """Build the class book beside the reader's (-W, like make book)."""
    sys.exit(build_beside(class_config(), CLASS_BUILD))


if __name__ == "__main__":
    main()
