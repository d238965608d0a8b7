"""helpers.sinusoids against transformers' sinusoidal tables (XLM, DistilBERT, Marian, FSMT) and closed forms."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import scipy.linalg
import torch
from transformers import DistilBertConfig, DistilBertModel
from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings as distilbert_sinusoids
from transformers.models.fsmt.modeling_fsmt import SinusoidalPositionalEmbedding as FSMTSinusoids
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings as xlm_sinusoids

from helpers import (
    clock_hands,
    halves_permutation,
    offset_dot_product,
    offset_residual,
    rotary_scores,
    rotation_matrix,
    score_heatmaps,
    sinusoidal_table,
    to_halves_layout,
    wavelengths,
)
from helpers.sinusoids import _inverse_frequencies
from tests.unit.conftest import EPS32, rounding_tolerance

SIZES = [(300, 512), (64, 32), (17, 2), (129, 384)]


def generate_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """Seed 003's generator, under its name there (float32 div_term formula), as the chapter shows it."""
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@pytest.mark.parametrize(("positions", "d_model"), SIZES)
def test_equals_xlm_and_distilbert(positions, d_model):
    expected_xlm = xlm_sinusoids(positions, d_model, out=torch.empty(positions, d_model))
    expected_distilbert = distilbert_sinusoids(positions, d_model, torch.empty(positions, d_model))
    table = sinusoidal_table(positions, d_model)
    assert table.dtype == torch.float32 and table.shape == (positions, d_model)
    # Two float64 routes (numpy's pos / 10000^x and np.sin; torch's pos * 10000^-x and torch.sin), each rounded to
    # float32: at most one float32 ulp apart, and an ulp of |x| <= 1 is <= eps32 -> atol eps32 (1.2e-7).
    torch.testing.assert_close(table, expected_xlm, rtol=0, atol=EPS32)
    torch.testing.assert_close(table, expected_distilbert, rtol=0, atol=EPS32)


def test_equals_the_shape_of_every_bert_position_table(any_bert):
    rows, hidden = any_bert.embeddings.position_embeddings.weight.shape
    expected = xlm_sinusoids(rows, hidden, out=torch.empty(rows, hidden))
    torch.testing.assert_close(sinusoidal_table(rows, hidden), expected, rtol=0, atol=EPS32)  # one ulp: see above


def test_equals_a_distilbert_model_built_with_sinusoids():
    config = DistilBertConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, hidden_dim=16, max_position_embeddings=40,
                              sinusoidal_pos_embds=True)
    torch.manual_seed(0)
    weight = DistilBertModel(config).embeddings.position_embeddings.weight.detach()
    torch.testing.assert_close(weight, sinusoidal_table(40, 32), rtol=0, atol=EPS32)  # numpy vs torch route: one ulp


def test_source_notebook_generator_agrees_up_to_float32_rounding():
    # float32 angles pos * div_term up to 299 carry ~2 ulps of 299: 2 x 299 x eps32 = 7e-5 -> atol 1e-4
    torch.testing.assert_close(sinusoidal_table(300, 512), generate_positional_encoding(300, 512), rtol=0, atol=1e-4)


def test_closed_form_entries_with_another_base():
    table = sinusoidal_table(40, 12, base=100.0)
    for pos, i in [(0, 0), (3, 1), (17, 4), (39, 5)]:
        angle = pos / 100.0 ** (2 * i / 12)
        # float32 entry vs float64 closed form: half a float32 ulp of |x| <= 1 is <= eps32 / 2 -> abs eps32
        assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=EPS32)
        assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=EPS32)


@pytest.mark.parametrize(("positions", "d_model"), SIZES)
def test_marian_create_weight_is_the_halves_layout(positions, d_model):
    marian = MarianSinusoidalPositionalEmbedding(positions, d_model).create_weight()
    # numpy's float64 route vs torch's, both rounded to float32: one ulp of |x| <= 1 -> atol eps32
    torch.testing.assert_close(marian, to_halves_layout(sinusoidal_table(positions, d_model)), rtol=0, atol=EPS32)
    if d_model > 2:  # the two layouts put other columns side by side: entries differ by O(1), not by rounding
        assert not torch.allclose(marian, sinusoidal_table(positions, d_model), rtol=0, atol=0.1)


def test_fresh_marian_module_holds_random_weights_not_sinusoids():
    torch.manual_seed(0)
    fresh = MarianSinusoidalPositionalEmbedding(50, 16)
    # random initial values against sinusoids in [-1, 1]: they differ by O(1), far above any rounding
    assert not torch.allclose(fresh.weight, to_halves_layout(sinusoidal_table(50, 16)), rtol=0, atol=0.1)


