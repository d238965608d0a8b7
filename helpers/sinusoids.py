"""Sinusoidal position encodings (Vaswani et al. 2017, section 3.5), interleaved layout, and their geometry."""

from __future__ import annotations

import math

import torch

__all__ = [
    "sinusoidal_table",
    "inverse_frequencies",
    "wavelengths",
    "rotation_matrix",
    "offset_dot_product",
    "halves_permutation",
    "to_halves_layout",
]


def _check_positions(num_positions) -> None:
    if isinstance(num_positions, bool) or not isinstance(num_positions, int) or num_positions <= 0:
        raise ValueError(f"num_positions must be a positive integer, got {num_positions!r}.")


def _check_d_model(d_model) -> None:
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model <= 0 or d_model % 2:
        raise ValueError(
            f"d_model must be a positive even integer, got {d_model!r}: each frequency fills a (sin, cos) "
            "pair of columns. Use an even width (BERT-sized models use 384, 512 or 768)."
        )


def _check_base(base) -> None:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a real number, got {type(base).__name__} {base!r} (the paper uses 10000).")
    if not base > 1.0 or math.isinf(base):
        raise ValueError(f"base must be a finite number greater than 1, got {base!r} (the paper uses 10000).")


def _check_offset(offset) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an integer number of positions, got {type(offset).__name__} {offset!r}.")


def inverse_frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency w_i = base^(-2i/d) of each (sin, cos) pair i = 0 .. d/2 - 1; float64, shape (d_model/2,)."""
    _check_d_model(d_model)
    _check_base(base)
    return float(base) ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def wavelengths(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Wavelength 2*pi / w_i of each pair, in positions: 2*pi up to 2*pi*base^(1 - 2/d); float64, (d_model/2,)."""
    return 2 * math.pi / inverse_frequencies(d_model, base)


def sinusoidal_table(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)); shape (positions, d_model)."""
    _check_positions(num_positions)
    _check_d_model(d_model)
    _check_base(base)
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (positions, 1)
    angle = position * inverse_frequencies(d_model, base)  # (positions, d_model/2)
    table = torch.empty(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


def rotation_matrix(offset: int, d_model: int, base: float = 10000.0,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Block-diagonal M_k of 2x2 rotations with PE[p + k] = M_k @ PE[p] for every p; shape (d_model, d_model).

    Block i maps (sin a, cos a) to (sin(a + k w_i), cos(a + k w_i)): [[cos kw, sin kw], [-sin kw, cos kw]].
    """
    _check_offset(offset)
    angle = offset * inverse_frequencies(d_model, base)  # (d_model/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d_model/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)


def offset_dot_product(offset: int, d_model: int, base: float = 10000.0) -> float:
    """Closed form of PE[p] . PE[p + k] = sum_i cos(k w_i): it does not depend on p."""
    _check_offset(offset)
    return float(torch.cos(offset * inverse_frequencies(d_model, base)).sum())


def halves_permutation(d_model: int) -> torch.Tensor:
    """Column order r_[0:d:2, 1:d:2]: all sin columns first, then all cos columns (Marian's layout); (d_model,)."""
    _check_d_model(d_model)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def to_halves_layout(table: torch.Tensor) -> torch.Tensor:
    """Reorder an interleaved (positions, d_model) table to the sin-half / cos-half layout."""
    if not isinstance(table, torch.Tensor) or table.ndim != 2:
        raise ValueError(f"table must be a 2-D tensor (positions, d_model), got {getattr(table, 'shape', table)!r}.")
    return table[:, halves_permutation(table.shape[1])]
