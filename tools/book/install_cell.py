"""`python -m tools.book.install_cell [--check]`: write every chapter's first code cell, the one that installs the
book's helpers where they are missing, from the release wheel that _config.yml's repository.url and pyproject.toml's
version name. The lead re-runs it after merging notebooks; it never executes them (the cell has no outputs here)."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import yaml

from tools.book.toc import ROOT, toc_notebooks

TAG = "install"
OLD_TAGS = ("colab", "remove-cell")  # the hidden Colab-only cell this one replaces
NEW_CELL_ID = "install"
EXTRA = "colab"  # pyproject.toml's extra: what a chapter needs that Colab (or a bare Jupyter) may lack
LINE_LIMIT = 80  # book/ruff.toml's line length: the theme's code column
COMMENT = "# Install the book's helpers and pins where missing (Colab, a download)."


def repository_url(root: Path = ROOT) -> str:
    """The book's repository: _config.yml's repository.url, the one place it is named."""
    return yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"].rstrip("/")


def project(root: Path = ROOT) -> dict:
    """pyproject.toml's [project] table."""
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def wheel_name(root: Path = ROOT) -> str:
    """The file name `make dist` gives the wheel (PEP 427: the name's runs of -_. become one underscore)."""
    meta = project(root)
    return f"{re.sub(r'[-_.]+', '_', meta['name']).lower()}-{meta['version']}-py3-none-any.whl"


def wheel_url(root: Path = ROOT) -> str:
    """Where a publisher puts the wheel: an asset of the GitHub release v<version> (README.md, Publishing)."""
    return f"{repository_url(root)}/releases/download/v{project(root)['version']}/{wheel_name(root)}"


def _string_lines(text: str, indent: int) -> list[str]:
    """`text` as adjacent string literals split before '/', each line within LINE_LIMIT after `indent`."""
    width = LINE_LIMIT - indent - 2
    pieces = re.split(r"(?=/)", text)
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return [f'"{line}"' for line in lines]


def cell_source(root: Path = ROOT) -> str:
    """The install cell: where `import helpers` fails, pip installs the release wheel with the [colab] extra."""
    literals = _string_lines(wheel_url(root), indent=len("WHEEL = ("))
    wheel = "WHEEL = (" + "\n         ".join(literals) + ")" if len(literals) > 1 else f"WHEEL = {literals[0]}"
    source = "\n".join([
        COMMENT,
        wheel,
        "try:",
        "    import helpers  # noqa: F401",
        "except ModuleNotFoundError:",
        f'    %pip install --quiet "{project(root)["name"]}[{EXTRA}] @ {{WHEEL}}"',
    ])
    too_long = [line for line in source.splitlines() if len(line) > LINE_LIMIT]
    if too_long:
        raise ValueError(f"install cell lines over {LINE_LIMIT} characters: {too_long}")
    return source


def _install_cell_index(notebook: nbformat.NotebookNode) -> int | None:
    """The index of the notebook's install cell: its first code cell when tagged install (or the old colab)."""
    first = next((i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"), None)
    if first is None:
        return None
    tags = notebook.cells[first].metadata.get("tags", [])
    return first if TAG in tags or "colab" in tags else None


def updated(notebook: nbformat.NotebookNode, source: str) -> bool:
    """Make the notebook's install cell `source`, tagged install and without outputs; True if anything changed."""
    index = _install_cell_index(notebook)
    if index is None:  # a chapter without one: the cell goes before the first code cell (or at the end)
        index = next((i for i, c in enumerate(notebook.cells) if c.cell_type == "code"), len(notebook.cells))
        notebook.cells.insert(index, nbformat.v4.new_code_cell(id=NEW_CELL_ID))
    cell = notebook.cells[index]
    tags = [tag for tag in cell.metadata.get("tags", []) if tag not in OLD_TAGS and tag != TAG] + [TAG]
    if cell.source == source and cell.metadata.get("tags") == tags and not cell.outputs:
        return False
    cell.source, cell.outputs = source, []
    cell.metadata["tags"] = tags
    return True


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """Rewrite (or with --check, list) the toc notebooks whose install cell differs; exit 1 on a difference."""
    parser = argparse.ArgumentParser(prog="python -m tools.book.install_cell", description=__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook's cell differs")
    check = parser.parse_args(argv).check
    source = cell_source(root)
    differing = []
    for path in toc_notebooks(root):
        notebook = nbformat.read(path, as_version=4)
        if updated(notebook, source):
            differing.append(path.relative_to(root).as_posix())
            if not check:
                nbformat.write(notebook, path)
    verb = "differ from" if check else "rewritten to"
    print(f"install_cell: {len(differing)} notebooks {verb} the cell for {wheel_url(root)}", *differing, sep="\n  ")
    return 1 if check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
