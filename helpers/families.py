"""How the input layer differs across model families, read from transformers' own classes."""

from __future__ import annotations

__all__: list[str] = []
