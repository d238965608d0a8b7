"""`python -m tools.book.class_build` (make book-class): the book for a class, the same pages without the solutions.

Built from the same execution cache as `make book` into _build/class/_build/html: sphinx-exercise's `hide_solutions`
drops every solution, and the pages offer no notebook download, launch button or page source (each would hold the
solutions).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tools.book.toc import ROOT

CLASS_BUILD = ROOT / "_build" / "class"
CLASS_HTML = CLASS_BUILD / "_build" / "html"  # where --path-output puts it


def class_config(root: Path = ROOT) -> dict:
    """The book's _config.yml for a class: solutions hidden, sources not copied, paths made absolute."""
    config = yaml.safe_load((root / "_config.yml").read_text())
    sphinx = config.setdefault("sphinx", {})
    # Jupyter Book resolves local_extensions against the config file's folder, which is no longer the root.
    sphinx["local_extensions"] = {name: str((root / path).resolve())
                                  for name, path in (sphinx.get("local_extensions") or {}).items()}
    sphinx.setdefault("config", {}).update(hide_solutions=True, html_copy_source=False)
    config.setdefault("html", {}).update(use_download_button=False, use_repository_button=False)
    config.setdefault("parse", {}).setdefault("myst_substitutions", {})["book_pdf"] = ""  # the PDF holds solutions
    config["launch_buttons"] = {}  # Binder and Colab would open the repository's notebook, solutions included
    config.setdefault("execute", {})["cache"] = str(root / "_build" / ".jupyter_cache")  # the book's own cache
    return config


def main() -> None:
    """Write the class configuration beside the class build and build the book with it (-W, like make book)."""
    CLASS_BUILD.mkdir(parents=True, exist_ok=True)
    config_path = CLASS_BUILD / "_config.yml"
    config_path.write_text(yaml.safe_dump(class_config(), sort_keys=False))
    command = ["jupyter-book", "build", str(ROOT), "--config", str(config_path), "--path-output", str(CLASS_BUILD),
               "--warningiserror", "--keep-going"]
    sys.exit(subprocess.run(command).returncode)


if __name__ == "__main__":
    main()
