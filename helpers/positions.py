"""Learned position embeddings: similarity along offsets and the published probes of what rows know about order.

phi(x, y) = <PE_x, PE_y> is the dot product of two position rows, as in Wang et al. 2021, "On Position Embeddings
in BERT", ICLR (https://openreview.net/forum?id=onxoVA9FxMw): translation invariance and monotonicity. The
absolute-position probe follows Wang & Chen 2020, "What Do Position Embeddings Learn?", EMNLP
(https://arxiv.org/abs/2010.04903).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LinearRegression
from sklearn.metrics.pairwise import cosine_similarity
from sklearn.model_selection import KFold, cross_val_predict
from threadpoolctl import threadpool_limits

__all__ = [
    "absolute_position_predictions",
    "absolute_position_probe",
    "band_statistics",
    "cosine_similarity_matrix",
    "diagonal_profile",
    "diagonal_values",
    "dot_product_matrix",
    "monotonicity",
    "position_probes",
    "rotation_period",
    "translation_cv",
    "translation_invariance",
]


def _check_table(table, min_rows: int = 2, name: str = "table") -> torch.Tensor:
    """Return the table as a float64 tensor (positions, hidden), or raise a clear error."""
    if not isinstance(table, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (positions, hidden), got {type(table).__name__}.")
    if table.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D (positions, hidden), got shape {tuple(table.shape)}. "
            "Pass a weight matrix such as model.embeddings.position_embeddings.weight."
        )
    if not table.dtype.is_floating_point:
        raise TypeError(f"{name} must hold floating-point vectors, got dtype {table.dtype}.")
    if table.shape[0] < min_rows or table.shape[1] < 1:
        raise ValueError(f"{name} has shape {tuple(table.shape)}: this analysis needs at least {min_rows} rows.")
    table = table.detach().cpu().double()
    if not torch.isfinite(table).all():
        raise ValueError(f"{name} holds NaN or infinite values.")
    return table


def _check_offset(max_offset, positions: int, extra: int = 0) -> int:
    """A positive integer offset that leaves at least one pair (x, x + max_offset + extra) inside the table."""
    if isinstance(max_offset, bool) or not isinstance(max_offset, int) or max_offset < 1:
        raise ValueError(f"max_offset must be a positive integer, got {max_offset!r}.")
    if max_offset + extra >= positions:
        raise ValueError(
            f"max_offset={max_offset} is too large for a table of {positions} rows: offsets up to "
            f"{max_offset + extra} are needed and the largest offset inside the table is {positions - 1}."
        )
    return max_offset


def dot_product_matrix(table: torch.Tensor) -> torch.Tensor:
    """phi(x, y) = <PE_x, PE_y> for every pair of rows, in float64; shape (positions, positions)."""
    table = _check_table(table)  # (positions, hidden)
    return table @ table.T  # (positions, positions)


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every pair of rows (scikit-learn's cosine_similarity); shape (positions, positions)."""
    table = _check_table(table)  # (positions, hidden)
    return torch.from_numpy(cosine_similarity(table.numpy()))  # (positions, positions), float64


def diagonal_values(matrix: torch.Tensor, max_offset: int) -> torch.Tensor:
    """M[x, x + k] for k = 0..max_offset in column k, NaN where x + k runs past the end; shape (positions, K + 1)."""
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        shape = tuple(matrix.shape) if isinstance(matrix, torch.Tensor) else type(matrix).__name__
        raise ValueError(f"matrix must be a square 2-D tensor (positions, positions), got {shape}.")
    positions = matrix.shape[0]
    _check_offset(max_offset, positions)
    x = torch.arange(positions)[:, None]  # (positions, 1)
    y = x + torch.arange(max_offset + 1)[None, :]  # (positions, K + 1)
    inside = y < positions
    values = matrix.double()[x, y.clamp(max=positions - 1)]  # (positions, K + 1)
    return values.masked_fill(~inside, float("nan"))


def diagonal_profile(matrix: torch.Tensor, max_offset: int, start: int = 0, stop: int | None = None) -> torch.Tensor:
    """Mean of M[x, x + k] over pairs with start <= x and x + k < stop, for k = 0..max_offset; shape (K + 1,)."""
    positions = matrix.shape[0]
    stop = positions if stop is None else stop
    if not 0 <= start < stop <= positions:
        raise ValueError(f"need 0 <= start < stop <= {positions}, got start={start}, stop={stop}.")
    _check_offset(max_offset, stop - start)
    values = diagonal_values(matrix[start:stop, start:stop], max_offset)  # (stop - start, K + 1)
    return values.nanmean(dim=0)


