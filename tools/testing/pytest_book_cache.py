"""pytest plugin: `--nbval-book-cache DIR` stores each notebook nbval executed, passed in full, into Jupyter Book's
cache (jupyter-cache in DIR, as `python -m tools.book.execute` fills it), so the `make book` after nbval runs nothing.

The stored notebook is what nbclient would have made of the same run: the outputs are rebuilt from the kernel's
messages with nbformat's output_from_msg (nbclient's own conversion, streams not merged), execution counts from the
kernel, cells tagged `gpu` left as they are when nbclient skips them. A notebook is stored only when every code cell
ran and passed, in the interpreter the book's `python3` kernel runs, with the book's cell timeout; anything else (a
failure, a deselected or skipped cell, clear_output or display updates) leaves it to `make book`.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest
import yaml
from nbval.kernel import RunningKernel
from nbval.plugin import IPyNbCell, IPyNbFile

from tools.environment import ROOT
from tools.testing.gpu import GPU_TAG, skip_gpu_cells
from tools.testing.pytest_nbval_replay import REPLAYED

KEY = "book_cache_run"  # a notebook's record, kept on its IPyNbFile


def pytest_addoption(parser):
    parser.addoption("--nbval-book-cache", metavar="DIR", default=None,
                     help="store each fully passed notebook's execution in this jupyter-cache (make test: "
                          "_build/.jupyter_cache), so that `make book` does not run it again")


def book_settings(root: Path = ROOT) -> dict:
    """_config.yml's execute settings (timeout, allow_errors)."""
    return yaml.safe_load((root / "_config.yml").read_text())["execute"]


def same_kernel_as_the_book() -> str | None:
    """None when the book's `python3` kernel runs this interpreter (as nbval --nbval-current-env does); else why not."""
    from jupyter_client.kernelspec import get_kernel_spec

    command = get_kernel_spec("python3").argv[0]
    found = shutil.which(command)
    if found is None or Path(found).absolute() != Path(sys.executable).absolute():
        return f"the book's python3 kernel runs {found or command}, nbval runs {sys.executable}"
    return None


@pytest.hookimpl(trylast=True)  # after tools.testing.pytest_nbval has set how a cell is sent: wrap that
def pytest_configure(config):
    """Record, on nbval's kernel and notebook classes, what each cell sent and what the kernel said."""
    folder = config.getoption("--nbval-book-cache", None)
    if not folder:
        return
    settings = book_settings()
    reasons = [same_kernel_as_the_book() if config.option.nbval_current_env else "nbval is not in --nbval-current-env",
               None if config.option.nbval_cell_timeout == settings["timeout"] else
               f"nbval's cell timeout {config.option.nbval_cell_timeout} s is not the book's {settings['timeout']} s",
               None if config.option.nbval and not config.option.nbval_lax else "nbval is not in strict mode"]
    refused = "; ".join(reason for reason in reasons if reason)
    if refused:
        config.issue_config_time_warning(pytest.PytestConfigWarning(f"--nbval-book-cache stores nothing: {refused}"),
                                         stacklevel=2)
        return
    config.stash_book_cache = Path(folder)
    execute = RunningKernel.execute_cell_input

    def execute_and_remember(self, cell_input, allow_stdin=None):
        self.last_msg_id = execute(self, cell_input, allow_stdin=allow_stdin)
        return self.last_msg_id

    get_message = IPyNbFile.get_kernel_message

    def get_and_remember(self, timeout=None, stream="iopub"):
        message = get_message(self, timeout=timeout, stream=stream)
        if stream == "iopub":
            self.__dict__.setdefault("book_cache_messages", []).append(message)
        return message

    RunningKernel.execute_cell_input = execute_and_remember
    IPyNbFile.get_kernel_message = get_and_remember


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """After each nbval cell's call: its outputs as nbclient would store them, or the reason the notebook is out."""
    outcome = yield
    if not isinstance(item, IPyNbCell) or getattr(item.config, "stash_book_cache", None) is None:
        return
    report, notebook = outcome.get_result(), item.parent
    if getattr(notebook, REPLAYED, False):
        return  # compared with the run the cache holds already (tools/testing/pytest_nbval_replay.py)
    run = notebook.__dict__.setdefault(KEY, {"cells": {}, "refused": None, "start": time.perf_counter()})
    if report.when != "call" and not (report.when == "setup" and report.skipped):
        if report.failed:
            run["refused"] = f"{item.name} failed in {report.when}"
        return
    tags = item.cell.metadata.get("tags", [])
    if report.skipped:
        if GPU_TAG in tags and skip_gpu_cells():
            run["cells"][item.cell_num] = None  # nbclient skips it too and leaves the cell as it is
        else:
            run["refused"] = f"{item.name} was skipped"
        return
    if report.failed:
        run["refused"] = f"{item.name} failed"
        return
    kernel = notebook.kernel
    messages = [m for m in notebook.__dict__.pop("book_cache_messages", [])
                if m["parent_header"].get("msg_id") == kernel.last_msg_id]
    outputs, count = [], None
    for message in messages:
        kind = message["msg_type"]
        if kind == "execute_input":
            count = message["content"]["execution_count"]
        elif kind in ("stream", "display_data", "execute_result", "error"):
            outputs.append(nbformat.v4.output_from_msg(message))
        elif kind in ("clear_output", "update_display_data"):
            run["refused"] = f"{item.name} uses {kind}, which nbval does not replay as nbclient does"
    run["cells"][item.cell_num] = (outputs, count)


def pytest_collectstart(collector):
    """A notebook's record starts empty each time it is collected."""
    collector.__dict__.pop(KEY, None)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After a notebook's last cell: store it when every code cell ran and passed."""
    folder = getattr(item.config, "stash_book_cache", None)
    if folder is None or not isinstance(item, IPyNbCell) or (nextitem is not None and nextitem.parent is item.parent):
        return
    notebook = item.parent
    run = notebook.__dict__.pop(KEY, None)
    path = Path(str(notebook.fspath)).resolve()
    if run is None or run["refused"]:
        return
    source = nbformat.read(path, as_version=4)
    code = [cell for cell in source.cells if cell.cell_type == "code"]
    if sorted(run["cells"]) != list(range(len(code))):
        return  # a cell was deselected or never ran
    for number, cell in enumerate(code):
        if run["cells"][number] is not None:
            cell.outputs, cell.execution_count = run["cells"][number]
    store(folder, path, source, time.perf_counter() - run["start"])


def store(folder: Path, path: Path, notebook, seconds: float) -> None:
    """Cache the executed notebook as jupyter-cache's executor does; one writer at a time (pytest-xdist workers)."""
    from jupyter_cache import get_cache
    from jupyter_cache.cache.main import CacheBundleIn

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".nbval-book-cache.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cache = get_cache(folder)
        cache.add_nb_to_project(str(path))
        cache.cache_notebook_bundle(CacheBundleIn(notebook, str(path), data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
