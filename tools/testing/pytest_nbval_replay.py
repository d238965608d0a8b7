"""pytest plugin: `--nbval-from-cache DIR` compares a notebook with the run Jupyter Book's cache holds for it, when
that run is of the same code in the same environment, instead of running every cell again.

jupyter-cache matches a notebook by its code cells; `_build/.fingerprint` (tools/book/fingerprint.py) records what
else the outputs depend on: the helpers, the pins, the installed versions, the checkpoint and this CPU. A notebook
is replayed only when the cache holds its code and the recorded fingerprint is the one computed now; nbval then
checks every cell as usual (its outputs, sanitized and compared with the stored ones; an error fails the cell), fed
the cached outputs in place of a kernel's messages. Any other notebook runs in a kernel, as without the option.
A fresh clone (CI) has no cache, so it runs everything; so does `make test NBVAL_FROM_CACHE=`.
"""

from __future__ import annotations

import functools
import uuid
from collections import deque
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbFile

from tools.book import fingerprint

REPLAYED = "nbval_replayed"  # set on an IPyNbFile whose cells are fed from the cache


def pytest_addoption(parser):
    parser.addoption("--nbval-from-cache", metavar="DIR", default=None,
                     help="compare a notebook with its run in this jupyter-cache when the code and the environment "
                          "(_build/.fingerprint) are unchanged, instead of running it again")


def environment_unchanged(cache: Path) -> bool:
    """True when the fingerprint recorded beside the cache is the one computed now."""
    return fingerprint.recorded(cache.parent) == current_fingerprint()


@functools.cache
def current_fingerprint() -> dict:
    """This process's fingerprint, computed once (it hashes the helpers and reads every pinned version)."""
    return fingerprint.fingerprint()


def cached_run(cache: Path, path: Path) -> nbformat.NotebookNode | None:
    """The cache's executed copy of the notebook at `path` (matched by its code), or None."""
    from jupyter_cache import get_cache

    if not (cache / "global.db").exists():
        return None
    store = get_cache(cache)
    try:
        record = store.match_cache_notebook(nbformat.read(path, as_version=4))
        return store.get_cache_bundle(record.pk).nb
    except KeyError:
        return None


def _message(kind: str, content: dict, msg_id: str) -> dict:
    return {"msg_type": kind, "content": content, "parent_header": {"msg_id": msg_id}}


def as_message(output: nbformat.NotebookNode, msg_id: str) -> dict:
    """The iopub message a kernel would have sent for one stored output."""
    kind = output.output_type
    if kind == "stream":
        return _message(kind, {"name": output.name, "text": output.text}, msg_id)
    if kind == "error":
        return _message(kind, {"ename": output.ename, "evalue": output.evalue, "traceback": output.traceback},
                        msg_id)
    content = {"data": output.data, "metadata": output.get("metadata", {})}
    if kind == "execute_result":
        content["execution_count"] = output.execution_count
    return _message(kind, content, msg_id)


class CachedKernel:
    """Stands in for nbval's RunningKernel: answers each cell sent with the outputs the cached run holds for it."""

    def __init__(self, executed: nbformat.NotebookNode):
        self.cells = [cell for cell in executed.cells if cell.cell_type == "code"]
        self.next, self.messages, self.last_msg_id = 0, deque(), None

    def execute_cell_input(self, cell_input: str, allow_stdin=None) -> str:
        """Queue the cached outputs of the next cell with this source (skipped cells are passed over)."""
        while self.next < len(self.cells) and self.cells[self.next].source != cell_input:
            self.next += 1
        if self.next == len(self.cells):
            raise RuntimeError(f"the cached run has no cell {cell_input[:80]!r} at this point")
        cell, self.next = self.cells[self.next], self.next + 1
        msg_id = self.last_msg_id = uuid.uuid4().hex
        self.messages.extend(as_message(output, msg_id) for output in cell.outputs)
        self.messages.append(_message("status", {"execution_state": "idle"}, msg_id))
        return msg_id

    def await_reply(self, msg_id, timeout=None):
        return None

    def get_message(self, stream="iopub", timeout=None) -> dict:
        return self.messages.popleft()

    def await_idle(self, msg_id, timeout=None) -> None:
        while self.messages:
            message = self.messages.popleft()
            if message["msg_type"] == "status":
                return

    def is_alive(self) -> bool:
        return True

    def interrupt(self) -> None:
        pass

    def stop(self) -> None:
        pass


def replayable(config, path: Path) -> nbformat.NotebookNode | None:
    """The cached run to compare `path` with, or None when it must run in a kernel."""
    folder = config.getoption("--nbval-from-cache", None)
    if not folder or not environment_unchanged(Path(folder)):
        return None
    return cached_run(Path(folder), path)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """Start no kernel for a notebook whose run the cache holds: feed nbval that run instead."""
    if not config.getoption("--nbval-from-cache", None) or getattr(IPyNbFile.setup, "replays", False):
        return
    start_kernel = IPyNbFile.setup

    def setup(self):
        executed = replayable(self.config, Path(str(self.fspath)).resolve())
        if executed is None:
            return start_kernel(self)
        self.kernel = CachedKernel(executed)
        setattr(self, REPLAYED, True)
        self.setup_sanitize_files()

    setup.replays = True
    IPyNbFile.setup = setup


def pytest_report_header(config, start_path):
    """Say which notebooks will be compared with their cached run, and how to run them all instead."""
    if not config.getoption("--nbval-from-cache", None):
        return None
    notebooks = sorted(p for arg in config.args for p in _notebooks(Path(arg)))
    cached = [p.stem for p in notebooks if replayable(config, p.resolve()) is not None]
    if not cached:
        return f"nbval: every notebook runs in a kernel (none of {len(notebooks)} is in the cache for this code " \
               "and environment)"
    return (f"nbval: {len(cached)} of {len(notebooks)} notebooks compared with their cached run (same code, same "
            f"environment), the rest run in a kernel; NBVAL_FROM_CACHE= runs them all: {', '.join(cached)}")


def _notebooks(path: Path) -> list[Path]:
    if path.suffix == ".ipynb":
        return [path]
    return [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts] if path.is_dir() else []
