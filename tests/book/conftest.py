"""The built HTML book as tests see it: where it is, and a local server for it (the `book_url` fixture)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

from tools.book.pdf import CHROMIUM, CHROMIUM_ARGS  # the browser that prints the PDF runs the tests
from tools.book.toc import ROOT

HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"


def require_built_book(folder: Path = HTML, target: str = "book") -> Path:
    """A built book's folder (`make <target>` builds it); skip (or, in CI, fail) with the reason when it is missing."""
    if (folder / "index.html").exists():
        return folder
    reason = f"the {target} is not built: run `make {target}` first (make test does)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def book_url():
    """Serve _build/html on a free localhost port for the session; yield its base URL."""
    directory = require_built_book()
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def visit(tab, url: str):
    """Open `url` in `tab` and return its response once the page, its images and its fonts have loaded.

    Playwright's "networkidle" adds half a second of quiet to every load; the tests that need every request settled
    (failed requests, bytes fetched) still wait for it, the others only for what they measure.
    """
    response = tab.goto(url, wait_until="load")
    tab.evaluate("document.fonts.ready.then(() => null)")
    return response


def _chromium_or_skip():
    if Path(CHROMIUM).exists():
        return CHROMIUM
    reason = f"Chromium not found at {CHROMIUM}: apt-get install chromium chromium-driver (.ci/run does in CI)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module."""
    executable = _chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
