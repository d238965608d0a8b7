"""Tests for helpers.positions against torch, numpy, scikit-learn and closed forms."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.linear_model import RidgeCV
from sklearn.metrics.pairwise import cosine_similarity
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from helpers import (
    absolute_position_predictions,
    absolute_position_probe,
    band_statistics,
    check_embedding_inputs,
    constant_position_mae,
    cosine_similarity_matrix,
    diagonal_profile,
    extrapolation_mae,
    order_properties,
    relative_order_probe,
    rotation_period,
    sinusoidal_table,
)
from helpers.positions import (
    ALPHAS,
    _diagonal_values,
    _monotonicity,
    _translation_cv,
    _translation_invariance,
    dot_product_matrix,
)
from tests.unit.conftest import rounding_tolerance

matplotlib.use("Agg")

@pytest.fixture(autouse=True)
def one_blas_thread():
    """Small least-squares problems run faster on one thread, above all on a busy machine."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


SIZES = [(64, 32), (300, 512), (512, 384), (512, 768)]  # (positions, d_model): tiny, the source's, MiniLM, base


def position_rows(model) -> torch.Tensor:
    return model.embeddings.position_embeddings.weight.detach()  # (positions, hidden)


def random_rows(positions: int, hidden: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(positions, hidden, generator=torch.Generator().manual_seed(seed))


def sinusoid_offset_dot(max_offset: int, d_model: int) -> torch.Tensor:
    """Closed form (Vaswani et al. 2017, 3.5): <PE_x, PE_{x+k}> = sum_i cos(k * w_i), for k = 0..max_offset."""
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(torch.arange(max_offset + 1, dtype=torch.float64)[:, None] * omega).sum(dim=1)


# --- similarity matrices -------------------------------------------------------------------------------------


def test_cosine_similarity_matches_sklearn_and_torch(any_bert):
    rows = position_rows(any_bert)
    ours = cosine_similarity_matrix(rows)
    # float64 cosines (<= 1) summing `hidden` products, by two routes -> rounding_tolerance(float64, hidden), ~1e-13
    tolerance = rounding_tolerance(torch.float64, terms=rows.shape[1])
    torch.testing.assert_close(ours, torch.from_numpy(cosine_similarity(rows.double().numpy())), rtol=0,
                               atol=tolerance)
    some = rows.double()[::max(1, len(rows) // 16)]  # (about 16, hidden): keeps the broadcast small
    pairwise = F.cosine_similarity(some[:, None, :], rows.double()[None, :, :], dim=-1)  # (about 16, positions)
    torch.testing.assert_close(ours[::max(1, len(rows) // 16)], pairwise, rtol=0, atol=tolerance)


def test_dot_product_matrix_matches_elementwise_sum(tiny_bert):
    rows = position_rows(tiny_bert).double()
    expected = (rows[:, None, :] * rows[None, :, :]).sum(dim=-1)
    # float64, matmul vs elementwise sum of `hidden` products of size <= max|x|^2
    tolerance = rounding_tolerance(torch.float64, terms=rows.shape[1], scale=float(rows.abs().max()) ** 2)
    torch.testing.assert_close(dot_product_matrix(rows), expected, rtol=0, atol=tolerance)


def test_diagonal_values_match_torch_diagonal():
    matrix = torch.arange(49.0).reshape(7, 7)
    values = _diagonal_values(matrix, 4)
    assert values.shape == (7, 5)
    for k in range(5):
        assert torch.equal(values[: 7 - k, k], torch.diagonal(matrix, k).double())  # exact: copied integers
        assert values[7 - k:, k].isnan().all()


def test_diagonal_profile_matches_band_means():
    matrix = torch.randn(40, 40, generator=torch.Generator().manual_seed(1)).double()
    profile = diagonal_profile(matrix, 6, start=10, stop=30)
    band = matrix[10:30, 10:30]
    expected = torch.stack([torch.diagonal(band, k).mean() for k in range(7)])
    # float64 means of <= 20 values of size < 5 -> rounding_tolerance(float64, 20, 5) = 5e-14
    torch.testing.assert_close(profile, expected, rtol=0, atol=rounding_tolerance(torch.float64, terms=20, scale=5))


# --- translation invariance ----------------------------------------------------------------------------------


@pytest.mark.parametrize("positions, d_model", SIZES)
def test_sinusoid_diagonals_follow_closed_form(positions, d_model):
    sinusoid = sinusoidal_table(positions, d_model)
    profile = diagonal_profile(dot_product_matrix(sinusoid), 20)
    # float32 table (entries <= 1, off by eps32 / 2) against the float64 closed form: each dot product sums
    # d_model products -> rounding_tolerance(float32, d_model), 2.7e-5 (d 512) to 6.7e-6 (d 32)
    tolerance = rounding_tolerance(torch.float32, terms=d_model)
    torch.testing.assert_close(profile, sinusoid_offset_dot(20, d_model), rtol=0, atol=tolerance)
    # exact up to float32 rounding of the table, whose products are summed in float64: measured CVs are 2e-9 to 8e-9
    # for these sizes, so 1e-6 leaves a 100x margin for other CPUs' sin and matmul
    assert _translation_invariance(sinusoid) < 1e-6


def test_translation_cv_matches_numpy(any_bert):
    rows = position_rows(any_bert)
    gram = rows.double().numpy() @ rows.double().numpy().T
    expected = [np.std(np.diagonal(gram, k)) / abs(np.mean(np.diagonal(gram, k))) for k in range(1, 11)]
    # float64 grams by two routes differ by eps64 x sqrt(hidden) ~ 1e-14 of the entries; the CV divides the spread
    # by |mean| and may amplify that by up to 1e4 -> rel 1e-9
    np.testing.assert_allclose(_translation_cv(rows, 10).numpy(), expected, rtol=1e-9)
    assert _translation_invariance(rows, 10) == pytest.approx(np.mean(expected), rel=1e-9)


def test_translation_cv_is_large_for_random_rows():
    assert _translation_invariance(random_rows(256, 64)) > 1.0  # mean dot product near 0, spread not


# --- _monotonicity ----------------------------------------------------------------------------------------------


def brute_force_monotonicity(table: torch.Tensor, max_offset: int) -> float:
    phi = (table.double() @ table.double().T).tolist()
    hits = total = 0
    for x in range(len(phi)):
        for k in range(1, max_offset + 1):
            if x + k + 1 < len(phi):
                total += 1
                hits += phi[x][x + k] > phi[x][x + k + 1]
    return hits / total


@pytest.mark.parametrize("positions, d_model", SIZES)
def test_sinusoid_monotonicity_matches_closed_form(positions, d_model):
    f = sinusoid_offset_dot(21, d_model)  # phi depends on k only, so each k counts as a whole diagonal
    weights = torch.tensor([positions - k - 1 for k in range(1, 21)], dtype=torch.float64)
    decreasing = (f[1:21] > f[2:22]).double()
    expected = float((weights * decreasing).sum() / weights.sum())
    # a fraction of counts, both float64: equal up to the last division's rounding (a flipped comparison would move
    # it by 1 / pairs >= 1e-5) -> rel 1e-12
    assert _monotonicity(sinusoidal_table(positions, d_model)) == pytest.approx(expected, rel=1e-12)
    if d_model >= 384:
        assert expected == 1.0  # BERT-sized sinusoids fall at every step up to offset 21


def test_monotonicity_matches_brute_force(tiny_bert):
    rows = position_rows(tiny_bert)[:30]
    # the same float64 gram (the same matmul), counted two ways: equal up to the division's rounding -> rel 1e-12
    assert _monotonicity(rows, 5) == pytest.approx(brute_force_monotonicity(rows, 5), rel=1e-12)


def test_monotonicity_of_random_rows_is_a_coin_toss():
    assert 0.45 < _monotonicity(random_rows(512, 384)) < 0.55


# --- absolute-position probe ----------------------------------------------------------------------------------


def manual_cv_mae(table: torch.Tensor, seed: int = 0) -> float:
    """The probe written out: fit and predict fold by fold, weight each fold's MAE by its size."""
    rows, target = table.double().numpy(), np.arange(len(table), dtype=float)
    total = 0.0
    for train, test in KFold(n_splits=5, shuffle=True, random_state=seed).split(rows):
        fitted = RidgeCV(alphas=ALPHAS).fit(rows[train], target[train])
        total += np.abs(fitted.predict(rows[test]) - target[test]).sum()
    return total / len(rows)


@pytest.mark.parametrize("positions, d_model", SIZES)
def test_probe_is_near_zero_on_a_sinusoid(positions, d_model):
    assert absolute_position_probe(sinusoidal_table(positions, d_model)) < 0.01


@pytest.mark.parametrize("positions, hidden", [(64, 32), (512, 384)])
def test_probe_is_large_on_random_rows(positions, hidden):
    chance = positions / 4  # the mean absolute error of always guessing the middle position
    assert absolute_position_probe(random_rows(positions, hidden)) > 0.5 * chance


def test_probe_matches_fold_by_fold_regression(any_bert):
    rows = position_rows(any_bert)
    # float64 ridge on the same folds: the fits agree to eps64 x cond (below 1e9 with the penalty) -> rel 1e-6
    assert absolute_position_probe(rows, seed=3) == pytest.approx(manual_cv_mae(rows, seed=3), rel=1e-6)


def test_probe_predictions_are_out_of_fold():
    rows = random_rows(100, 120)  # more features than rows: in-sample fit would be perfect
    predictions = absolute_position_predictions(rows)
    assert predictions.shape == (100,)
    assert np.abs(predictions - np.arange(100)).mean() > 5


@pytest.mark.parametrize("positions", [64, 512])
def test_constant_baseline_matches_fold_medians(positions):
    target, total = np.arange(positions, dtype=float), 0.0
    for train, test in KFold(n_splits=5, shuffle=True, random_state=1).split(target):
        total += np.abs(np.median(target[train]) - target[test]).sum()
    assert constant_position_mae(positions, seed=1) == pytest.approx(total / positions, rel=1e-12)
    assert constant_position_mae(positions) == pytest.approx(positions / 4, rel=0.05)  # |x - n/2| averages n/4


def test_untrained_rows_score_like_the_constant_guess():
    # the ridge penalty keeps noise features from predicting far outside the positions (plain least squares
    # with 384 features on ~410 rows did, and scored worse than the constant guess)
    mae = absolute_position_probe(random_rows(512, 384) * 0.02)
    assert mae == pytest.approx(constant_position_mae(512), rel=0.1)


def test_relative_order_probe_sinusoid_random_and_learned(packaged):
    learned = position_rows(packaged[0])
    rows, hidden = learned.shape
    sinusoid = relative_order_probe(sinusoidal_table(rows, hidden))
    chance = relative_order_probe(random_rows(rows, hidden))  # held-out rows: nothing to memorise
    assert sinusoid > 0.9 and abs(chance - 0.5) < 0.1
    assert chance < relative_order_probe(learned) <= 1.0


def test_relative_order_probe_on_a_monotone_feature():
    table = torch.arange(100, dtype=torch.float64)[:, None].repeat(1, 3)  # every column is the position
    assert relative_order_probe(table, pairs=500) > 0.95  # j > i iff x_j - x_i > 0: linearly separable


def test_extrapolation_of_a_linear_table_and_the_constant_guess():
    positions = torch.arange(64, dtype=torch.float64)
    table = torch.stack([positions, torch.ones(64)], dim=1)  # the index is a linear function of the row
    result = extrapolation_mae(table, fit_rows=32)
    assert result["mae"] < 1e-2  # ridge with the smallest penalty extrapolates a linear map
    assert result["constant"] == pytest.approx(np.abs(15.5 - np.arange(32, 64)).mean())  # median of 0..31


def test_order_properties_are_its_parts(tiny_bert):
    rows = position_rows(tiny_bert)
    # exact: the same calls on the same rows, in the same order
    assert order_properties(rows, 5) == {"translation_cv": _translation_invariance(rows, 5),
                                         "monotonicity": _monotonicity(rows, 5)}


def probes(table: torch.Tensor) -> dict[str, float]:
    return {"absolute_probe_mae": absolute_position_probe(table), **order_properties(table)}


def test_learned_rows_sit_between_sinusoid_and_random(packaged):
    learned = probes(position_rows(packaged[0]))
    rows, hidden = position_rows(packaged[0]).shape
    sinusoid = probes(sinusoidal_table(rows, hidden))
    untrained = probes(random_rows(rows, hidden) * packaged[0].config.initializer_range)
    assert sinusoid["absolute_probe_mae"] < learned["absolute_probe_mae"] < untrained["absolute_probe_mae"]
    assert sinusoid["translation_cv"] < learned["translation_cv"] < untrained["translation_cv"]
    assert untrained["monotonicity"] < learned["monotonicity"] < sinusoid["monotonicity"]


# --- bands, rotation, table ---------------------------------------------------------------------------------------


def test_band_statistics_match_torch(any_bert):
    rows = position_rows(any_bert)
    positions = len(rows)
    bands = band_statistics(rows, (16, 40))
    bounds = [(0, 16), (16, 40), (40, positions)]
    assert [b["band"] for b in bands] == [f"{a}..{b - 1}" for a, b in bounds]
    for stats, (a, b) in zip(bands, bounds, strict=True):
        block = rows[a:b].double()
        assert stats["rows"] == b - a
        # float64 norms and cosines summing `hidden` terms: relative to the norm, and absolute for cosines (a mean
        # cosine near 0 has no relative precision) -> rounding_tolerance(float64, hidden), ~1e-13
        tolerance = rounding_tolerance(torch.float64, terms=rows.shape[1])
        assert stats["median_norm"] == pytest.approx(float(torch.linalg.norm(block, dim=1).median()), rel=tolerance)
        cos = F.cosine_similarity(block[:-1], block[1:], dim=1).mean()
        assert stats["neighbour_cosine"] == pytest.approx(float(cos), rel=0, abs=tolerance)


def test_band_statistics_of_untrained_rows_show_no_order(bert_base_random):
    for band in band_statistics(position_rows(bert_base_random)):
        assert abs(band["neighbour_cosine"]) < 0.05


@pytest.mark.parametrize("period", [5.7, 11.0, 40.0])
def test_rotation_period_of_a_sine_cosine_pair(period):
    angle = 2 * math.pi * np.arange(200) / period
    # float64: a least-squares slope over 200 angles up to 220 rad, each off by a few ulps -> rel 1e-9
    assert rotation_period(np.stack([np.cos(angle), np.sin(angle)], axis=1)) == pytest.approx(period, rel=1e-9)
    assert rotation_period(torch.tensor(np.stack([np.sin(angle), np.cos(angle)], axis=1))) == pytest.approx(
        period, rel=1e-9)


# --- bad input -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", [cosine_similarity_matrix, dot_product_matrix, _translation_invariance,
                                      _monotonicity, absolute_position_probe, order_properties, band_statistics])
def test_bad_tables_get_clear_errors(function):
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        function(np.zeros((10, 4)))
    with pytest.raises(ValueError, match=r"must be 2-D \(positions, hidden\)"):
        function(torch.zeros(10))
    with pytest.raises(TypeError, match="floating-point"):
        function(torch.zeros(10, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN or infinite"):
        function(torch.full((10, 4), float("nan")))
    with pytest.raises(ValueError, match="needs at least"):
        function(torch.zeros(1, 4))


def test_bad_offsets_and_folds_get_clear_errors():
    rows = random_rows(10, 4)
    with pytest.raises(ValueError, match="max_offset must be a positive integer, got 0"):
        _translation_invariance(rows, 0)
    with pytest.raises(TypeError, match="max_offset must be a positive integer, got float 1.5"):
        _translation_invariance(rows, 1.5)
    with pytest.raises(ValueError, match="too large for a table of 10 rows"):
        _monotonicity(rows, 9)  # needs offset 10
    with pytest.raises(ValueError, match="too large"):
        order_properties(rows, max_offset=20)
    with pytest.raises(ValueError, match="folds must be an integer >= 2, got 1"):
        absolute_position_predictions(rows, folds=1)
    with pytest.raises(ValueError, match="fit_rows must leave rows on both sides"):
        extrapolation_mae(rows, fit_rows=len(rows))
    with pytest.raises(ValueError, match="square 2-D tensor"):
        _diagonal_values(torch.zeros(3, 4), 1)
    with pytest.raises(ValueError, match="need 0 <= start < stop"):
        diagonal_profile(torch.zeros(5, 5), 1, start=4, stop=2)
    with pytest.raises(ValueError, match="edges must increase strictly"):
        band_statistics(rows, (6, 3))
    with pytest.raises(ValueError, match=r"shape \(positions, 2\)"):
        rotation_period(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="does not turn"):
        rotation_period(np.tile([[1.0, 0.0]], (10, 1)))


# --- the limits the chapter shows: raw errors of transformers, clear errors of the helper -------------------------


@pytest.mark.parametrize("name", ["packaged", "tiny_bert"])
def test_past_the_end_raw_errors_and_clear_errors(name, request):
    model = request.getfixturevalue("packaged")[0] if name == "packaged" else request.getfixturevalue(name)
    rows = model.config.max_position_embeddings
    ids = torch.tensor([[2, 5, 7, 3]])
    past_end = torch.arange(rows, rows + 4)[None, :]
    with pytest.raises(IndexError, match="index out of range"):
        model(input_ids=ids, token_type_ids=torch.zeros_like(ids), position_ids=past_end)
    with pytest.raises(RuntimeError, match="out of bounds"):  # the token-type buffer is gathered at the ids first
        model(input_ids=ids, position_ids=past_end)
    long_ids = torch.full((1, rows + 2), 5)
    with pytest.raises(RuntimeError, match="must match"):
        model(input_ids=long_ids)
    with pytest.raises(RuntimeError, match="must match"):
        model(input_ids=long_ids, token_type_ids=torch.zeros_like(long_ids))
    with pytest.raises(ValueError, match=f"position_ids holds {rows}, outside the position table of {rows} rows"):
        check_embedding_inputs(model.embeddings, ids, position_ids=past_end)
    with pytest.raises(ValueError, match=f"has {rows + 2} tokens but the position table has {rows} rows"):
        check_embedding_inputs(model.embeddings, long_ids)

