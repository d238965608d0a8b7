"""Sinusoidal position encodings (Vaswani et al. 2017, section 3.5), interleaved layout."""

from __future__ import annotations

import math

import torch

__all__ = ["sinusoidal_table"]


def sinusoidal_table(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)); shape (positions, d_model)."""
    if isinstance(num_positions, bool) or not isinstance(num_positions, int) or num_positions <= 0:
        raise ValueError(f"num_positions must be a positive integer, got {num_positions!r}.")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model <= 0 or d_model % 2:
        raise ValueError(
            f"d_model must be a positive even integer, got {d_model!r}: each frequency fills a (sin, cos) "
            "pair of columns. Use an even width (BERT-sized models use 384, 512 or 768)."
        )
    if not base > 1.0 or math.isinf(base):
        raise ValueError(f"base must be a finite number greater than 1, got {base!r} (the paper uses 10000).")
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (positions, 1)
    inverse_frequency = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    angle = position * inverse_frequency  # (positions, d_model/2)
    table = torch.empty(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()
