"""helpers.position_schemes against the papers' formulas and transformers' RoPE, ALiBi and T5 code."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.t5.modeling_t5 import T5Attention

from helpers.position_schemes import (
    SCHEMES,
    SchemeAttention,
    T5Bias,
    TinyTransformer,
    _alibi_bias,
    _hidden_keys,
    alibi_matrix,
    rope_rotate,
)


def paper_rope(x: torch.Tensor) -> torch.Tensor:
    """Su et al. 2021, eq. 34, in float64 loops: pair (x_i, x_{i+d/2}) at position m turns by m * 10000^(-2i/d)."""
    length, d = x.shape
    out = torch.empty_like(x, dtype=torch.float64)
    for m in range(length):
        for i in range(d // 2):
            angle = m * 10000.0 ** (-2 * i / d)
            a, b = float(x[m, i]), float(x[m, i + d // 2])
            out[m, i] = a * math.cos(angle) - b * math.sin(angle)
            out[m, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("length, d", [(7, 8), (33, 16), (5, 2)])
def test_rope_matches_the_paper_formula(length, d):
    x = torch.randn(length, d, generator=torch.Generator().manual_seed(length))
    # float32 angles up to ~length radians: a few float32 ulps of the angle, times |x| <= ~4
    torch.testing.assert_close(rope_rotate(x).double(), paper_rope(x), rtol=0, atol=1e-5)


def test_rope_matches_llama_apply_rotary_pos_emb():
    head_dim, length = 16, 40
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         max_position_embeddings=length,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    q, k = torch.randn(2, 1, 3, length, head_dim, generator=torch.Generator().manual_seed(0))
    cos, sin = LlamaRotaryEmbedding(config)(q, torch.arange(length)[None])
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(rope_rotate(q), q_ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(rope_rotate(k), k_ref, rtol=0, atol=1e-5)


def test_rope_scores_depend_on_the_offset_only():
    q, k = torch.randn(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    scores = rope_rotate(q.expand(20, 8).float()) @ rope_rotate(k.expand(20, 8).float()).T  # (20, 20)
    for offset in (-3, 0, 5):
        diagonal = torch.diagonal(scores, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=0, atol=1e-4)


@pytest.mark.parametrize("heads", [1, 4, 6, 8])
def test_alibi_matches_the_paper_and_bloom(heads):
    length = 12
    bias = alibi_matrix(heads, length)  # (heads, query, key)
    bloom = build_alibi_tensor(torch.ones(1, length), heads, torch.float32)[:, 0, :]  # (heads, key): m_h * key
    for i in range(length):
        # Bloom adds m * key; the paper -m * (query - key): the same logits up to m * query per row (softmax-free)
        torch.testing.assert_close(bias[:, i, : i + 1] - bloom[:, : i + 1],
                                   (-bloom[:, i:i + 1]).expand(heads, i + 1), rtol=1e-6, atol=1e-5)
    if heads == 8:  # Press et al. 2022, section 3: 1/2, 1/4, ..., 1/256 for 8 heads
        slopes = torch.tensor([2.0 ** -k for k in range(1, 9)])
        assert torch.equal(bias[:, 5, 2], -3 * slopes)


@pytest.mark.parametrize("causal", [True, False])
def test_t5_bias_matches_t5_attention_compute_bias(causal):
    torch.manual_seed(0)
    ours = T5Bias(num_heads=3, bidirectional=not causal, num_buckets=16, max_distance=64)
    config = T5Config(d_model=12, d_kv=4, num_heads=3, is_decoder=causal, relative_attention_num_buckets=16,
                      relative_attention_max_distance=64)
    layer = T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
    layer.relative_attention_bias.weight.data.copy_(ours.relative_attention_bias.weight.data)
    assert torch.equal(ours(70), layer.compute_bias(70, 70)[0])
    ours.clamp = 12  # the control: every offset clipped to +-12 first, then T5's own bucketing
    offsets = (torch.arange(40)[None, :] - torch.arange(40)[:, None]).clamp(-12, 12)
    expected = T5Attention._relative_position_bucket(offsets, bidirectional=not causal, num_buckets=16,
                                                     max_distance=64)
    assert torch.equal(ours.buckets(40), expected)


def test_steep_and_directional_alibi_follow_their_formula():
    length, heads = 9, 4
    for steep, right in ((False, 1.0), (True, 1.0), (False, 4.0)):
        bias = _alibi_bias(heads, length, steep, right)
        for h in range(heads):
            slope = 2.0 ** -h if steep else 2.0 ** (-8 * (h + 1) / heads)  # Press et al., section 3
            for i in range(length):
                for j in range(length):
                    expected = -slope * abs(i - j) * (right if j > i else 1.0)
                    assert abs(float(bias[h, i, j]) - expected) < 1e-6
    assert torch.equal(_alibi_bias(heads, length, False, 1.0), alibi_matrix(heads, length))


def test_the_test_time_key_controls_match_a_loop():
    length, window, keys, k = 12, 5, 4, 3
    for causal in (True, False):
        hidden = _hidden_keys(length, causal, window, None)
        far = _hidden_keys(length, causal, None, (keys, k))
        for i in range(length):
            visible = [j for j in range(length) if not (causal and j > i)]
            assert [j for j in range(length) if not hidden[i, j]] == [j for j in visible if abs(i - j) < window]
            kept = [j for j in range(length) if not far[i, j]]
            if i - k >= 0:
                assert i - k in kept
            others = sorted((j for j in visible if j != i - k), key=lambda j: (-abs(i - j), j))
            assert sorted(kept) == sorted(([i - k] if i >= k else []) + others[: keys - (i >= k)])


def test_causal_models_do_not_see_the_future_and_the_encoder_without_positions_is_permutation_equivariant():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 16)
    for scheme in SCHEMES:
        for causal in (True, False):
            attention = SchemeAttention(16, 4, scheme, causal)
            changed = x.clone()
            changed[:, 6:] = torch.randn(2, 3, 16)
            assert torch.equal(attention(x)[:, :6], attention(changed)[:, :6]) == causal, scheme
    permutation = torch.randperm(9)
    model = TinyTransformer("none", vocab_size=10, max_positions=16, mask="bidirectional").eval()
    ids = torch.randint(1, 10, (2, 9))
    torch.testing.assert_close(model(ids)[:, permutation], model(ids[:, permutation]), rtol=0, atol=1e-5)


def test_a_symmetric_alibi_encoder_is_reversal_equivariant_and_a_directional_one_is_not():
    torch.manual_seed(0)
    ids = torch.randint(1, 10, (2, 11))
    for right, equivariant in ((1.0, True), (4.0, False)):
        model = TinyTransformer("alibi", vocab_size=10, max_positions=16, alibi_right=right).eval()
        with torch.no_grad():
            gap = (model(ids).flip(1) - model(ids.flip(1))).abs().max()
        assert bool(gap < 1e-5) == equivariant, (right, gap)  # float32 rounding only when equivariant


def test_a_shared_t5_table_is_one_table_and_t5_init_draws_it_smaller():
    torch.manual_seed(0)
    shared = TinyTransformer("t5", vocab_size=10, layers=3, mask="causal", shared_t5=True)
    assert len(shared.t5_tables()) == 1 and len(TinyTransformer("t5", vocab_size=10, layers=3).t5_tables()) == 3
    small = TinyTransformer("t5", vocab_size=10, t5_init_std=32 ** -0.5).t5_tables()[0]
    assert float(small.relative_attention_bias.weight.detach().std()) < 0.5  # nn.Embedding's N(0, 1) is about 1


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="scheme must be one of"):
        TinyTransformer("relative", vocab_size=10)
    with pytest.raises(ValueError, match="mask must be one of"):
        TinyTransformer("rope", vocab_size=10, mask="prefix")
    with pytest.raises(ValueError, match="even"):
        SchemeAttention(12, 4, "rope", True)  # heads of size 3
    with pytest.raises(ValueError, match="even d"):
        rope_rotate(torch.zeros(4, 3))  # pairs need an even d