def translation_cv(table: torch.Tensor, max_offset: int = 20) -> torch.Tensor:
    """Coefficient of variation (std / |mean|) of phi(x, x + k) along each diagonal k = 1..max_offset; (K,)."""
    table = _check_table(table)
    _check_offset(max_offset, table.shape[0])
    values = diagonal_values(dot_product_matrix(table), max_offset)[:, 1:]  # (positions, K)
    inside = ~values.isnan()
    count = inside.sum(dim=0)  # (K,)
    mean = values.nan_to_num().sum(dim=0) / count  # (K,)
    variance = ((values - mean).nan_to_num() ** 2).sum(dim=0) / count  # population variance, (K,)
    return variance.sqrt() / mean.abs()


def translation_invariance(table: torch.Tensor, max_offset: int = 20) -> float:
    """Mean over k = 1..max_offset of the diagonal's coefficient of variation: 0 when phi depends only on k."""
    return float(translation_cv(table, max_offset).mean())


def monotonicity(table: torch.Tensor, max_offset: int = 20) -> float:
    """Fraction of pairs (x, k), k = 1..max_offset, with phi(x, x + k) > phi(x, x + k + 1): 1 = nearer is closer."""
    table = _check_table(table, min_rows=3)
    _check_offset(max_offset, table.shape[0], extra=1)
    values = diagonal_values(dot_product_matrix(table), max_offset + 1)  # (positions, K + 2)
    nearer, farther = values[:, 1:-1], values[:, 2:]  # (positions, K) each: offsets k and k + 1
    inside = ~farther.isnan()  # x + k + 1 inside the table (then x + k is too)
    return float((nearer > farther)[inside].double().mean())


def absolute_position_predictions(table: torch.Tensor, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Each row's position as predicted by a linear regression fitted on the other folds; shape (positions,)."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an integer of at least 2, got {folds!r}.")
    table = _check_table(table, min_rows=folds)
    positions = np.arange(table.shape[0], dtype=np.float64)  # the regression target: each row's index
    split = KFold(n_splits=folds, shuffle=True, random_state=seed)  # rows shuffled, then cut into folds
    with threadpool_limits(limits=1, user_api="blas"):  # small least squares: threads only fight on busy machines
        return cross_val_predict(LinearRegression(), table.numpy(), positions, cv=split)  # (positions,)


def absolute_position_probe(table: torch.Tensor, folds: int = 5, seed: int = 0) -> float:
    """Wang & Chen 2020: mean absolute error, in positions, of a cross-validated linear regression row -> index."""
    predicted = absolute_position_predictions(table, folds, seed)  # (positions,)
    return float(np.abs(predicted - np.arange(len(predicted))).mean())


def position_probes(table: torch.Tensor, max_offset: int = 20, seed: int = 0) -> dict[str, float]:
    """The three probes in one dict: absolute_probe_mae, translation_cv, monotonicity."""
    table = _check_table(table, min_rows=5)
    return {
        "absolute_probe_mae": absolute_position_probe(table, folds=5, seed=seed),
        "translation_cv": translation_invariance(table, max_offset),
        "monotonicity": monotonicity(table, max_offset),
    }


def rotation_period(coords) -> float:
    """Positions per full turn of a 2-D path around the origin, from the slope of its unwrapped angle."""
    coords = coords.detach().cpu().double().numpy() if isinstance(coords, torch.Tensor) else np.asarray(coords, float)
    if coords.ndim != 2 or coords.shape[1] != 2 or coords.shape[0] < 3:
        raise ValueError(f"coords must have shape (positions, 2) with at least 3 rows, got {coords.shape}.")
    angle = np.unwrap(np.arctan2(coords[:, 1], coords[:, 0]))  # (positions,), radians, without 2*pi jumps
    slope = np.polyfit(np.arange(len(angle)), angle, deg=1)[0]  # radians per position
    if not np.isfinite(slope) or abs(slope) < 1e-12:
        raise ValueError("the path does not turn around the origin, so it has no rotation period.")
    return float(2 * np.pi / abs(slope))


def band_statistics(table: torch.Tensor, edges: tuple[int, ...] = (128, 256)) -> list[dict]:
    """Per band of positions [a, b): rows, median row norm, mean cosine of neighbours (x, x + 1) inside the band."""
    table = _check_table(table)
    positions = table.shape[0]
    bounds = [0, *[int(e) for e in edges if 0 < int(e) < positions], positions]
    if sorted(set(bounds)) != bounds:
        raise ValueError(f"edges must increase strictly, got {edges!r}.")
    norms = torch.linalg.vector_norm(table, dim=1)  # (positions,)
    unit = table / norms[:, None]  # (positions, hidden)
    neighbour = (unit[:-1] * unit[1:]).sum(dim=1)  # (positions - 1,): cos(PE_x, PE_{x+1})
    rows = []
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        rows.append({
            "band": f"{start}..{stop - 1}",
            "rows": stop - start,
            "median_norm": float(norms[start:stop].median()),
            "neighbour_cosine": float(neighbour[start:stop - 1].mean()) if stop - start > 1 else float("nan"),
        })
    return rows
