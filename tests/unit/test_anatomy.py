"""helpers.anatomy against transformers' BertEmbeddings, torch's LayerNorm/Dropout and closed-form facts."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import (
    PART_NAMES,
    EmbeddingParts,
    check_embedding_inputs,
    compare_on_device,
    dropout_statistics,
    embedding_parameter_table,
    embedding_parts,
    layer_norm_by_hand,
    part_shares,
    precision_tolerance,
)


def random_inputs(model, batch=2, seq=9, seed=0):
    """Random token ids and token types within the model's tables, (batch, seq) each."""
    generator = torch.Generator().manual_seed(seed)
    config = model.config
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=generator)
    types = torch.randint(0, config.type_vocab_size, (batch, seq), generator=generator)
    return ids, types


def layer_norm_input(embeddings, ids, types):
    """What transformers' own forward feeds into LayerNorm, captured with a forward hook."""
    captured = {}
    handle = embeddings.LayerNorm.register_forward_hook(lambda module, args, out: captured.update(x=args[0]))
    try:
        output = embeddings(ids, types)
    finally:
        handle.remove()
    return captured["x"], output


# ------------------------------------------------------------------ embedding_parts


@torch.no_grad()
def test_embedding_parts_equal_transformers(any_bert):
    embeddings = any_bert.embeddings
    ids, types = random_inputs(any_bert)
    parts = embedding_parts(embeddings, ids, types)
    summed, output = layer_norm_input(embeddings, ids, types)
    assert torch.equal(parts.summed, summed)  # the same sum, bit for bit: same order
    assert torch.equal(parts.normalized, output)  # eval mode: dropout is the identity
    assert torch.equal(parts.output, output)
    assert torch.equal(parts.token, embeddings.word_embeddings.weight[ids])
    assert torch.equal(parts.segment, embeddings.token_type_embeddings.weight[types])
    positions = embeddings.position_embeddings.weight[: ids.shape[1]]  # (seq, hidden)
    assert torch.equal(parts.position, positions.expand_as(parts.token))
    for field in ("token", "segment", "position", "summed", "normalized", "output"):
        assert getattr(parts, field).shape == (*ids.shape, any_bert.config.hidden_size)


@torch.no_grad()
def test_embedding_parts_defaults_and_one_dimensional_ids(any_bert):
    embeddings = any_bert.embeddings
    ids, _ = random_inputs(any_bert, batch=1, seq=7, seed=1)
    assert torch.equal(embedding_parts(embeddings, ids).output, embeddings(ids))  # zeros token types, 0..seq-1
    assert torch.equal(embedding_parts(embeddings, ids[0]).output, embeddings(ids))  # (seq,) becomes (1, seq)
    positions = torch.tensor([[3, 1, 4, 1, 5, 9, 2]])
    assert torch.equal(embedding_parts(embeddings, ids, position_ids=positions).output,
                       embeddings(ids, position_ids=positions))


@torch.no_grad()
def test_embedding_parts_another_order_is_only_close(packaged):
    model, tokenizer = packaged
    encoded = tokenizer("I am Sinan", "We lived above the clouds", return_tensors="pt")
    parts = embedding_parts(model.embeddings, encoded["input_ids"], encoded["token_type_ids"])
    other = model.embeddings.LayerNorm(parts.token + parts.position + parts.segment)
    assert not torch.equal(other, parts.output)
    torch.testing.assert_close(other, parts.output, rtol=0, atol=1e-5)


@torch.no_grad()
def test_hidden_states_zero_is_the_embedding_output(packaged):
    model, tokenizer = packaged
    encoded = tokenizer("this is a test sentence", return_tensors="pt")
    parts = embedding_parts(model.embeddings, encoded["input_ids"], encoded["token_type_ids"])
    hidden = model(**encoded, output_hidden_states=True).hidden_states[0]
    assert torch.equal(hidden, parts.output)


def test_packaged_ids_match_the_source_notebooks(packaged):
    _, tokenizer = packaged
    assert tokenizer("I am Sinan")["input_ids"] == [101, 1045, 2572, 8254, 2319, 102]  # FACTS.md table


@torch.no_grad()
def test_dropout_in_train_mode_matches_torch_dropout(tiny_bert):
    layer = copy.deepcopy(tiny_bert.embeddings).train()
    ids, types = random_inputs(tiny_bert, batch=4, seq=16)
    torch.manual_seed(5)
    parts = embedding_parts(layer, ids, types)
    torch.manual_seed(5)
    expected = F.dropout(parts.normalized, p=tiny_bert.config.hidden_dropout_prob, training=True)
    assert torch.equal(parts.output, expected)
    assert not torch.equal(parts.output, parts.normalized)
    assert not tiny_bert.training  # the fixture's model is untouched


# ------------------------------------------------------------------ embedding_parameter_table


