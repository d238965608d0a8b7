"""The built HTML book as tests see it: where it is, its pages, and a local server for it."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"


def toc_pages() -> list[str]:
    """Every page of _toc.yml (root, chapters, their sections) as its path without suffix, root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = toc.get("chapters", []) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    pages = [toc["root"]]
    for entry in chapters:
        pages += [entry["file"]] + [section["file"] for section in entry.get("sections", [])]
    return pages


def is_notebook(page: str) -> bool:
    """True for a page built from a notebook."""
    return (ROOT / f"{page}.ipynb").exists()


def require_built_book() -> Path:
    """The built book's folder; skip (or, in CI, fail) with the reason when it is missing."""
    if (HTML / "index.html").exists():
        return HTML
    reason = "the book is not built: run `make book` first (make test does)"
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
