"""The browser visit's results, stored as JSON by a key over everything they depend on (the served site, the code
that visits and measures, axe-core, Chromium, Playwright, Pillow, matplotlib, Python, the fonts): a later session with
the same key and the same screenshots loads them instead of visiting (`--visit-cache DIR`, pytest_visit_cache).
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import subprocess
import sys
import tempfile
from dataclasses import fields
from importlib.metadata import version
from pathlib import Path

from tools.environment import ROOT

FORMAT = 1
KEEP = 3  # entries kept: the newest few, so the folder stays a few MiB
BOOK_URL = "{{visit_store:book_url}}"  # stands for the server's address, whose port changes every session
# The code that visits and measures, and what it reads: conftest.py and every module it imports for that.
CODE = [ROOT / path for path in ("tests/book/conftest.py", "tests/book/visit_store.py", "tools/book/pdf.py",
                                 "tools/book/toc.py", "tools/book/side_build.py", "tools/environment.py",
                                 "helpers/plots.py", "_toc.yml")]
PACKAGES = ("playwright", "pillow", "matplotlib")  # the driver, table_contrast's image decoder and its colours


def _items(mapping: dict) -> list:
    return [[list(key) if isinstance(key, tuple) else key, value] for key, value in mapping.items()]


def _mapping(items: list, value=lambda v: v) -> dict:
    return {tuple(key) if isinstance(key, list) else key: value(found) for key, found in items}


# PageVisit's fields that JSON would not give back as they were (tuples, sets, keys that are not strings).
CONVERT = {
    "fetched": (lambda m: m, lambda m: {url: tuple(seen) for url, seen in m.items()}),
    "math": (list, tuple),
    "formulas": (list, tuple),
    "layout": (_items, _mapping),
    "line_starts": (_items, _mapping),
    "axe": (_items, _mapping),
    "tables": (_items, lambda items: _mapping(items, lambda cells: [tuple(cell) for cell in cells])),
    "backgrounds": (sorted, set),
}
SAME = (lambda v: v, lambda v: v)


def encode(visit) -> dict:
    """One PageVisit as plain JSON values."""
    return {f.name: CONVERT.get(f.name, SAME)[0](getattr(visit, f.name)) for f in fields(visit)}


def decode(data: dict, cls):
    """The `cls` (PageVisit) that `encode` made `data` from."""
    return cls(**{name: CONVERT.get(name, SAME)[1](value) for name, value in data.items()})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def site_digest(site: Path) -> str:
    """Every file the server serves: its path, its content type and its bytes, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        name = path.relative_to(site).as_posix()
        digest.update(f"{name}\0{mimetypes.guess_type(name)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def chromium_version(executable: str) -> str | None:
    """`chromium --version`'s line, or None when it cannot say (then nothing is replayed)."""
    try:
        return subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def fonts() -> str:
    """The fonts Chromium may draw the text with (the page's own fonts are part of the site)."""
    try:
        listed = subprocess.run(["fc-list", "--format", "%{file} %{fullname}\n"], capture_output=True, text=True,
                                timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "fc-list unavailable"
    return hashlib.sha256("".join(sorted(listed.splitlines(keepends=True))).encode()).hexdigest()


def key_parts(site: Path, code: list[Path], axe: Path, chromium: str, pages: list[str]) -> dict[str, str]:
    """What the visit's results depend on, each part as a string (hashes for files)."""
    return {"site": site_digest(site), "code": {str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p): sha256(p)
                                                for p in code},
            "axe": sha256(axe) if axe.exists() else "absent", "chromium": chromium, "python": sys.version,
            "packages": {name: version(name) for name in PACKAGES}, "fonts": fonts(), "pages": pages}


def key_of(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class VisitStore:
    """The entry for one key in `folder`: `<key>.json`, holding every page's PageVisit and the screenshots' hashes."""

    def __init__(self, folder: Path, parts: dict) -> None:
        self.folder, self.parts, self.key = Path(folder), parts, key_of(parts)
        self.path = self.folder / f"{self.key}.json"

    def load(self, cls, book_url: str, screenshots: list[Path]) -> tuple[dict | None, str]:
        """The stored visits (with this session's `book_url`), or None and why they cannot be used."""
        if not self.path.exists():
            return None, f"no stored visit for key {self.key[:16]}"
        try:
            entry = json.loads(self.path.read_text().replace(BOOK_URL, book_url))
            if entry["format"] != FORMAT or entry["key"] != self.key:
                raise ValueError(f"format {entry['format']}, key {entry['key']}")
            visits = {stem: decode(data, cls) for stem, data in entry["pages"].items()}
            stored_shots = entry["screenshots"]
        except (OSError, ValueError, KeyError, TypeError) as error:  # a damaged entry: visit again
            return None, f"stored visit {self.path} is unreadable ({type(error).__name__}: {error})"
        now = {str(shot): sha256(shot) if shot.exists() else "missing" for shot in screenshots}
        if now != stored_shots:
            changed = sorted(Path(s).name for s in set(now) | set(stored_shots) if now.get(s) != stored_shots.get(s))
            return None, f"the screenshots differ from the stored visit's ({', '.join(changed)})"
        return visits, f"replayed from {self.path} (key {self.key[:16]})"

    def save(self, visits: dict, book_url: str, screenshots: list[Path]) -> Path:
        """Write the entry atomically (a temporary file renamed into place), then keep only the newest KEEP."""
        entry = {"format": FORMAT, "key": self.key, "parts": self.parts,
                 "screenshots": {str(shot): sha256(shot) if shot.exists() else "missing" for shot in screenshots},
                 "pages": {stem: encode(visit) for stem, visit in visits.items()}}
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry).replace(book_url, BOOK_URL)
        with tempfile.NamedTemporaryFile("w", dir=self.folder, suffix=".tmp", delete=False) as temporary:
            temporary.write(text)
        os.replace(temporary.name, self.path)
        for old in sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]:
            old.unlink(missing_ok=True)
        return self.path


def replay_or_visit(store: VisitStore | None, visit, cls, book_url: str, screenshots: list[Path]):
    """The stored visits when `store` holds a usable entry, else `visit()`'s (stored when there is a store); with the
    line that says which."""
    if store is None:
        return visit(), None
    visits, why = store.load(cls, book_url, screenshots)
    if visits is not None:
        return visits, f"browser visit: {why}: {len(visits)} pages, the same site, visiting code, axe-core, Chromium " \
                       "and screenshots; VISIT_FROM_CACHE= visits them"
    visits = visit()
    path = store.save(visits, book_url, screenshots)
    return visits, f"browser visit: {why}: visited {len(visits)} pages, stored as {path}"
