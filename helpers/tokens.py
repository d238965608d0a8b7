"""From text to token ids and context-free token vectors."""

from __future__ import annotations

__all__: list[str] = []
