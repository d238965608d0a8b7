"""helpers.position_rows against independent references: numpy, scipy's statistics and scikit-learn fitted directly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import rankdata, zscore
from sklearn.linear_model import LinearRegression, RidgeCV
from transformers import BertConfig, BertModel

from helpers.position_rows import (
    most_extreme_z,
    one_column_extrapolation,
    row_standing,
    row_statistics,
    untrained_position_table,
)
from helpers.positions import ALPHAS, absolute_position_predictions, extrapolation_mae
from helpers.sinusoids import sinusoidal_table


def test_one_sinusoid_column_extrapolates_and_ridge_over_all_does_not():
    table = sinusoidal_table(512, 384)
    result = one_column_extrapolation(table, 256)
    assert result["column"] == 382  # the sine of the slowest pair
    rows = table.double().numpy()
    y = np.arange(512.0)
    slope, intercept = np.polyfit(rows[:256, 382], y[:256], 1)  # a line through one column, numpy's fit
    expected = np.abs(slope * rows[256:, 382] + intercept - y[256:]).mean()
    assert result["mae"] == pytest.approx(expected, rel=1e-6)
    assert result["mae"] < 1
    ridge = RidgeCV(alphas=ALPHAS).fit(rows[:256], y[:256])  # the read-out over all columns fails
    all_columns = extrapolation_mae(table, 256)
    assert all_columns["mae"] == pytest.approx(np.abs(ridge.predict(rows[256:]) - y[256:]).mean())
    assert all_columns["mae"] > 128 and all_columns["constant"] == pytest.approx(256.0)


def test_the_chosen_column_is_the_best_correlated_on_the_fitted_rows():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(40, 6))
    rows[:, 4] = np.arange(40) * 0.1 + rng.normal(scale=0.01, size=40)  # almost the index
    result = one_column_extrapolation(torch.from_numpy(rows), 20)
    r = [abs(np.corrcoef(rows[:20, j], np.arange(20))[0, 1]) for j in range(6)]
    assert result["column"] == int(np.argmax(r)) == 4
    line = LinearRegression().fit(rows[:20, [4]], np.arange(20.0))
    assert result["mae"] == pytest.approx(np.abs(line.predict(rows[20:, [4]]) - np.arange(20, 40)).mean())


def test_row_statistics_and_standing_match_numpy_and_scipy():
    table = untrained_position_table(60, 8, 0.02, seed=3)
    stats = row_statistics(table)
    rows = table.double().numpy()
    norms = np.linalg.norm(rows, axis=1)
    unit = rows / norms[:, None]
    pair = np.einsum("ij,ij->i", unit[:-1], unit[1:])
    np.testing.assert_allclose(stats["norm"], norms, rtol=1e-12)
    np.testing.assert_allclose(stats["neighbour cosine"][1:-1], (pair[:-1] + pair[1:]) / 2, rtol=1e-12)
    assert stats["neighbour cosine"][0] == pytest.approx(pair[0])
    residual = np.abs(absolute_position_predictions(table) - np.arange(60))
    np.testing.assert_allclose(stats["probe residual"], residual)
    standing = row_standing(stats, 7)
    assert standing["norm"]["z"] == pytest.approx(zscore(norms)[7])
    assert standing["norm"]["rank"] == int(rankdata(-norms, method="min")[7])
    assert standing["neighbour cosine"]["rank"] == int(rankdata(stats["neighbour cosine"], method="min")[7])
    extreme = most_extreme_z(stats)
    assert extreme["norm"] == pytest.approx(zscore(norms).max())
    assert extreme["neighbour cosine"] == pytest.approx(zscore(stats["neighbour cosine"]).min())


def test_untrained_table_is_bert_initialisation():
    """Same distribution as BertModel's own init: standard deviation initializer_range, mean 0."""
    table = untrained_position_table(512, 384, 0.02, seed=0)
    assert table.dtype == torch.float32 and table.shape == (512, 384)
    model = BertModel(BertConfig(hidden_size=384, num_hidden_layers=1, num_attention_heads=6,
                                 intermediate_size=32, vocab_size=10, initializer_range=0.02))
    reference = model.embeddings.position_embeddings.weight.detach()
    assert float(table.std()) == pytest.approx(float(reference.std()), rel=0.02)
    assert abs(float(table.mean())) < 1e-3


@pytest.mark.parametrize("bad", [{"std": 0.0}, {"std": -1.0}, {"num_positions": 0}])
def test_untrained_table_refuses_bad_sizes(bad):
    arguments = {"num_positions": 4, "hidden": 2, "std": 0.02, "seed": 0, **bad}
    with pytest.raises(ValueError):
        untrained_position_table(**arguments)


def test_one_column_extrapolation_refuses_too_few_rows():
    with pytest.raises(ValueError, match="fit_rows"):
        one_column_extrapolation(torch.ones(10, 3), 10)


def test_row_standing_refuses_a_row_past_the_table():
    stats = row_statistics(untrained_position_table(10, 4, 0.02, seed=0))
    with pytest.raises(ValueError, match="past the table"):
        row_standing(stats, 10)
    with pytest.raises(TypeError, match="row_statistics"):
        row_standing({"norm": np.ones(3)}, 0)
