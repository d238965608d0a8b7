"""A trailing ';' silences a cell's result under nbval exactly as it does in Jupyter (nbval 0.11 alone does not)."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

pytest_plugins = ["pytester"]


def write_notebook(path):
    """A notebook whose second cell ends in ';' and stores no result, as Jupyter records it."""
    notebook = new_notebook(cells=[new_code_cell("x = 41", execution_count=1),
                                   new_code_cell("x + 1;", execution_count=2, outputs=[])])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


def test_plain_nbval_shows_the_silenced_result(pytester):
    """In a fresh process, without the project plugin, nbval 0.11 reports the hidden result as a difference."""
    notebook = write_notebook(pytester.path / "semicolon.ipynb")
    result = pytester.runpytest_subprocess("--nbval", "-p", "no:cacheprovider", str(notebook))
    result.assert_outcomes(passed=1, failed=1)


def test_the_project_plugin_runs_cells_as_jupyter_does(pytester):
    notebook = write_notebook(pytester.path / "semicolon.ipynb")
    result = pytester.runpytest_inprocess("-p", "tools.testing.pytest_nbval", "--nbval", "-p", "no:cacheprovider",
                                          str(notebook))
    result.assert_outcomes(passed=2)
