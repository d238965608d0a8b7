"""Learned position embeddings: similarity along offsets and the published probes of what rows know about order.

phi(x, y) = <PE_x, PE_y> is the dot product of two position rows, as in Wang et al. 2021, "On Position Embeddings
in BERT", ICLR (https://openreview.net/forum?id=onxoVA9FxMw): translation invariance and monotonicity. The
absolute-position probe follows Wang & Chen 2020, "What Do Position Embeddings Learn?", EMNLP
(https://arxiv.org/abs/2010.04903).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics.pairwise import cosine_similarity
from sklearn.model_selection import KFold, cross_val_predict
from threadpoolctl import threadpool_limits

from helpers import validation

__all__ = [
    "absolute_position_predictions",
    "absolute_position_probe",
    "band_statistics",
    "constant_position_mae",
    "extrapolation_mae",
    "relative_order_probe",
    "cosine_similarity_matrix",
    "diagonal_profile",
    "rotation_period",
    "order_properties",
]


def _check_table(table, min_rows: int = 2, name: str = "table") -> torch.Tensor:
    """Return the table as a float64 tensor (positions, hidden), or raise a clear error."""
    if isinstance(table, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.Tensor of shape (positions, hidden), got the module "
                        f"{type(table).__name__}: pass the table itself, model.embeddings.position_embeddings.weight.")
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


def _check_max_offset_fits(max_offset, positions: int, extra: int = 0) -> int:
    """A positive integer offset that leaves at least one pair (x, x + max_offset + extra) inside the table."""
    max_offset = validation.integer("max_offset", max_offset, minimum=1, hint=" (an offset k between positions)")
    if max_offset + extra >= positions:
        raise ValueError(
            f"max_offset={max_offset} is too large for a table of {positions} rows: offsets up to "
            f"{max_offset + extra} are needed and the largest offset inside the table is {positions - 1}."
        )
    return max_offset


def dot_product_matrix(table: torch.Tensor) -> torch.Tensor:
    """phi(x, y) = <PE_x, PE_y> for every pair of rows, in float64; shape (positions, positions).

    Taught in learned positions, "Published probes, reproduced"."""
    table = _check_table(table)  # (positions, hidden)
    validation.check_allocation("dot_product_matrix", (table.shape[0], table.shape[0]), 8)
    dots = table @ table.T  # (positions, positions)
    if not torch.isfinite(dots).all():  # finite values whose products pass float64's largest, about 1.8e308
        raise ValueError(f"table's values (up to {float(table.abs().max()):.3g} in size) are too large: their dot "
                         "products overflow float64. Pass an embedding table (rows of size about 1).")
    return dots


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every pair of rows (scikit-learn's cosine_similarity); shape (positions, positions).

    Taught in learned positions, "Pictures of the rows"."""
    table = _check_table(table)  # (positions, hidden)
    validation.check_allocation("cosine_similarity_matrix", (table.shape[0], table.shape[0]), 8 * 2)  # + normalised
    return torch.from_numpy(cosine_similarity(table.numpy()))  # (positions, positions), float64


def _diagonal_values(matrix: torch.Tensor, max_offset: int) -> torch.Tensor:
    """M[x, x + k] for k = 0..max_offset in column k, NaN where x + k runs past the end; shape (positions, K + 1)."""
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        shape = tuple(matrix.shape) if isinstance(matrix, torch.Tensor) else type(matrix).__name__
        raise ValueError(f"matrix must be a square 2-D tensor (positions, positions), got {shape}.")
    positions = matrix.shape[0]
    max_offset = _check_max_offset_fits(max_offset, positions)
    validation.check_allocation("the diagonals", (positions, max_offset + 1), 8 * 4)  # indices, values, mask
    x = torch.arange(positions)[:, None]  # (positions, 1)
    y = x + torch.arange(max_offset + 1)[None, :]  # (positions, K + 1)
    inside = y < positions
    values = matrix.double()[x, y.clamp(max=positions - 1)]  # (positions, K + 1)
    return values.masked_fill(~inside, float("nan"))


def diagonal_profile(matrix: torch.Tensor, max_offset: int, start: int = 0, stop: int | None = None) -> torch.Tensor:
    """Mean of M[x, x + k] over pairs with start <= x and x + k < stop, for k = 0..max_offset; shape (K + 1,).

    Taught in learned positions, "Training length leaves a mark"."""
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        shape = tuple(matrix.shape) if isinstance(matrix, torch.Tensor) else type(matrix).__name__
        error = ValueError if isinstance(matrix, torch.Tensor) else TypeError
        raise error(f"matrix must be a square 2-D tensor (positions, positions), got {shape}: pass e.g. "
                    "cosine_similarity_matrix(table).")
    positions = matrix.shape[0]
    start = validation.integer("start", start, minimum=0)
    stop = positions if stop is None else validation.integer("stop", stop)
    if not 0 <= start < stop <= positions:
        raise ValueError(f"need 0 <= start < stop <= {positions}, got start={start}, stop={stop}.")
    _check_max_offset_fits(max_offset, stop - start)
    values = _diagonal_values(matrix[start:stop, start:stop], max_offset)  # (stop - start, K + 1)
    return values.nanmean(dim=0)


