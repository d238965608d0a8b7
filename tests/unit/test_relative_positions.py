"""helpers.relative_positions against T5Attention.compute_bias and the bucket formula (Raffel et al. 2020, 2.1)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from transformers import T5Config, T5Model
from transformers.models.t5.modeling_t5 import T5Attention

from helpers import (
    alibi_bias,
    alibi_slopes,
    bias_each_block_receives,
    bucket_heatmaps,
    bucket_staircase,
    embedding_tables,
    t5_bucket_matrix,
    t5_buckets,
)
from helpers.plots import SEQUENTIAL
from helpers.relative_positions import relative_offsets, t5_bucket_ranges

SETTINGS = [(True, 32, 128), (False, 32, 128), (True, 64, 512), (False, 16, 40), (True, 8, 20)]


def formula_bucket(offset: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """Mesh TensorFlow's bucketing written out in plain Python floats, one offset (key - query) at a time."""
    bucket, n = 0, num_buckets
    if bidirectional:
        n //= 2
        bucket += n if offset > 0 else 0
        distance = abs(offset)
    else:
        distance = max(-offset, 0)
    exact = n // 2
    if distance < exact:
        return bucket + distance
    log_bucket = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (n - exact))
    return bucket + min(log_bucket, n - 1)


def small_t5_config(num_buckets: int = 32, max_distance: int = 128) -> T5Config:
    return T5Config(vocab_size=40, d_model=8, d_kv=4, d_ff=16, num_layers=2, num_decoder_layers=2, num_heads=2,
                    relative_attention_num_buckets=num_buckets, relative_attention_max_distance=max_distance)


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), SETTINGS)
def test_buckets_match_the_formula(bidirectional, num_buckets, max_distance):
    offsets = list(range(-3 * max_distance, 3 * max_distance + 1))
    expected = [formula_bucket(k, bidirectional, num_buckets, max_distance) for k in offsets]
    assert t5_buckets(torch.tensor(offsets), bidirectional, num_buckets, max_distance).tolist() == expected


@pytest.mark.parametrize(("is_decoder", "num_buckets", "max_distance"), [(False, 32, 128), (True, 32, 128),
                                                                         (False, 8, 20)])
def test_bucket_matrix_matches_compute_bias(is_decoder, num_buckets, max_distance):
    config = small_t5_config(num_buckets, max_distance)
    config.is_decoder = is_decoder
    attention = T5Attention(config, has_relative_attention_bias=True)
    with torch.no_grad():  # bias[bucket, head] = bucket, so compute_bias returns bucket ids
        attention.relative_attention_bias.weight.copy_(torch.arange(num_buckets, dtype=torch.float)[:, None]
                                                       .expand(num_buckets, config.num_heads))
        bias = attention.compute_bias(37, 300)  # (1, heads, query, key)
    matrix = t5_bucket_matrix(37, 300, bidirectional=not is_decoder, num_buckets=num_buckets,
                              max_distance=max_distance)
    assert matrix.shape == (37, 300)
    assert torch.equal(bias[0, 0].long(), matrix) and torch.equal(bias[0, 1].long(), matrix)


def test_relative_offsets_are_key_minus_query():
    offsets = relative_offsets(3, 5)
    assert offsets.tolist() == [[k - q for k in range(5)] for q in range(3)]


def test_bucket_properties_of_t5_defaults():
    offsets = torch.arange(-400, 401)
    buckets = t5_buckets(offsets)  # bidirectional, 32 buckets, max distance 128 (T5 paper 2.1)
    assert len(set(buckets[offsets.abs() < 8].tolist())) == 15
    assert set(buckets[offsets <= 0].tolist()).isdisjoint(buckets[offsets > 0].tolist())
    assert set(buckets[offsets >= 128].tolist()) == {31} and set(buckets[offsets <= -128].tolist()) == {15}
    assert 16 not in buckets.tolist()


def test_bucket_ranges_cover_every_offset_once():
    ranges = t5_bucket_ranges(150)
    covered = sorted(k for _, lo, hi in ranges for k in range(lo, hi + 1))
    assert covered == list(range(-150, 151))
    for bucket, lo, hi in ranges:
        assert set(t5_buckets(torch.arange(lo, hi + 1)).tolist()) == {bucket}
    assert (31, 91, 150) in ranges  # the last bucket starts before max_distance (formula: 8 * 16**(7/8) = 90.5)


def test_embedding_tables_of_bert(any_bert):
    config = any_bert.config
    assert embedding_tables(any_bert) == {
        "embeddings.word_embeddings": (config.vocab_size, config.hidden_size),
        "embeddings.position_embeddings": (config.max_position_embeddings, config.hidden_size),
        "embeddings.token_type_embeddings": (config.type_vocab_size, config.hidden_size),
    }


