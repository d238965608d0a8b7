"""The band and curve measures of a position table, and the paired statistics over seeds (pre-train a tiny BERT).

Taught in "Pre-train a tiny BERT" (book/pretrain_positions.ipynb), sections "Two measures" and "The claim rule".
Rows are first stripped of their component along the all-ones vector (BERT's embedding LayerNorm removes it, so
it never matters), then centred on the mean row (the mean row cannot be told apart from the token-type row).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch
from scipy import linalg as scipy_linalg
from scipy import stats
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from helpers import validation
from helpers.position_stats import holm as adjusted_holm
from helpers.positions import _check_table, cosine_similarity_matrix, diagonal_profile, order_properties

__all__ = ["table_structure", "structure_null", "band_only_null", "rescaled", "seed_values", "paired_test", "holm"]

DCT_TERMS = 4  # the curve measure's smooth shapes: the first 4 non-constant DCT-II cosines of the row index


def dct_share(centred: np.ndarray, terms: int = DCT_TERMS) -> float:
    """Share of the rows' centred variance that the first `terms` cosines cos(pi j (i + 1/2) / n) explain ("Two
    measures"); about terms / n for rows in no order."""
    n = centred.shape[0]
    index = (np.arange(n) + 0.5)[:, None] * np.arange(1, terms + 1)[None, :]  # (n, terms)
    basis = np.sqrt(2 / n) * np.cos(np.pi * index / n)  # orthonormal columns, the DCT-II's rows j = 1..terms
    return float((basis.T @ centred).__pow__(2).sum() / (centred**2).sum())


