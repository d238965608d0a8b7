"""`--nbval-from-cache` (tools/testing/pytest_nbval_replay.py): a notebook whose run the cache holds for the same code
and environment is judged from that run, with the verdict nbval gives when it runs the notebook in a kernel."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from jupyter_cache import get_cache

from tests.book.test_book_cache import CELLS, NOT_NEEDED, notebook
from tools.book import fingerprint
from tools.environment import ROOT, venv_environment

PLUGINS = [option for plugin in ("gpu", "nbval", "nbval_replay", "book_cache") for option in
           ("-p", f"tools.testing.pytest_{plugin}")]  # the root conftest.py's: a notebook under /tmp is outside it


def nbval(path, cache, *options):
    """pytest --nbval on one notebook, storing into `cache`, with the project's plugins and settings."""
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-n", "0",
               *NOT_NEEDED, *PLUGINS, "--nbval-book-cache", str(cache), *options, str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=venv_environment(), timeout=600)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A notebook stored with the outputs of its own run, the cache holding that run, the environment recorded."""
    folder = tmp_path_factory.mktemp("replay")
    ran = folder / "ran.txt"  # one cell appends to it each time it really runs
    path = notebook(folder / "book" / "fixture.ipynb", CELLS + [(f"open('{ran.name}', 'a').write('ran ')", [])])
    cache = folder / "_build" / ".jupyter_cache"
    first = nbval(path, cache)
    assert first.returncode == 0, first.stdout + first.stderr
    _, executed = get_cache(cache).merge_match_into_notebook(nbformat.read(path, as_version=4))
    nbformat.write(executed, path)  # stored outputs, as a committed chapter has them
    (cache.parent / fingerprint.RECORD).write_text(json.dumps(fingerprint.fingerprint()))
    return folder


@pytest.fixture
def stored(prepared, tmp_path):
    """A copy of the prepared project: the notebook, the cache, and the file its last cell appends to (empty)."""
    folder = shutil.copytree(prepared, tmp_path / "project")
    (folder / "book" / "ran.txt").write_text("")
    return folder / "book" / "fixture.ipynb", folder / "_build" / ".jupyter_cache", folder / "book" / "ran.txt"


def test_an_unchanged_notebook_is_compared_with_its_cached_run_without_a_kernel(stored):
    path, cache, ran = stored
    result = nbval(path, cache, "--nbval-from-cache", str(cache))
    assert result.returncode == 0, result.stdout
    assert "nbval: 1 of 1 notebooks compared with their cached run" in result.stdout
    assert f"{len(CELLS)} passed, 1 skipped" in result.stdout  # the gpu cell, as in a kernel run without CUDA
    assert ran.read_text() == ""  # no cell ran


@pytest.mark.parametrize("replay", [True, False], ids=["from-cache", "in-a-kernel"])
def test_a_changed_stored_output_fails_either_way(stored, replay):
    path, cache, ran = stored
    book = nbformat.read(path, as_version=4)
    result_cell = next(cell for cell in book.cells if cell.source == "x = 2\nx")
    result_cell.outputs[0].data["text/plain"] = "3"  # the code is unchanged: the cache still matches it
    nbformat.write(book, path)
    result = nbval(path, cache, *(["--nbval-from-cache", str(cache)] if replay else []))
    assert result.returncode == 1 and "Cell outputs differ" in result.stdout and "1 failed" in result.stdout
    assert ran.read_text() == ("" if replay else "ran ")


def test_another_environment_runs_the_notebook_in_a_kernel(stored):
    path, cache, ran = stored
    record = cache.parent / fingerprint.RECORD
    record.write_text(json.dumps(dict(json.loads(record.read_text()), cpu="another CPU")))
    result = nbval(path, cache, "--nbval-from-cache", str(cache))
    assert result.returncode == 0, result.stdout
    assert "every notebook runs in a kernel" in result.stdout
    assert ran.read_text() == "ran "