def _translation_cv(table: torch.Tensor, max_offset: int = 20) -> torch.Tensor:
    """Coefficient of variation (std / |mean|) of phi(x, x + k) along each diagonal k = 1..max_offset; (K,)."""
    table = _check_table(table)
    _check_max_offset_fits(max_offset, table.shape[0])
    values = _diagonal_values(dot_product_matrix(table), max_offset)[:, 1:]  # (positions, K)
    inside = ~values.isnan()
    count = inside.sum(dim=0)  # (K,)
    mean = values.nan_to_num().sum(dim=0) / count  # (K,)
    variance = ((values - mean).nan_to_num() ** 2).sum(dim=0) / count  # population variance, (K,)
    return variance.sqrt() / mean.abs()


def _translation_invariance(table: torch.Tensor, max_offset: int = 20) -> float:
    """Mean over k = 1..max_offset of the diagonal's coefficient of variation: 0 when phi depends only on k."""
    return float(_translation_cv(table, max_offset).mean())


def _monotonicity(table: torch.Tensor, max_offset: int = 20) -> float:
    """Fraction of pairs (x, k), k = 1..max_offset, with phi(x, x + k) > phi(x, x + k + 1): 1 = nearer is closer."""
    table = _check_table(table, min_rows=3)
    _check_max_offset_fits(max_offset, table.shape[0], extra=1)
    values = _diagonal_values(dot_product_matrix(table), max_offset + 1)  # (positions, K + 2)
    nearer, farther = values[:, 1:-1], values[:, 2:]  # (positions, K) each: offsets k and k + 1
    inside = ~farther.isnan()  # x + k + 1 inside the table (then x + k is too)
    return float((nearer > farther)[inside].double().mean())


# Ridge penalties tried by RidgeCV (efficient leave-one-out inside each training fold): plain least squares with
# as many features as training rows is ill-conditioned and can predict far outside the positions.
ALPHAS = np.logspace(-6, 3, 19)


