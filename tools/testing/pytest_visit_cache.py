"""pytest plugin: `--visit-cache DIR` loads the book's browser visit (tests/book/conftest.py's `visited`) from DIR when
a visit of the same site by the same code, axe-core, Chromium and Python is stored there with the same screenshots,
instead of visiting every page again (tests/book/visit_store.py); otherwise it visits and stores the results.

Without the option every session visits. A fresh clone (CI) has no stored visit, so it visits; so does
`make test VISIT_FROM_CACHE=`. The session's end says which happened. A test that uses the visit and fails drops the
entry this session wrote or read, so that a failure is never replayed: the next session visits again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

LINES = pytest.StashKey[list]()
ENTRY = pytest.StashKey[Path]()  # the entry the session's visit came from or went to
WORKER_KEY = "visit_cache_lines"


def pytest_addoption(parser):
    parser.addoption("--visit-cache", metavar="DIR", default=None,
                     help="load the book's browser visit from this folder when the site, the visiting code and the "
                          "browser are unchanged, instead of visiting again (and store a visit there)")


def folder(config) -> Path | None:
    """The folder the option names, or None: no stored visit is read or written."""
    value = config.getoption("--visit-cache", None)
    return Path(value) if value else None


def note(config, line: str, entry: Path | None = None) -> None:
    """Keep `line` for the session's end; remember the entry the visit came from or went to."""
    config.stash.setdefault(LINES, []).append(line)
    if entry is not None:
        config.stash[ENTRY] = entry


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    entry = item.config.stash.get(ENTRY, None)
    if report.failed and entry is not None and "visited" in getattr(item, "fixturenames", ()):
        entry.unlink(missing_ok=True)
        note(item.config, f"browser visit: {item.nodeid} failed: dropped {entry}, the next session visits")
        del item.config.stash[ENTRY]


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller prints
        session.config.workeroutput[WORKER_KEY] = session.config.stash.get(LINES, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for line in getattr(node, "workeroutput", {}).get(WORKER_KEY, []):
        note(node.config, line)


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(LINES, [])
    if lines and not hasattr(config, "workeroutput"):
        terminalreporter.write_sep("=", "browser visit")
        for line in lines:
            terminalreporter.write_line(line)
