"""Learned position embeddings: offset analyses and published probes."""

from __future__ import annotations

__all__: list[str] = []
