"""A second build of the book from the reader's execution cache into its own folder (the class book, the PDF's page)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tools.book.toc import ROOT


def relocated_config(root: Path = ROOT) -> dict:
    """The reader's _config.yml for a build configured outside the root: extension paths and the cache made absolute."""
    config = yaml.safe_load((root / "_config.yml").read_text())
    sphinx = config.setdefault("sphinx", {})
    # Jupyter Book resolves local_extensions against the config file's folder, which is no longer the root.
    sphinx["local_extensions"] = {name: str((root / path).resolve())
                                  for name, path in (sphinx.get("local_extensions") or {}).items()}
    config.setdefault("execute", {})["cache"] = str(root / "_build" / ".jupyter_cache")  # the book's own cache
    return config


def build_beside(config: dict, folder: Path, builder: str = "html") -> int:
    """Write `config` into `folder` and build the book there with it (-W, like make book); return the exit code."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "_config.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = ["jupyter-book", "build", str(ROOT), "--builder", builder, "--config", str(config_path),
               "--path-output", str(folder), "--warningiserror", "--keep-going"]
    return subprocess.run(command).returncode
