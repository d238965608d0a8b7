"""helpers.layernorm against torch's LayerNorm and Dropout, and closed-form facts."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import (
    compare_on_device,
    dropout_scatter,
    dropout_statistics,
    embedding_parts,
    layer_norm_by_hand,
    layer_norm_steps,
    part_share_bars,
    part_shares,
    precision_error_plot,
    precision_tolerance,
)
from helpers.anatomy import EmbeddingParts
from tests.unit.conftest import EPS32, rounding_tolerance
from tests.unit.test_anatomy import random_inputs

# ------------------------------------------------------------------ layer_norm_by_hand


@torch.no_grad()
def test_layer_norm_by_hand_matches_torch(any_bert):
    embeddings = any_bert.embeddings
    ids, types = random_inputs(any_bert)
    summed = embedding_parts(embeddings, ids, types).summed
    norm = embeddings.LayerNorm
    ours = layer_norm_by_hand(summed, norm.weight, norm.bias, norm.eps)
    reference = norm(summed)
    # float32: the mean and variance sum `hidden` terms, and outputs reach max |y| -> rounding_tolerance(float32,
    # hidden, max |y|)
    atol = rounding_tolerance(torch.float32, terms=summed.shape[-1], scale=float(reference.abs().max()))
    torch.testing.assert_close(ours, reference, rtol=0, atol=atol)
    torch.testing.assert_close(ours, F.layer_norm(summed, norm.normalized_shape, norm.weight, norm.bias, norm.eps),
                               rtol=0, atol=atol)


def test_layer_norm_by_hand_without_affine_is_numpy_standardisation():
    x = torch.randn(3, 5, 17, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    values = x.numpy()
    expected = (values - values.mean(-1, keepdims=True)) / np.sqrt(values.var(-1, keepdims=True) + 1e-5)  # ddof=0
    # float64, 17-term sums of standardised values < 4 -> rounding_tolerance(float64, 17, 4) = 3.6e-14
    atol = rounding_tolerance(torch.float64, terms=17, scale=4)
    np.testing.assert_allclose(layer_norm_by_hand(x, eps=1e-5).numpy(), expected, rtol=1e-12, atol=atol)
    torch.testing.assert_close(layer_norm_by_hand(x, eps=0.25), F.layer_norm(x, (17,), eps=0.25), rtol=0, atol=atol)


def test_layer_norm_by_hand_in_float16_loses_eps():
    assert torch.tensor(1e-12, dtype=torch.float16) == 0  # below half the smallest subnormal, 2**-25
    assert torch.finfo(torch.float16).smallest_normal == 2.0**-14
    constant = torch.full((1, 8), 3.0, dtype=torch.float16)  # variance exactly 0
    assert torch.isnan(layer_norm_by_hand(constant, eps=1e-12)).all()  # 0 / sqrt(0 + 0)
    # exact by construction: the mean of equal values is that value, so x - mean is exactly 0
    assert torch.equal(layer_norm_by_hand(constant, eps=1e-3), torch.zeros_like(constant))
    assert torch.equal(F.layer_norm(constant, (8,), eps=1e-12), torch.zeros_like(constant))  # torch keeps eps


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(x=torch.ones(2, 3, dtype=torch.long)), TypeError, "floating-point"),
        (dict(x=torch.ones(2, 0)), ValueError, "at least one feature"),
        (dict(x=torch.ones(2, 3), eps=-1.0), ValueError, "eps must be"),
        (dict(x=torch.ones(2, 3), eps=float("nan")), ValueError, "eps must be"),
        (dict(x=torch.ones(2, 3), weight=torch.ones(4)), ValueError, r"weight has shape \(4,\) but x has 3"),
        (dict(x=torch.ones(2, 3), bias=torch.ones(3, 1)), ValueError, r"bias has shape \(3, 1\)"),
    ],
)
def test_layer_norm_by_hand_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        layer_norm_by_hand(**kwargs)


# ------------------------------------------------------------------ dropout_statistics


def test_dropout_statistics_closed_form():
    before = torch.tensor([1.0, -2.0, 3.0, 4.0, 0.0, 5.0])
    after = torch.tensor([0.0, -4.0, 0.0, 8.0, 0.0, 10.0])  # p = 0.5: survivors doubled; the zero stays zero
    stats = dropout_statistics(before, after, 0.5)
    assert (stats.elements, stats.dropped) == (5, 2)
    # float64 closed forms of exact counts: equal up to a rounding or two -> rel 1e-12
    assert stats.zero_fraction == pytest.approx(0.4, rel=1e-12)
    assert stats.expected_scale == 2.0  # exact: 1 / (1 - 0.5)
    assert stats.max_scale_error == 0.0  # exact: every survivor is exactly doubled, a power of two
    assert stats.standard_error == pytest.approx(math.sqrt(0.25 / 5), rel=1e-12)


@torch.no_grad()
def test_dropout_statistics_on_train_mode_embeddings(any_bert):
    layer = copy.deepcopy(any_bert.embeddings).train()  # never switch the shared model itself
    ids, types = random_inputs(any_bert, batch=8, seq=32, seed=3)
    torch.manual_seed(0)
    parts = embedding_parts(layer, ids, types)
    p = any_bert.config.hidden_dropout_prob
    stats = dropout_statistics(parts.normalized, parts.output, p)
    assert stats.dropped == int(((parts.output == 0) & (parts.normalized != 0)).sum())
    assert stats.expected_scale == pytest.approx(1 / (1 - p), rel=1e-12)  # the same float64 formula
    assert abs(stats.zero_fraction - p) < 5 * stats.standard_error
    # float32: x * (1 / (1 - p)) then divided by x: three roundings, 1.5 eps32 = 1.8e-7 -> 1e-6
    assert stats.max_scale_error < 1e-6
    assert not any_bert.training


@pytest.mark.parametrize(
    ("before", "after", "p", "match"),
    [
        (torch.ones(3), torch.ones(4), 0.1, "same tensor"),
        (torch.ones(3), torch.ones(3), 1.0, r"p must be in \[0, 1\)"),
        (torch.ones(3), torch.ones(3), -0.1, r"p must be in \[0, 1\)"),
        (torch.zeros(3), torch.zeros(3), 0.1, "no non-zero entry"),
        (torch.tensor([1.0, 0.0]), torch.tensor([1.0, 2.0]), 0.1, "not dropout"),
    ],
)
def test_dropout_statistics_clear_errors(before, after, p, match):
    with pytest.raises(ValueError, match=match):
        dropout_statistics(before, after, p)


# ------------------------------------------------------------------ part_shares


@torch.no_grad()
def test_part_shares_add_up_and_match_cosine_route(any_bert):
    ids, types = random_inputs(any_bert)
    parts = embedding_parts(any_bert.embeddings, ids, types)
    shares = part_shares(parts)
    assert list(shares) == ["token", "segment", "position"]  # the order of the sum
    summed_norm = parts.summed.norm(dim=-1)
    # float32: each share is a dot product of `hidden` terms over |sum|^2, off by eps32 x sqrt(hidden) x |part| / |sum|
    hidden = parts.summed.shape[-1]
    largest = max(float((getattr(parts, name).norm(dim=-1) / summed_norm).max()) for name in shares)
    torch.testing.assert_close(sum(shares.values()), torch.ones(ids.shape), rtol=0,
                               atol=rounding_tolerance(torch.float32, terms=hidden, scale=largest))
    for name, share in shares.items():
        part = getattr(parts, name)
        cosine = F.cosine_similarity(part, parts.summed, dim=-1)  # share = cos * |part| / |sum|
        scale = float((part.norm(dim=-1) / summed_norm).max())  # the size of this share's terms
        torch.testing.assert_close(share, cosine * part.norm(dim=-1) / summed_norm, rtol=0,
                                   atol=rounding_tolerance(torch.float32, terms=hidden, scale=scale))


def test_part_shares_zero_sum_is_an_error():
    zeros = torch.zeros(1, 2, 4)
    parts = EmbeddingParts(zeros, zeros, zeros, zeros, zeros, zeros)
    with pytest.raises(ValueError, match="exactly zero"):
        part_shares(parts)


# ------------------------------------------------------------------ precision_tolerance, compare_on_device


def test_precision_tolerance_closed_form():
    assert precision_tolerance(torch.float16, 1.0, ulps=1) == 2.0**-10  # 10 stored mantissa bits
    assert precision_tolerance(torch.bfloat16, 1.0, ulps=1) == 2.0**-7  # 7 stored mantissa bits
    assert precision_tolerance(torch.float32, 4.0, ulps=8) == 8 * 4.0 * 2.0**-23
    with pytest.raises(TypeError, match="floating-point"):
        precision_tolerance(torch.int64, 1.0)
    with pytest.raises(ValueError, match="scale must be"):
        precision_tolerance(torch.float16, -1.0)


def test_compare_on_device_cpu_float32_is_exact(any_bert):
    ids, types = random_inputs(any_bert)
    # exact: the same layer, dtype and CPU kernels in the same order
    assert compare_on_device(any_bert.embeddings, ids, types, device="cpu", dtype=torch.float32) == 0.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_compare_on_device_half_precision_on_cpu(any_bert, dtype):
    embeddings = any_bert.embeddings
    ids, types = random_inputs(any_bert)
    before = {name: value.clone() for name, value in embeddings.state_dict().items()}
    difference = compare_on_device(embeddings, ids, types, device="cpu", dtype=dtype)
    with torch.no_grad():
        reference = embeddings(ids, types)
        independent = copy.deepcopy(embeddings).to(dtype)(ids, types).float()  # transformers' layer in dtype
    assert difference == float((independent - reference).abs().max())  # exact: the same runs, the same order
    assert 0.0 < difference <= precision_tolerance(dtype, float(reference.abs().max()))
    assert all(torch.equal(value, before[name]) for name, value in embeddings.state_dict().items())  # untouched
    assert embeddings.word_embeddings.weight.dtype == torch.float32  # the caller's layer is untouched


def test_compare_on_device_keeps_a_train_mode_layer_in_train_mode(tiny_bert):
    layer = copy.deepcopy(tiny_bert.embeddings).train()
    ids, types = random_inputs(tiny_bert)
    assert compare_on_device(layer, ids, types) == 0.0  # both runs in eval mode: no dropout noise
    assert layer.training


def test_compare_on_device_clear_errors(tiny_bert):
    ids, types = random_inputs(tiny_bert)
    with pytest.raises(TypeError, match="floating-point dtype"):
        compare_on_device(tiny_bert.embeddings, ids, types, dtype=torch.int32)
    with pytest.raises(ValueError, match="token_type_ids has shape"):
        compare_on_device(tiny_bert.embeddings, ids, types[:, :-1])
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch sees no CUDA device"):
            compare_on_device(tiny_bert.embeddings, ids, types, device="cuda")


# ------------------------------------------------------------------ the chapter's plot functions


def test_layer_norm_steps_draws_one_row_per_step():
    import matplotlib.pyplot as plt

    steps = {"a": torch.arange(6.0), "b": -torch.arange(6.0), "c": torch.ones(6)}
    fig = layer_norm_steps(steps, title="t")
    try:
        assert len(fig.axes) == 3
        heights = [bar.get_height() for bar in fig.axes[1].containers[0]]  # the BarContainer
        np.testing.assert_array_equal(heights, -np.arange(6.0))  # exact: small integers, copied
    finally:
        plt.close(fig)


def test_dropout_scatter_splits_kept_and_dropped():
    import matplotlib.pyplot as plt

    before = torch.tensor([1.0, 2.0, -1.0, 0.5])
    after = torch.tensor([0.0, 2.5, -1.25, 0.0])  # p = 0.2
    fig = dropout_scatter(before, after, 0.2)
    try:
        kept, dropped = fig.axes[0].collections
        np.testing.assert_array_equal(kept.get_offsets(), [[2.0, 2.5], [-1.0, -1.25]])  # exact: dyadic, copied
        np.testing.assert_array_equal(dropped.get_offsets(), [[1.0, 0.0], [0.5, 0.0]])
    finally:
        plt.close(fig)


def test_part_share_bars_heights_are_the_shares():
    import matplotlib.pyplot as plt

    shares = {"token": torch.tensor([0.5, 0.7]), "segment": torch.tensor([0.2, -0.1]),
              "position": torch.tensor([0.3, 0.4])}
    fig = part_share_bars(shares, ["[CLS]", "a"], split_at=1)
    try:
        heights = [bar.get_height() for bar in fig.axes[0].patches]
        # float32 shares drawn as bars, against float64 literals: half a float32 ulp apart -> rtol eps32
        np.testing.assert_allclose(heights, [0.5, 0.7, 0.2, -0.1, 0.3, 0.4], rtol=EPS32, atol=0)
        assert fig.axes[0].get_ylim()[1] > 0.7
    finally:
        plt.close(fig)


def test_precision_error_plot_bars_and_lines():
    import matplotlib.pyplot as plt

    bars = precision_error_plot({"bfloat16": 0.45, "float16": 0.54}, tolerance=8)
    lines = precision_error_plot({"float16": [0.2, 0.6]}, x=[8, 512], xlabel="tokens")
    try:
        assert [bar.get_height() for bar in bars.axes[0].patches] == [0.45, 0.54]
        assert [line.get_ydata()[0] for line in bars.axes[0].lines] == [0.5, 8]  # half a unit, the tolerance
        np.testing.assert_array_equal(lines.axes[0].lines[0].get_ydata(), [0.2, 0.6])
        assert lines.axes[0].get_xscale() == "log"
    finally:
        plt.close("all")
