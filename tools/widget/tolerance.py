"""How far the exported graph may be from torch, derived from the weight format, never guessed.

A weight stored in fp16 is the float32 weight rounded to 11 significant bits: off by at most 2**-11 of itself (2**-25
below fp16's normal range); in int8 with one scale per row, by at most half that row's scale. Every sum and product
then runs in float32, as torch's do.
"""

from __future__ import annotations

import numpy as np

FP32_EPS = 2.0**-24  # float32's unit roundoff
FP16_REL, FP16_SUBNORMAL = 2.0**-11, 2.0**-25  # fp16's unit roundoff; half its smallest subnormal step is 2**-25


def stored_row_bound(fmt: str, rows: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """Elementwise bound on |stored - float32| for `rows` of a table stored in `fmt` (int8 needs the whole `table`
    rows' scales: pass the table rows `rows` came from as `table`)."""
    if fmt == "fp32":
        return np.zeros_like(rows)
    if fmt == "fp16":
        return FP16_REL * np.abs(rows) + FP16_SUBNORMAL
    if fmt == "int8":
        if table is None:
            raise ValueError("int8's bound needs the table rows the values came from (their per-row scales)")
        return np.broadcast_to(np.abs(table).max(axis=-1, keepdims=True) / 127 / 2, rows.shape) + 0.0
    raise ValueError(f"weight format {fmt!r} is not one of fp32, fp16, int8")


def sum_bound(parts: list[np.ndarray], bounds: list[np.ndarray]) -> np.ndarray:
    """Bound on the summed rows' error: each part's bound, plus float32's two roundings of the sum."""
    magnitude = sum(np.abs(part) for part in parts)
    return sum(bounds) + 2 * FP32_EPS * magnitude


def layernorm_bound(summed: np.ndarray, bound: np.ndarray, gamma: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Bound on LayerNorm's output error from an input error of at most `bound` per element (first order).

    y = gamma * x_hat + beta with x_hat = (x - mean) / std: a change dx moves x_hat_i by (dx_i - mean(dx) -
    x_hat_i * mean(x_hat * dx)) / std, at most (|dx_i| + max|dx| + |x_hat_i| * max|dx|) / std; float32 adds a
    reduction's rounding over the hidden size (hidden * eps) of each output.
    """
    hidden = summed.shape[-1]
    std = summed.std(axis=-1, keepdims=True)
    x_hat = (summed - summed.mean(axis=-1, keepdims=True)) / std
    largest = bound.max(axis=-1, keepdims=True)
    first_order = np.abs(gamma) * (bound + largest + np.abs(x_hat) * largest) / std
    return first_order * 1.01 + hidden * FP32_EPS * (np.abs(out) + 1)  # 1 %: the second-order terms