def test_embedding_parameter_table(any_bert):
    rows = embedding_parameter_table(any_bert)
    named = dict(any_bert.embeddings.named_parameters())
    assert [row["part"] for row in rows] == list(named)
    total = sum(p.numel() for p in any_bert.parameters())
    for row in rows:
        assert row["shape"] == tuple(named[row["part"]].shape)
        assert row["parameters"] == named[row["part"]].numel()
        assert row["share"] == pytest.approx(row["parameters"] / total)
    config = any_bert.config
    by_part = {row["part"]: row["parameters"] for row in rows}
    hidden = config.hidden_size
    assert by_part == {  # closed form from the config (BertEmbeddings.__init__)
        "word_embeddings.weight": config.vocab_size * hidden,
        "position_embeddings.weight": config.max_position_embeddings * hidden,
        "token_type_embeddings.weight": config.type_vocab_size * hidden,
        "LayerNorm.weight": hidden,
        "LayerNorm.bias": hidden,
    }


# ------------------------------------------------------------------ check_embedding_inputs


def test_check_embedding_inputs_fills_defaults(tiny_bert):
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    input_ids, types, positions = check_embedding_inputs(tiny_bert.embeddings, ids)
    assert torch.equal(input_ids, ids)
    assert torch.equal(types, torch.zeros(2, 3, dtype=torch.long))
    assert torch.equal(positions, torch.tensor([[0, 1, 2], [0, 1, 2]]))
    assert positions.device == ids.device


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(input_ids="hello"), TypeError, "not text"),
        (dict(input_ids=torch.tensor([[1.0, 2.0]])), TypeError, "integer ids"),
        (dict(input_ids=torch.tensor([[True, False]])), TypeError, "integer ids"),
        (dict(input_ids=torch.ones(1, 2, 3, dtype=torch.long)), ValueError, r"shape \(batch, seq\)"),
        (dict(input_ids=torch.zeros(0, 5, dtype=torch.long)), ValueError, "nothing to embed"),
        (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), ValueError, "nothing to embed"),
        (dict(input_ids=torch.ones(1, 65, dtype=torch.long)), ValueError, "position table has 64 rows"),
        (dict(input_ids=torch.tensor([[1, 99]])), ValueError, "holds 99, outside the token table of 99 rows"),
        (dict(input_ids=torch.tensor([[1, -1]])), ValueError, "holds -1, outside the token table"),
        (dict(input_ids=torch.tensor([[1, 2, 3]]), token_type_ids=torch.tensor([[0, 0]])), ValueError,
         r"token_type_ids has shape \(1, 2\) but input_ids has \(1, 3\)"),
        (dict(input_ids=torch.tensor([[1, 2]]), token_type_ids=torch.tensor([[0, 3]])), ValueError,
         "outside the token-type"),
        (dict(input_ids=torch.tensor([[1, 2]]), position_ids=torch.tensor([[0, 1, 2]])), ValueError,
         "position_ids has 3 positions but the sequence has 2 tokens"),
        (dict(input_ids=torch.tensor([[1, 2]]), position_ids=torch.tensor([[0, 64]])), ValueError,
         "holds 64, outside the position table of 64 rows"),
    ],
)
def test_check_embedding_inputs_clear_errors(tiny_bert, kwargs, error, match):
    with pytest.raises(error, match=match):
        check_embedding_inputs(tiny_bert.embeddings, **kwargs)
    with pytest.raises(error, match=match):  # embedding_parts checks first
        embedding_parts(tiny_bert.embeddings, **kwargs)


def test_raw_layer_errors_that_the_chapter_shows(tiny_bert):
    """What transformers does without the helper: a size-mismatch RuntimeError, and empty output for empty input."""
    embeddings = tiny_bert.embeddings
    with pytest.raises(RuntimeError, match="must match the size"):
        embeddings(torch.tensor([[1, 2, 3]]), torch.tensor([[0, 0]]))
    with torch.no_grad():
        assert embeddings(torch.zeros(0, 5, dtype=torch.long)).shape == (0, 5, tiny_bert.config.hidden_size)


# ------------------------------------------------------------------ layer_norm_by_hand


