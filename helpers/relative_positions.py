"""Relative position schemes: T5's bucketed attention bias."""

from __future__ import annotations

__all__: list[str] = []
