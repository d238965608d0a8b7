"""A copy of the checkout somewhere else, as a fresh clone would be: for tests that prove nothing depends on where
the repository lives."""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.environment import ROOT

# What a clone does not have: the venv, build outputs, caches, installed node modules.
NOT_IN_A_CLONE = (".git", ".venv", "_build", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
                  ".ipynb_checkpoints", "node_modules", "dist", "build", "*.egg-info", ".jupyter_cache")


def copy_checkout(destination: Path, root: Path = ROOT) -> Path:
    """Copy the project's files (not its venv, builds or caches) to `destination`, which must not exist yet."""
    shutil.copytree(root, destination, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE), symlinks=True)
    return destination
