"""Segment (token-type) embeddings: sentence A and sentence B."""

from __future__ import annotations

__all__: list[str] = []
