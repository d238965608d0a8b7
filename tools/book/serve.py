"""`python -m tools.book.serve [PORT]` (make serve): the built book on localhost, gzip-compressed like a good host.

Text files (HTML, CSS, JavaScript, JSON, SVG, the search index; the web fonts are already compressed WOFF2) go out
gzip-encoded to a browser that accepts it; each is compressed once and kept in memory while the server runs.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import sys
from pathlib import Path

from tools.book.toc import ROOT

SITE = ROOT / "_build" / "html"
COMPRESSIBLE = {".html", ".css", ".js", ".json", ".svg", ".txt", ".xml", ".map", ".ipynb", ".md", ".py",
                ".mjs", ".wasm"}  # the live widget's modules and WebAssembly runtime (13.6 MiB, 3.5 gzip-encoded)


@functools.lru_cache(maxsize=512)
def compressed(path: Path, mtime: float) -> bytes:
    """The gzip of a file's bytes (cached per path and modification time)."""
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)


class GzipHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site's folder; text files gzip-encoded when the request's Accept-Encoding names gzip."""

    def send_head(self):
        path = Path(self.translate_path(self.path))  # a folder (its index, its redirect) goes the plain way
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts and path.suffix in COMPRESSIBLE and path.is_file()):
            return super().send_head()
        body = compressed(path, path.stat().st_mtime)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept-Encoding")
        self.end_headers()
        return _Body(body)

    def log_message(self, *args) -> None:
        pass


class _Body:
    """The file-like object send_head returns: copyfile reads it, then the handler closes it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


def server(port: int = 0, directory: Path = SITE, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    """A gzip-serving HTTP server for `directory` on `host:port` (port 0: a free one), not yet started."""
    if not (directory / "index.html").exists():
        raise SystemExit(f"No book in {directory}: run 'make book' first.")
    handler = functools.partial(GzipHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer((host, port), handler)


def main() -> None:
    """Serve the built book until Ctrl-C."""
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    httpd = server(port)
    print(f"Serving the book at http://localhost:{port}/ (gzip; Ctrl-C to stop)")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