def table_structure(rows: torch.Tensor) -> dict[str, object]:
    """Band and curve measures of rows in position order: centred b(k), contrast, length, DCT and PCA shares."""
    rows = _check_table(rows, min_rows=12, name="rows")  # (n, hidden), float64
    n = rows.shape[0]
    flat = rows - rows.mean(dim=1, keepdim=True)  # without the all-ones component LayerNorm deletes
    centred = flat - flat.mean(dim=0)  # without the mean row
    profile = diagonal_profile(cosine_similarity_matrix(centred), n // 2)  # (n // 2 + 1,): k = 0..n // 2
    near, far = profile[1:4].mean(), profile[n // 4:].mean()
    half = next((k for k in range(1, n // 2 + 1) if profile[k] <= profile[1] / 2), n // 2)
    with threadpool_limits(limits=1, user_api="blas"):
        pca = PCA(n_components=3, svd_solver="full").fit(centred.numpy())
    pc1 = pca.transform(centred.numpy())[:, 0]
    raw = cosine_similarity_matrix(rows)
    return {"profile": [round(float(v), 5) for v in profile], "neighbour": float(profile[1]),
            "contrast": float(near - far), "contrast1": float(profile[1] - far), "half_length": int(half),
            "dct": dct_share(centred.numpy()),
            "pca3": float(pca.explained_variance_ratio_.sum()),
            "pc1_rho": float(abs(stats.spearmanr(pc1, np.arange(n)).statistic)),
            "raw_neighbour": float(torch.diagonal(raw, 1).mean()),
            **order_properties(rows, max_offset=n // 4)}


@functools.cache
def structure_null(rows: int, hidden: int, std: float = 0.02, draws: int = 200) -> dict[str, tuple[float, ...]]:
    """Mean, 95th percentile and sd of every scalar table_structure measure over N(0, std^2) tables of this shape."""
    rows, hidden = validation.integer("rows", rows, minimum=12), validation.integer("hidden", hidden, minimum=3)
    draws = validation.integer("draws", draws, minimum=2)
    validation.check_allocation("structure_null", (rows, hidden), 8 * 4)
    generator = torch.Generator().manual_seed(0)
    drawn = [table_structure(std * torch.randn(rows, hidden, generator=generator, dtype=torch.float64))
             for _ in range(draws)]
    return {k: (float(np.mean(v)), float(np.quantile(v, 0.95)), float(np.std(v, ddof=1)))
            for k in drawn[0] if k != "profile" for v in [[d[k] for d in drawn]]}


def band_only_null(lags, rows: int, hidden: int, std: float = 0.02, draws: int = 200) -> dict[str, tuple[float, ...]]:
    """structure_null's triples over random tables whose rows correlate with their neighbours by `lags` (lag 1, 2,
    ...) and not at all further apart: the measures that a short-range band alone produces ("The claim rule")."""
    rows, hidden = validation.integer("rows", rows, minimum=12), validation.integer("hidden", hidden, minimum=3)
    lags = np.asarray(lags, dtype=float)
    if lags.ndim != 1 or not 0 < len(lags) < rows or np.abs(lags).max() >= 1:
        raise ValueError(f"lags must be 1 to rows - 1 correlations in (-1, 1), got {lags!r}.")
    validation.check_allocation("band_only_null", (rows, hidden), 8 * 4)
    weights, vectors = np.linalg.eigh(scipy_linalg.toeplitz(np.r_[1.0, lags, np.zeros(rows - 1 - len(lags))]))
    root = torch.from_numpy(vectors * np.sqrt(np.clip(weights, 0, None)))  # root @ root.T: the nearest PSD matrix
    generator = torch.Generator().manual_seed(0)
    drawn = [table_structure(std * root @ torch.randn(rows, hidden, generator=generator, dtype=torch.float64))
             for _ in range(validation.integer("draws", draws, minimum=2))]
    return {k: (float(np.mean(v)), float(np.quantile(v, 0.95)), float(np.std(v, ddof=1)))
            for k in drawn[0] if k != "profile" for v in [[d[k] for d in drawn]]}


def rescaled(value, null: tuple[float, ...], share: bool = False):
    """A measure against its same-shape null (structure_null's triple): z = (value - mean) / sd, how many null spreads
    above a random table; with share=True the excess share (value - mean) / (1 - mean), 0 random, 1 all of it."""
    if len(null) != 3 or not null[2] > 0:
        raise ValueError(f"null must be structure_null's (mean, 95th percentile, sd) with sd > 0, got {null!r}.")
    value = np.asarray(value, dtype=float)
    return (value - null[0]) / ((1 - null[0]) if share else null[2])


def seed_values(results: dict, condition: str, measure: str, step: int) -> np.ndarray:
    """One measure at one step, one value per seed (seeds in numeric order)."""
    runs = results["runs"][condition]
    return np.array([next(r[measure] for r in runs[s] if r["step"] == step) for s in sorted(runs, key=int)])


def paired_test(first, second) -> dict[str, float | bool]:
    """first - second paired by seed: mean, 95 % t-interval, exact one-sided sign-flip p-value (first > second)."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape or first.ndim != 1 or not 2 <= len(first) <= 16:
        raise ValueError(f"first and second must be 1-D and paired, 2 to 16 seeds; got {first.shape} and "
                         f"{second.shape}.")
    gaps = first - second
    n, mean = len(gaps), float(gaps.mean())
    half = float(stats.t.ppf(0.975, n - 1) * gaps.std(ddof=1) / math.sqrt(n))
    flips = np.array(list(itertools.product((1, -1), repeat=n)))  # (2^n, n): every sign pattern
    p = float(((flips * gaps).mean(axis=1) >= mean - 1e-12).mean())
    return {"mean": mean, "low": mean - half, "high": mean + half, "p": p, "all_positive": bool((gaps > 0).all())}


def holm(pvalues: dict[str, float], alpha: float = 0.05) -> dict[str, bool]:
    """Holm's step-down rule: which hypotheses are rejected at family-wise level alpha (position_stats adjusts)."""
    return {name: adjusted <= alpha for name, adjusted in adjusted_holm(pvalues).items()}