def test_embedding_tables_of_t5_have_no_absolute_positions():
    torch.manual_seed(0)
    model = T5Model(small_t5_config())
    assert embedding_tables(model) == {
        "shared": (40, 8),
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias": (32, 2),
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias": (32, 2),
    }


@pytest.mark.parametrize(("query_len", "key_len", "error", "name"), [
    (0, 5, ValueError, "query_len"), (5, 0, ValueError, "key_len"), (-1, 3, ValueError, "query_len"),
    (2.0, 3, TypeError, "query_len"), (True, 3, TypeError, "query_len")])
def test_bad_lengths(query_len, key_len, error, name):
    with pytest.raises(error, match=f"{name} must be a positive integer, got"):
        t5_bucket_matrix(query_len, key_len)


@pytest.mark.parametrize(("bidirectional", "num_buckets"), [(True, 31), (True, 2), (False, 1), (True, 0)])
def test_bad_bucket_counts(bidirectional, num_buckets):
    with pytest.raises(ValueError, match="does not work with bidirectional"):
        t5_buckets(torch.arange(5), bidirectional, num_buckets, 128)


@pytest.mark.parametrize("max_distance", [8, 3, 0, -5])
def test_bad_max_distance(max_distance):
    with pytest.raises(ValueError, match="max_distance=.* must exceed"):
        t5_buckets(torch.arange(5), True, 32, max_distance)


def test_offsets_must_be_integers():
    with pytest.raises(TypeError, match="offsets must be integers"):
        t5_buckets(torch.tensor([0.5, 1.0]))
    with pytest.raises(TypeError, match=r"num_buckets must be an integer, got float 32.0 \(T5 uses 32\)"):
        t5_buckets(torch.arange(3), True, 32.0, 128)


# ALiBi (Press et al. 2022, section 3) against transformers' Bloom implementation


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 8, 12, 16, 24, 40, 64])
def test_alibi_slopes_match_bloom(heads):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    # Bloom computes the powers in float32: a few float32 ulps of each slope
    torch.testing.assert_close(alibi_slopes(heads).float(), _get_alibi_slopes(heads, "cpu"), rtol=1e-6, atol=0)


def test_alibi_slopes_of_eight_heads_are_the_papers():
    expected = torch.tensor([1 / 2 ** k for k in range(1, 9)], dtype=torch.float64)  # 1/2, 1/4, ..., 1/256
    assert torch.equal(alibi_slopes(8), expected)


def test_alibi_bias_gives_blooms_attention_after_softmax():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    heads, n = 12, 9  # 12: slopes that are not powers of two
    logits = torch.randn(heads, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    bloom = build_alibi_tensor(torch.ones(1, n), heads, torch.float64).reshape(heads, 1, n)  # slope * key
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    ours = (logits + alibi_bias(heads, n)).masked_fill(~causal, float("-inf")).softmax(-1)
    theirs = (logits + bloom).masked_fill(~causal, float("-inf")).softmax(-1)
    # they differ by slope * query on each row, which softmax removes; Bloom's slopes are float32
    # (6e-8 relative) times distances below 9: logits and probabilities within 1e-6
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert torch.equal(alibi_bias(heads, n)[:, 4, 2], -2 * alibi_slopes(heads))


def test_alibi_bad_head_count():
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        alibi_slopes(0)


def test_every_block_after_the_first_receives_block_zeros_bias():
    torch.manual_seed(0)
    encoder = T5Model(small_t5_config()).eval().encoder
    ids = torch.tensor([[3, 7, 1, 9, 2]])
    received = bias_each_block_receives(encoder, ids)
    with torch.no_grad():
        own = encoder.block[0].layer[0].SelfAttention.compute_bias(5, 5)
    assert len(received) == len(encoder.block) and received[0] is None
    assert all(torch.equal(bias, own) for bias in received[1:])


def test_staircase_marks_where_the_last_buckets_start():
    fig = bucket_staircase(32, 128, 200)
    labels = {text.get_text() for text in fig.axes[0].texts}
    # Raffel et al.'s settings: the last bucket starts at +-91 (encoder) and -113 (decoder), not at 128
    assert {"bucket 31 from +91", "bucket 15 from -91", "bucket 31 from -113"} <= labels
    plt.close(fig)


def test_bucket_heatmaps_use_the_house_sequential_map():
    fig = bucket_heatmaps({"encoder": t5_bucket_matrix(20, 20)}, num_buckets=32, max_distance=8)
    assert fig.axes[0].images[0].get_cmap().name.startswith(SEQUENTIAL)
    plt.close(fig)