@pytest.mark.parametrize("d_model", [2, 8, 384, 512])
def test_halves_permutation_is_numpy_r_(d_model):
    expected = torch.as_tensor(np.r_[0:d_model:2, 1:d_model:2])
    assert torch.equal(halves_permutation(d_model), expected)
    assert sorted(halves_permutation(d_model).tolist()) == list(range(d_model))


@pytest.mark.parametrize("d_model", [64, 512])
def test_fsmt_is_not_a_permutation_but_a_different_base(d_model):
    fsmt = FSMTSinusoids.get_embedding(100, d_model, None)
    table = sinusoidal_table(100, d_model)
    # A column permutation keeps each row's multiset of values; FSMT's rows have other values.
    # the same 1e-4 as FSMT's own agreement below (float32 rounding): a permutation would pass it, FSMT does not
    assert not torch.allclose(fsmt[1].sort().values, table[1].sort().values, rtol=0, atol=1e-4)
    # Its step ln(10000)/(d/2 - 1) is the paper's formula with base 10000^((d/2)/(d/2 - 1)).
    half = d_model // 2
    equivalent = to_halves_layout(sinusoidal_table(100, d_model, base=10000.0 ** (half / (half - 1))))
    # FSMT works in float32: angles up to 99 carry ~2 ulps of 99, 2 x 99 x eps32 = 2.4e-5 -> atol 1e-4
    torch.testing.assert_close(fsmt, equivalent, rtol=0, atol=1e-4)


