"""Position rows one at a time: a row against the rest of its table, and a one-column read-out that extrapolates.

Taught in learned positions: "Does a read-out extrapolate?" and "Row 127". Both compare a learned table with the
sinusoid and with untrained tables drawn as BertModel initialises them (normal, standard deviation
initializer_range).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LinearRegression
from threadpoolctl import threadpool_limits

from helpers import validation
from helpers.positions import _check_table, absolute_position_predictions

__all__ = [
    "one_column_extrapolation",
    "most_extreme_z",
    "row_standing",
    "row_statistics",
    "untrained_position_table",
]

# What row_statistics measures, and which end of each is unusual: +1 = large values, -1 = small ones.
_UNUSUAL_END = {"norm": 1, "neighbour cosine": -1, "probe residual": 1}


def untrained_position_table(num_positions: int, hidden: int, std: float, seed: int) -> torch.Tensor:
    """A table as BertModel initialises one: N(0, std^2) drawn in float64, rounded once; (positions, hidden)."""
    num_positions = validation.integer("num_positions", num_positions, minimum=1)
    hidden = validation.integer("hidden", hidden, minimum=1)
    seed = validation.integer("seed", seed, minimum=0)
    if isinstance(std, bool) or not isinstance(std, (int, float)) or not std > 0:
        raise ValueError(f"std must be a positive number (config.initializer_range), got {std!r}.")
    validation.check_allocation("untrained_position_table", (num_positions, hidden), 8 + 4)
    draw = torch.randn(num_positions, hidden, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return (draw * std).float()


def one_column_extrapolation(table: torch.Tensor, fit_rows: int) -> dict[str, float]:
    """Fit a line through one column on rows 0..fit_rows-1, predict the rest: its MAE, the column and its |r|.

    The column is the one whose values correlate best (|Pearson r|) with the index on the fitted rows; scikit-learn's
    LinearRegression on it alone predicts the unseen rows. Compare extrapolation_mae's ridge over all columns."""
    rows = _check_table(table).numpy()  # (positions, hidden)
    fit_rows = validation.integer("fit_rows", fit_rows)
    if not 3 <= fit_rows < len(rows):
        raise ValueError(f"fit_rows must leave at least 3 rows to fit and one to predict, got {fit_rows} of "
                         f"{len(rows)}.")
    target = np.arange(len(rows), dtype=np.float64)
    fitted, unseen = rows[:fit_rows], rows[fit_rows:]
    centred = fitted - fitted.mean(axis=0)  # (fit_rows, hidden)
    index = target[:fit_rows] - target[:fit_rows].mean()
    spread = np.linalg.norm(centred, axis=0) * np.linalg.norm(index)  # (hidden,)
    r = np.divide(centred.T @ index, spread, out=np.zeros(rows.shape[1]), where=spread > 0)
    column = int(np.argmax(np.abs(r)))
    with threadpool_limits(limits=1, user_api="blas"):
        line = LinearRegression().fit(fitted[:, [column]], target[:fit_rows])
    mae = float(np.abs(line.predict(unseen[:, [column]]) - target[fit_rows:]).mean())
    return {"mae": mae, "column": column, "r": float(abs(r[column]))}


def row_statistics(table: torch.Tensor, seed: int = 0) -> dict[str, np.ndarray]:
    """Per row: its norm, its mean cosine with the rows either side, and the absolute-position probe's |residual|.

    Each value is an array of shape (positions,); the end rows have one neighbour."""
    rows = _check_table(table, min_rows=5)  # (positions, hidden), float64
    norms = torch.linalg.vector_norm(rows, dim=1)  # (positions,)
    unit = rows / norms[:, None]
    pair = (unit[:-1] * unit[1:]).sum(dim=1).numpy()  # (positions - 1,): cos(x, x + 1)
    neighbour = np.concatenate([pair[:1], (pair[:-1] + pair[1:]) / 2, pair[-1:]])  # (positions,)
    predicted = absolute_position_predictions(table, seed=seed)  # (positions,), cross-validated
    residual = np.abs(predicted - np.arange(len(predicted)))
    return {"norm": norms.numpy(), "neighbour cosine": neighbour, "probe residual": residual}


def _z(values: np.ndarray) -> np.ndarray:
    """Standard scores over the rows (population standard deviation)."""
    return (values - values.mean()) / values.std()


def row_standing(statistics: dict[str, np.ndarray], row: int) -> dict[str, dict[str, float]]:
    """Per statistic: the row's value, its z-score over the rows, its rank (1 = most unusual end), the median."""
    if not isinstance(statistics, dict) or set(statistics) != set(_UNUSUAL_END):
        raise TypeError(f"statistics must be row_statistics(table)'s dict with keys {sorted(_UNUSUAL_END)}, got "
                        f"{type(statistics).__name__}.")
    positions = len(statistics["norm"])
    row = validation.integer("row", row, minimum=0)
    if row >= positions:
        raise ValueError(f"row={row} is past the table's last row, {positions - 1}.")
    standing = {}
    for name, sign in _UNUSUAL_END.items():
        values = statistics[name]
        standing[name] = {"value": float(values[row]), "z": float(_z(values)[row]),
                          "rank": int((sign * values > sign * values[row]).sum()) + 1,
                          "median": float(np.median(values))}
    return standing


def most_extreme_z(statistics: dict[str, np.ndarray]) -> dict[str, float]:
    """Per statistic, the z-score of the most unusual row at its unusual end (largest norm, lowest cosine, ...)."""
    return {name: float(sign * (sign * _z(statistics[name])).max()) for name, sign in _UNUSUAL_END.items()}
