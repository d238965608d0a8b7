"""make serve (tools/book/serve.py): text files go out gzip-encoded to a browser that accepts it, byte for byte the
file once decompressed (Python's gzip module, the reference); images and clients without gzip get the plain file."""

from __future__ import annotations

import gzip
import threading
import urllib.request

import pytest

from tools.book.serve import server


@pytest.fixture
def site(tmp_path):
    """A tiny site served by tools.book.serve on a free port: yields (base URL, folder)."""
    (tmp_path / "index.html").write_text("<p>" + "BERT's first vectors. " * 200 + "</p>")
    (tmp_path / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    httpd = server(0, tmp_path)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", tmp_path
    httpd.shutdown()


def fetch(url: str, encoding: str | None) -> tuple[dict, bytes]:
    """Headers and body of a GET, asking for `encoding` (None: no Accept-Encoding)."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding} if encoding else {})
    with urllib.request.urlopen(request) as response:
        return dict(response.headers), response.read()


def test_html_is_gzipped_for_a_browser_that_accepts_it(site):
    url, folder = site
    headers, body = fetch(f"{url}/index.html", "gzip, deflate, br")
    assert headers["Content-Encoding"] == "gzip" and int(headers["Content-Length"]) == len(body)
    assert gzip.decompress(body) == (folder / "index.html").read_bytes()
    assert len(body) < (folder / "index.html").stat().st_size / 4


def test_plain_for_a_client_without_gzip_and_for_images(site):
    url, folder = site
    headers, body = fetch(f"{url}/index.html", None)
    assert "Content-Encoding" not in headers and body == (folder / "index.html").read_bytes()
    headers, body = fetch(f"{url}/figure.png", "gzip")
    assert "Content-Encoding" not in headers and body == (folder / "figure.png").read_bytes()


def test_no_built_book_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="make book"):
        server(0, tmp_path)
