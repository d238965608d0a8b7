"""Sphinx extension: the book build skips cells tagged `gpu` on machines without CUDA."""

from __future__ import annotations

from tools.testing.gpu import configure_nbclient


def setup(app) -> dict:
    """Register with Sphinx; configure nbclient before myst-nb executes any notebook."""
    configure_nbclient()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
