"""Keep the built book and Jupyter Book's cache to one checkpoint; `make book` runs this before it decides anything.

Jupyter Book's cache matches a notebook by its code alone, so outputs computed with one checkpoint would be served
for another. `_build/.checkpoint` names the checkpoint the build was made with and is rewritten only when
BERT_BOOK_CHECKPOINT names another one: then the cache and the build are emptied, and the newer file makes
`make book` rebuild.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build"
BUILD_OUTPUTS = (".jupyter_cache", "jupyter_execute", ".doctrees", "html")  # what a build leaves behind
RECORD = ".checkpoint"
DEFAULT = "packaged"  # helpers.checkpoint.PACKAGED; not imported here, because that would load transformers


def checkpoint_asked() -> str:
    """BERT_BOOK_CHECKPOINT, or 'packaged' when unset, as helpers.checkpoint.checkpoint_spec() reads it."""
    return os.environ.get("BERT_BOOK_CHECKPOINT", "").strip() or DEFAULT


def empty_build(build: Path) -> None:
    """Remove the execution cache and every build output under build."""
    for name in BUILD_OUTPUTS:
        shutil.rmtree(build / name, ignore_errors=True)


def record_checkpoint(build: Path, spec: str) -> bool:
    """Record spec in build/.checkpoint; when the last build used another checkpoint, empty the build first.

    A build without a record was made with the default checkpoint. Returns True when the build was emptied.
    """
    record = build / RECORD
    previous = record.read_text() if record.exists() else DEFAULT
    changed = previous != spec
    if changed:
        print(f"checkpoint_used: the build was made with {previous!r}, now {spec!r}: emptying the cache and the build")
        empty_build(build)
    if changed or not record.exists():  # leave the file's time alone otherwise: make compares it with the book's
        build.mkdir(parents=True, exist_ok=True)
        record.write_text(spec)
    return changed


if __name__ == "__main__":
    record_checkpoint(BUILD, checkpoint_asked())