@pytest.mark.parametrize("d_model", [2, 32, 512])
def test_inverse_frequencies_match_xlm_exponent_and_source_div_term(d_model):
    xlm_style = torch.tensor([1 / np.power(10000, 2 * (j // 2) / d_model) for j in range(0, d_model, 2)],
                             dtype=torch.float64)
    # both float64, elementwise: pow vs exp of a rounded exponent |ln w| <= ln(10000) = 9.2 differ by ~10 ulps of w
    # -> rtol 1e-13 (about 450 ulps; the default 1e-7 would hide any float32 step)
    torch.testing.assert_close(_inverse_frequencies(d_model), xlm_style, rtol=1e-13, atol=0)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    torch.testing.assert_close(_inverse_frequencies(d_model), div_term, rtol=1e-13, atol=0)


@pytest.mark.parametrize(("d_model", "base"), [(512, 10000.0), (384, 10000.0), (16, 100.0)])
def test_wavelengths_geometric_from_two_pi(d_model, base):
    wl = wavelengths(d_model, base)
    assert wl.shape == (d_model // 2,)
    # float64 closed forms, a pow and a division each: a few ulps of |ln base| <= 9.2 -> rel 1e-12
    assert wl[0].item() == pytest.approx(2 * math.pi, rel=1e-12)
    assert wl[-1].item() == pytest.approx(2 * math.pi * base ** (1 - 2 / d_model), rel=1e-12)
    assert wl[-1].item() < 2 * math.pi * base
    ratio = wl[1:] / wl[:-1]
    torch.testing.assert_close(ratio, torch.full_like(ratio, base ** (2 / d_model)), rtol=1e-12, atol=0)  # as above


def test_values_bounded_and_pairs_on_unit_circle():
    table = xlm_sinusoids(300, 512, out=torch.empty(300, 512))  # reference table; helper equality tested above
    assert table.abs().max() <= 1
    # float32: two squares of entries each off by eps32 / 2, and one addition -> at most ~2 eps32 -> 1.7e-6
    torch.testing.assert_close(table[:, 0::2] ** 2 + table[:, 1::2] ** 2, torch.ones(300, 256), rtol=0,
                               atol=rounding_tolerance(torch.float32, terms=2))


@pytest.mark.parametrize(("d_model", "offsets"), [(512, [0, 1, 5, 77, 250]), (32, [0, 3, 40])])
def test_offset_dot_product_is_every_diagonal_of_the_gram_matrix(d_model, offsets):
    table = torch.from_numpy(np.stack([
        np.concatenate([[f(p * 10000 ** (-2 * i / d_model)) for f in (math.sin, math.cos)]
                        for i in range(d_model // 2)]) for p in range(300)]))  # (300, d_model) float64, by hand
    gram = table @ table.T
    for k in offsets:
        diagonal = torch.diagonal(gram, offset=k)
        # float64: angles up to 299 carry ~299 x eps64 = 7e-14 each, summed over d_model terms -> atol 1e-9
        torch.testing.assert_close(diagonal, torch.full_like(diagonal, offset_dot_product(k, d_model)), rtol=0,
                                   atol=1e-9)


@pytest.mark.parametrize("k", [0, 1, 9, 100, -4])
def test_rotation_matrix_moves_every_row_by_k(k):
    table = xlm_sinusoids(300, 64, out=torch.empty(300, 64))
    rotation = rotation_matrix(k, 64)
    assert rotation.shape == (64, 64) and rotation.dtype == torch.float32
    start, stop = max(0, -k), 300 - max(0, k)
    # float32, |x| <= 1: each output sums 2 non-zero products (2x2 blocks; the zeros add exactly) and the
    # expected row is itself rounded: 3 roundings -> rounding_tolerance(float32, 3) = 2e-6
    tolerance = rounding_tolerance(torch.float32, terms=3)
    torch.testing.assert_close(table[start:stop] @ rotation.T, table[start + k:stop + k], rtol=0, atol=tolerance)
    # cos^2 + sin^2 of float32-rounded entries: ~3 eps32 = 3.6e-7 -> atol 1e-6
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(64), rtol=0, atol=1e-6)


def test_rotation_matrix_blocks_and_composition():
    first = rotation_matrix(3, 8, dtype=torch.float64)
    w = 10000 ** (-2 * 1 / 8)  # pair 1
    expected_block = torch.tensor([[math.cos(3 * w), math.sin(3 * w)], [-math.sin(3 * w), math.cos(3 * w)]],
                                  dtype=torch.float64)
    # float64, entries <= 1: cos and sin of angles <= 8 computed by different routes (torch, math) and 2-term
    # products differ by a few ulps, ~1e-15 -> atol 1e-12
    torch.testing.assert_close(first[2:4, 2:4], expected_block, rtol=0, atol=1e-12)
    assert first[0:2, 2:].abs().max() == 0 and first[2:4, :2].abs().max() == 0  # block_diag's zeros are exact
    torch.testing.assert_close(first @ rotation_matrix(5, 8, dtype=torch.float64),
                               rotation_matrix(8, 8, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(rotation_matrix(-3, 8, dtype=torch.float64), first.T, rtol=0, atol=1e-12)


def test_longer_table_extends_shorter_one():
    # exact: each entry is the same elementwise pow, product and sin on the same float64 values
    assert torch.equal(sinusoidal_table(1000, 64)[:300], sinusoidal_table(300, 64))


@pytest.mark.parametrize(("d_model", "error"), [(0, ValueError), (-2, ValueError), (3, ValueError),
                                                (385, ValueError), (2.0, TypeError), (True, TypeError),
                                                ("512", TypeError)])
def test_bad_width(d_model, error):
    with pytest.raises(error, match="d_model must be a positive even integer, got .*a \\(sin, cos\\) pair"):
        sinusoidal_table(10, d_model)
    with pytest.raises(error, match="d_model must be a positive even integer"):
        wavelengths(d_model)


@pytest.mark.parametrize(("positions", "error"), [(0, ValueError), (-1, ValueError), (2.5, TypeError),
                                                  (False, TypeError)])
def test_bad_length(positions, error):
    with pytest.raises(error, match="num_positions must be a positive integer, got"):
        sinusoidal_table(positions, 8)


@pytest.mark.parametrize("base", [0, 0.0, -10000.0, 1.0, 0.5, float("inf"), float("nan")])
def test_bad_base(base):
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        sinusoidal_table(10, 8, base=base)
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        rotation_matrix(1, 8, base=base)


@pytest.mark.parametrize("base", ["10000", None, True])
def test_base_of_wrong_type(base):
    with pytest.raises(TypeError, match="base must be a real number"):
        _inverse_frequencies(8, base=base)


@pytest.mark.parametrize("offset", [1.5, "3", None, True])
def test_bad_offset(offset):
    with pytest.raises(TypeError, match="offset must be an integer"):
        rotation_matrix(offset, 8)
    with pytest.raises(TypeError, match="offset must be an integer"):
        offset_dot_product(offset, 8)


def test_to_halves_layout_needs_a_2d_table():
    with pytest.raises(ValueError, match="table must be a 2-D tensor"):
        to_halves_layout(torch.zeros(8))
    with pytest.raises(ValueError, match="d_model must be a positive even integer"):
        to_halves_layout(torch.zeros(4, 5))


# --- rotary scores: the same rotations applied to queries and keys (RoPE) ---------------------------------------


def test_rotary_scores_depend_only_on_offset():
    torch.manual_seed(0)
    d, n = 16, 20
    q, k = torch.randn(d), torch.randn(d)
    perm = halves_permutation(d)  # Llama rotates dimension i with i + d/2: the halves layout
    scores = rotary_scores(q[perm], k[perm], n)
    # Llama rotates in float32: angles m * w up to n carry ~n ulps, each rotated vector ~n eps32 of its size, and the
    # score sums d products: ~(2n + d) float32 roundings of sum |q_i k_i| -> rounding_tolerance(float32, 2n + d)
    rotary = rounding_tolerance(torch.float32, terms=2 * n + d, scale=float(q.abs() @ k.abs()))
    for m in range(n):
        for p in range(n):
            reference = q.double() @ (rotation_matrix(m - p, d, dtype=torch.float64) @ k.double())
            torch.testing.assert_close(scores[m, p], reference, rtol=0, atol=rotary)
    for offset in range(-(n - 1), n):
        diagonal = torch.diagonal(scores, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=0, atol=rotary)
    # Both are float32 sums of d products: they may differ by d roundings of the largest partial sum.
    tolerance = d * torch.finfo(torch.float32).eps * float(q.abs() @ k.abs())
    torch.testing.assert_close(scores[0, 0], (q @ k).double(), rtol=0, atol=tolerance)


def test_rotary_scores_bad_input():
    with pytest.raises(ValueError, match="even length"):
        rotary_scores(torch.randn(5), torch.randn(5), 4)
    with pytest.raises(ValueError, match="even length"):
        rotary_scores(torch.randn(4), torch.randn(6), 4)


def test_offset_residual_against_toeplitz():
    torch.manual_seed(0)
    column, row = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    row[0] = column[0]
    toeplitz = torch.from_numpy(scipy.linalg.toeplitz(column.numpy(), row.numpy()))  # constant diagonals
    # float64: diagonal means of <= 7 equal values of size < 5 -> rounding_tolerance(float64, 7, 5) = 2.9e-14
    torch.testing.assert_close(offset_residual(toeplitz), torch.zeros(7, 7, dtype=torch.float64), rtol=0,
                               atol=rounding_tolerance(torch.float64, terms=7, scale=5))
    a, b = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    plaid = a[:, None] + b[None, :]  # depends on both positions, not only on the offset
    residual = offset_residual(toeplitz + plaid)
    for offset in range(-6, 7):  # every diagonal of the residual has mean 0 ...
        assert abs(float(torch.diagonal(residual, offset).mean())) < 1e-12  # float64, 7 terms < 10: ~1e-14
    for i, j in ((0, 0), (2, 5), (6, 1)):  # ... and equals the plaid minus its own diagonal mean
        diagonal = torch.diagonal(plaid, j - i)
        # float64, sums of <= 7 values of size < 10 -> rounding_tolerance(float64, 7, 10) = 5.8e-14
        torch.testing.assert_close(residual[i, j], plaid[i, j] - diagonal.mean(), rtol=0,
                                   atol=rounding_tolerance(torch.float64, terms=7, scale=10))
    with pytest.raises(ValueError, match="square 2-D tensor"):
        offset_residual(torch.zeros(3, 4))


def test_score_heatmaps_share_a_scale_per_row():
    figure = score_heatmaps({"score": {"a": torch.eye(4), "b": -2 * torch.eye(4)}, "residual": {"a": torch.ones(4, 4)}})
    images = [ax.images[0] for ax in figure.axes if ax.images]
    assert len(images) == 3
    assert images[0].get_clim() == images[1].get_clim() == (-2.0, 2.0)  # exact: max |x| of exact values
    own = score_heatmaps({"score": {"a": torch.eye(4), "b": -2 * torch.eye(4)}}, own_scale=("score",))
    assert [ax.images[0].get_clim() for ax in own.axes if ax.images] == [(-1.0, 1.0), (-2.0, 2.0)]
    plt.close("all")


def test_clock_hands_point_at_pos_times_w_i():
    fig = clock_hands(16, pairs=(0, 3), positions=(0, 1, 5))
    for ax, pair in zip(fig.axes, (0, 3), strict=True):
        hands = [text for text in ax.texts if text.get_text() == ""]  # arrows; labels carry the position
        w = 10000.0 ** (-2 * pair / 16)  # Vaswani et al. 3.5
        for hand, pos in zip(hands, (0, 1, 5), strict=True):
            # float64 cos and sin, stored by matplotlib as floats: exact to a few eps
            np.testing.assert_allclose(hand.xy, (math.cos(pos * w), math.sin(pos * w)), rtol=0, atol=1e-12)
    plt.close(fig)
    with pytest.raises(ValueError, match="at most 7 positions"):
        clock_hands(16, pairs=(0,), positions=tuple(range(8)))