@torch.no_grad()
def test_layer_norm_by_hand_matches_torch(any_bert):
    embeddings = any_bert.embeddings
    ids, types = random_inputs(any_bert)
    summed = embedding_parts(embeddings, ids, types).summed
    norm = embeddings.LayerNorm
    ours = layer_norm_by_hand(summed, norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(ours, norm(summed))
    torch.testing.assert_close(ours, F.layer_norm(summed, norm.normalized_shape, norm.weight, norm.bias, norm.eps))


def test_layer_norm_by_hand_without_affine_is_numpy_standardisation():
    x = torch.randn(3, 5, 17, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    values = x.numpy()
    expected = (values - values.mean(-1, keepdims=True)) / np.sqrt(values.var(-1, keepdims=True) + 1e-5)  # ddof=0
    np.testing.assert_allclose(layer_norm_by_hand(x, eps=1e-5).numpy(), expected, rtol=1e-12)
    torch.testing.assert_close(layer_norm_by_hand(x, eps=0.25), F.layer_norm(x, (17,), eps=0.25))


def test_layer_norm_by_hand_in_float16_loses_eps():
    assert torch.tensor(1e-12, dtype=torch.float16) == 0  # below half the smallest subnormal, 2**-25
    assert torch.finfo(torch.float16).smallest_normal == 2.0**-14
    constant = torch.full((1, 8), 3.0, dtype=torch.float16)  # variance exactly 0
    assert torch.isnan(layer_norm_by_hand(constant, eps=1e-12)).all()  # 0 / sqrt(0 + 0)
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
    assert stats.zero_fraction == pytest.approx(0.4)
    assert stats.expected_scale == 2.0
    assert stats.max_scale_error == 0.0
    assert stats.standard_error == pytest.approx(math.sqrt(0.25 / 5))


@torch.no_grad()
def test_dropout_statistics_on_train_mode_embeddings(any_bert):
    layer = copy.deepcopy(any_bert.embeddings).train()  # never switch the shared model itself
    ids, types = random_inputs(any_bert, batch=8, seq=32, seed=3)
    torch.manual_seed(0)
    parts = embedding_parts(layer, ids, types)
    p = any_bert.config.hidden_dropout_prob
    stats = dropout_statistics(parts.normalized, parts.output, p)
    assert stats.dropped == int(((parts.output == 0) & (parts.normalized != 0)).sum())
    assert stats.expected_scale == pytest.approx(1 / (1 - p))
    assert abs(stats.zero_fraction - p) < 5 * stats.standard_error
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
    assert list(shares) == list(PART_NAMES)
    torch.testing.assert_close(sum(shares.values()), torch.ones(ids.shape), rtol=0, atol=1e-5)
    summed_norm = parts.summed.norm(dim=-1)
    for name, share in shares.items():
        part = getattr(parts, name)
        cosine = F.cosine_similarity(part, parts.summed, dim=-1)  # share = cos * |part| / |sum|
        torch.testing.assert_close(share, cosine * part.norm(dim=-1) / summed_norm, rtol=1e-4, atol=1e-5)


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
    assert difference == float((independent - reference).abs().max())
    assert 0.0 < difference <= precision_tolerance(dtype, float(reference.abs().max()))
    assert all(torch.equal(value, before[name]) for name, value in embeddings.state_dict().items())
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_embedding_parts_on_cuda_equal_transformers(tiny_bert):
    layer = copy.deepcopy(tiny_bert.embeddings).to("cuda")
    ids, types = (t.to("cuda") for t in random_inputs(tiny_bert))
    with torch.no_grad():
        assert torch.equal(embedding_parts(layer, ids, types).output, layer(ids, types))


# ------------------------------------------------------------------ the chapter's plot functions


def test_layer_norm_steps_draws_one_row_per_step():
    import matplotlib.pyplot as plt

    from helpers import layer_norm_steps

    steps = {"a": torch.arange(6.0), "b": -torch.arange(6.0), "c": torch.ones(6)}
    fig = layer_norm_steps(steps, title="t")
    try:
        assert len(fig.axes) == 3
        heights = [bar.get_height() for bar in fig.axes[1].containers[0]]  # the BarContainer
        np.testing.assert_array_equal(heights, -np.arange(6.0))
    finally:
        plt.close(fig)


def test_dropout_scatter_splits_kept_and_dropped():
    import matplotlib.pyplot as plt

    from helpers import dropout_scatter

    before = torch.tensor([1.0, 2.0, -1.0, 0.5])
    after = torch.tensor([0.0, 2.5, -1.25, 0.0])  # p = 0.2
    fig = dropout_scatter(before, after, 0.2)
    try:
        kept, dropped = fig.axes[0].collections
        np.testing.assert_array_equal(kept.get_offsets(), [[2.0, 2.5], [-1.0, -1.25]])
        np.testing.assert_array_equal(dropped.get_offsets(), [[1.0, 0.0], [0.5, 0.0]])
    finally:
        plt.close(fig)


def test_part_share_bars_heights_are_the_shares():
    import matplotlib.pyplot as plt

    from helpers import part_share_bars

    shares = {"token": torch.tensor([0.5, 0.7]), "segment": torch.tensor([0.2, -0.1]),
              "position": torch.tensor([0.3, 0.4])}
    fig = part_share_bars(shares, ["[CLS]", "a"], split_at=1)
    try:
        heights = [bar.get_height() for bar in fig.axes[0].patches]
        np.testing.assert_allclose(heights, [0.5, 0.7, 0.2, -0.1, 0.3, 0.4])
        assert fig.axes[0].get_ylim()[1] > 0.7
    finally:
        plt.close(fig)