def absolute_position_predictions(table: torch.Tensor, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Each row's position as predicted by a ridge regression (RidgeCV) fitted on the other folds; (positions,).

    Taught in learned positions, "Published probes, reproduced"."""
    folds, seed = validation.integer("folds", folds, minimum=2), validation.integer("seed", seed, minimum=0)
    table = _check_table(table, min_rows=folds)
    positions = np.arange(table.shape[0], dtype=np.float64)  # the regression target: each row's index
    split = KFold(n_splits=folds, shuffle=True, random_state=seed)  # rows shuffled, then cut into folds
    with threadpool_limits(limits=1, user_api="blas"):  # small problems: threads only fight on busy machines
        return cross_val_predict(RidgeCV(alphas=ALPHAS), table.numpy(), positions, cv=split)


def absolute_position_probe(table: torch.Tensor, folds: int = 5, seed: int = 0) -> float:
    """Wang & Chen 2020: mean absolute error, in positions, of a cross-validated linear read-out row -> index.

    Taught in learned positions, "Published probes, reproduced"."""
    predicted = absolute_position_predictions(table, folds, seed)  # (positions,)
    return float(np.abs(predicted - np.arange(len(predicted))).mean())


def constant_position_mae(num_positions: int, folds: int = 5, seed: int = 0) -> float:
    """The probe's baseline: MAE of always predicting the training folds' median position (about n / 4).

    Taught in learned positions, "Published probes, reproduced"."""
    if isinstance(num_positions, torch.Tensor) and num_positions.dim() > 0:
        raise TypeError(f"num_positions must be a number of positions, got a tensor of shape "
                        f"{tuple(num_positions.shape)}: pass table.shape[0].")
    folds, seed = validation.integer("folds", folds, minimum=2), validation.integer("seed", seed, minimum=0)
    num_positions = validation.integer("num_positions", num_positions, minimum=folds,
                                       hint=f" (at least one position per fold, folds={folds})")
    validation.check_allocation("constant_position_mae", (num_positions, 4), 8)  # target, predictions, folds
    target = np.arange(num_positions, dtype=np.float64)
    split = KFold(n_splits=folds, shuffle=True, random_state=seed)
    dummy = DummyRegressor(strategy="median")
    predicted = cross_val_predict(dummy, target[:, None], target, cv=split)
    return float(np.abs(predicted - target).mean())


def relative_order_probe(table: torch.Tensor, folds: int = 5, seed: int = 0,
                         pairs: int = 2000) -> float:
    """Wang & Chen 2020: accuracy of a logistic regression on [PE_i; PE_j] predicting j > i (chance 0.5).

    The rows are split into folds first, and test pairs use only held-out rows, so the classifier cannot
    memorise a score per row. Taught in learned positions, "Published probes, reproduced"."""
    folds, seed = validation.integer("folds", folds, minimum=2), validation.integer("seed", seed, minimum=0)
    pairs = validation.integer("pairs", pairs, minimum=100, hint=" (enough pairs of both orders to fit)")
    rows = _check_table(table, min_rows=2 * folds).numpy()  # (positions, hidden)
    validation.check_allocation("relative_order_probe's pairs", (pairs, 2 * rows.shape[1] + 4), 8 * 2)
    rng = np.random.default_rng(seed)
    correct = total = 0
    for train, test in KFold(n_splits=folds, shuffle=True, random_state=seed).split(rows):
        (x_fit, y_fit), (x_test, y_test) = (_pairs(rows, part, n, rng) for part, n in
                                            ((train, pairs), (test, max(pairs // folds, 1))))
        with threadpool_limits(limits=1, user_api="blas"):
            classifier = LogisticRegression(max_iter=2000).fit(x_fit, y_fit)
            correct += int((classifier.predict(x_test) == y_test).sum())
        total += len(y_test)
    return correct / total


def _pairs(rows: np.ndarray, indices: np.ndarray, count: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """`count` random pairs (i, j), i != j, from `indices`: features [row i; row j], label j > i."""
    i, j = rng.choice(indices, count), rng.choice(indices, count)
    keep = i != j
    i, j = i[keep], j[keep]
    return np.concatenate([rows[i], rows[j]], axis=1), (j > i).astype(int)


def extrapolation_mae(table: torch.Tensor, fit_rows: int) -> dict[str, float]:
    """Fit the ridge read-out on rows 0..fit_rows-1, predict the rest: its MAE and the constant guess's.

    Taught in learned positions, "Published probes, reproduced"."""
    rows = _check_table(table).numpy()
    fit_rows = validation.integer("fit_rows", fit_rows)
    if not 2 <= fit_rows < len(rows):
        raise ValueError(f"fit_rows must leave rows on both sides, got {fit_rows} of {len(rows)}.")
    target = np.arange(len(rows), dtype=np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        fitted = RidgeCV(alphas=ALPHAS).fit(rows[:fit_rows], target[:fit_rows])
    unseen = target[fit_rows:]
    guess = np.median(target[:fit_rows])  # the constant predictor, fitted on the same rows
    return {"mae": float(np.abs(fitted.predict(rows[fit_rows:]) - unseen).mean()),
            "constant": float(np.abs(guess - unseen).mean())}


def order_properties(table: torch.Tensor, max_offset: int = 20) -> dict[str, float]:
    """Wang et al. 2021's translation invariance (coefficient of variation) and local monotonicity of phi.

    Taught in learned positions, "Published probes, reproduced"."""
    return {"translation_cv": _translation_invariance(table, max_offset),
            "monotonicity": _monotonicity(table, max_offset)}


def rotation_period(coords) -> float:
    """Positions per full turn of a 2-D path around the origin, from the slope of its unwrapped angle.

    Taught in learned positions, "Pictures of the rows"."""
    coords = validation.numbers_tensor("coords", coords, "2-D points (positions, 2)").detach().cpu().double().numpy()
    if coords.ndim != 2 or coords.shape[1] != 2 or coords.shape[0] < 3:
        raise ValueError(f"coords must have shape (positions, 2) with at least 3 rows, got {coords.shape}.")
    angle = np.unwrap(np.arctan2(coords[:, 1], coords[:, 0]))  # (positions,), radians, without 2*pi jumps
    slope = np.polyfit(np.arange(len(angle)), angle, deg=1)[0]  # radians per position
    if not np.isfinite(slope) or abs(slope) < 1e-12:
        raise ValueError("the path does not turn around the origin, so it has no rotation period.")
    return float(2 * np.pi / abs(slope))


def band_statistics(table: torch.Tensor, edges: tuple[int, ...] = (128, 256)) -> list[dict]:
    """Per band of positions [a, b): rows, median row norm, mean cosine of neighbours (x, x + 1) inside the band.

    Taught in learned positions, "Training length leaves a mark"."""
    table = _check_table(table)
    positions = table.shape[0]
    if not isinstance(edges, (tuple, list)):
        raise TypeError(f"edges must be a tuple of positions where bands start, e.g. (128, 256); got "
                        f"{type(edges).__name__} {edges!r}.")
    edges = tuple(validation.integer("each of edges", edge, hint=" (a position)") for edge in edges)
    bounds = [0, *[e for e in edges if 0 < e < positions], positions]
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
