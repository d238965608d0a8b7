"""The book's table of contents, configuration and stored notebooks follow the project's conventions."""

from __future__ import annotations

import json

import pytest
import yaml

from tools.book.toc import toc_pages
from tools.environment import ROOT

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def test_toc_lists_only_pages_that_exist():
    for stem in toc_pages():
        assert any((ROOT / f"{stem}{suffix}").exists() for suffix in (".md", ".ipynb")), stem


def test_every_notebook_is_in_the_toc():
    listed = set(toc_pages())
    assert {f"book/{path.stem}" for path in NOTEBOOKS} <= listed


def test_config_executes_with_the_cache_and_offers_launch_buttons():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "cache"
    assert config["execute"]["timeout"] >= 300
    assert config["repository"]["url"].startswith("https://github.com/")
    assert {"binderhub_url", "colab_url"} <= set(config["launch_buttons"])
    assert config["html"]["use_download_button"] is True
    assert {"sphinx_exercise", "sphinx_togglebutton"} <= set(config["sphinx"]["extra_extensions"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_executed_with_a_title(path):
    notebook = json.loads(path.read_text())
    first = notebook["cells"][0]
    assert first["cell_type"] == "markdown" and "".join(first["source"]).startswith("# ")
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        if "gpu" in tags:
            assert cell["execution_count"] is None, f"cell {index}: a gpu cell cannot be recorded on CPU"
            continue
        assert cell["execution_count"] is not None, f"cell {index} is not executed"
        errors = [out for out in cell["outputs"] if out["output_type"] == "error"]
        assert not errors or "raises-exception" in tags, f"cell {index} stores an error without the tag"


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_is_the_visible_install_cell(path):
    """Shown in the book (no remove tag), without outputs: where helpers imports, it prints nothing for nbval."""
    cell = _code_cells(path)[0]
    source = "".join(cell["source"])
    assert "install" in cell["metadata"]["tags"]
    assert not {"remove-cell", "remove-input", "hide-input", "colab"} & set(cell["metadata"]["tags"])
    assert cell["outputs"] == []
    assert "%pip install" in source and "@main" not in source and "git+" not in source
    assert len(source.splitlines()) <= 7 and max(len(line) for line in source.splitlines()) <= 80


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_opens_with_what_you_will_learn_and_closes_with_a_summary(path):
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "What you will learn" in text
    assert "## Summary" in text and "{cite}`" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_has_a_caption_and_a_name(path):
    figures = [c for c in _code_cells(path) if any("image/png" in o.get("data", {}) for o in c["outputs"])]
    assert figures, "a chapter without a figure"
    for cell in figures:
        figure = cell["metadata"].get("mystnb", {}).get("figure", {})
        assert figure.get("caption") and figure.get("name", "").startswith("fig-"), "".join(cell["source"])[:80]
