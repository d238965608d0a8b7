"""nbval's run stored into Jupyter Book's cache (tools/testing/pytest_book_cache.py) is what jupyter-cache's own
executor stores for the same notebook, found by the same lookup; a failing notebook is not stored."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from jupyter_cache import get_cache
from jupyter_cache.executors import load_executor

from tools.environment import ROOT, offline_environment
from tools.testing.gpu import configure_nbclient

CELLS = [  # (source, tags): streams split over prints, a result, a display, a demonstrated error, a gpu cell
    ("import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')", []),
    ("from IPython.display import Markdown, display\ndisplay(Markdown('**shown**'))\n6 * 7", []),
    ("1 / 0", ["raises-exception"]),
    ("print('the gpu cell ran')", ["gpu"]),
    ("x = 2\nx", []),
]


def notebook(path, cells):
    book = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                             "language": "python"}})
    book.cells = [nbformat.v4.new_markdown_cell("# A fixture")]
    book.cells += [nbformat.v4.new_code_cell(source, metadata={"tags": tags}) for source, tags in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(book, path)
    return path


# The child pytest runs notebooks only: hypothesis's and anyio's plugins would import (and assertion-rewrite) their
# packages in each child for nothing.
NOT_NEEDED = ["-p", "no:hypothesispytest", "-p", "no:anyio"]

pytestmark = pytest.mark.usefixtures("venv_first")  # conftest.py: the kernels run this venv's python


def nbval_into_cache(path, cache):
    """pytest --nbval on one notebook with the plugin, from the repository root with its settings."""
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-n", "0",
               *NOT_NEEDED, "-q", "-p", "tools.testing.pytest_gpu", "-p", "tools.testing.pytest_nbval",
               "-p", "tools.testing.pytest_book_cache", "--nbval-book-cache", str(cache), str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=offline_environment(), timeout=600)


def test_outside_the_venv_nothing_is_stored_and_it_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    path = notebook(tmp_path / "plain.ipynb", [("x = 1", [])])
    result = nbval_into_cache(path, tmp_path / "cache")
    assert result.returncode == 0, result.stdout
    assert "--nbval-book-cache stores nothing: the book's python3 kernel runs" in result.stdout
    assert not (tmp_path / "cache").exists()


def cached_code_cells(cache, path):
    """The code cells (outputs, execution counts) that a lookup by the notebook's code finds in the cache."""
    _, merged = get_cache(cache).merge_match_into_notebook(nbformat.read(path, as_version=4))
    return [(cell.outputs, cell.execution_count) for cell in merged.cells if cell.cell_type == "code"]


def test_nbval_stores_what_jupyter_cache_would(tmp_path):
    by_nbval = notebook(tmp_path / "nbval" / "fixture.ipynb", CELLS)
    by_executor = notebook(tmp_path / "executor" / "fixture.ipynb", CELLS)
    result = nbval_into_cache(by_nbval, tmp_path / "nbval-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    reference = get_cache(tmp_path / "executor-cache")  # what `python -m tools.book.execute` does
    reference.add_nb_to_project(str(by_executor))
    configure_nbclient()
    load_executor("local-serial", reference).run_and_cache(timeout=600, allow_errors=False)
    ours, theirs = cached_code_cells(tmp_path / "nbval-cache", by_nbval), cached_code_cells(
        tmp_path / "executor-cache", by_executor)
    assert ours == theirs
    kinds = [[output.output_type for output in outputs] for outputs, _ in ours]
    assert kinds[1] == ["display_data", "execute_result"] and kinds[2] == ["error"]  # the comparison saw them
    assert {output.name for output in ours[0][0]} == {"stdout", "stderr"}


def test_a_failing_notebook_is_not_stored(tmp_path):
    path = notebook(tmp_path / "failing.ipynb", [("x = 1", []), ("1 / 0", []), ("x", [])])
    result = nbval_into_cache(path, tmp_path / "cache")
    assert result.returncode == 1
    with pytest.raises(KeyError):
        get_cache(tmp_path / "cache").match_cache_notebook(nbformat.read(path, as_version=4))
