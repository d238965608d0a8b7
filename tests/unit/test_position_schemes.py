"""helpers.position_schemes against the papers' formulas and transformers' RoPE, ALiBi and T5 code."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.t5.modeling_t5 import T5Attention

from helpers.position_schemes import SCHEMES, SchemeAttention, T5Bias, TinyTransformer, alibi_matrix, rope_rotate


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


def test_t5_bias_matches_t5_attention_compute_bias():
    torch.manual_seed(0)
    ours = T5Bias(num_heads=3, num_buckets=16, max_distance=64)
    config = T5Config(d_model=12, d_kv=4, num_heads=3, is_decoder=True, relative_attention_num_buckets=16,
                      relative_attention_max_distance=64)
    layer = T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
    layer.relative_attention_bias.weight.data.copy_(ours.relative_attention_bias.weight.data)
    assert torch.equal(ours(70), layer.compute_bias(70, 70)[0])


def test_causal_schemes_do_not_see_the_future_and_bidirectional_is_permutation_equivariant():
    torch.manual_seed(0)
    x = torch.randn(2, 9, 16)
    for scheme, (_, causal, _) in SCHEMES.items():
        attention = SchemeAttention(16, 4, scheme)
        changed = x.clone()
        changed[:, 6:] = torch.randn(2, 3, 16)
        same_past = torch.equal(attention(x)[:, :6], attention(changed)[:, :6])
        assert same_past == causal, scheme
    permutation = torch.randperm(9)
    model = TinyTransformer("none-bidir", vocab_size=10, max_positions=16).eval()
    ids = torch.randint(1, 10, (2, 9))
    torch.testing.assert_close(model(ids)[:, permutation], model(ids[:, permutation]), rtol=0, atol=1e-5)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="scheme must be one of"):
        TinyTransformer("relative", vocab_size=10)
    with pytest.raises(ValueError, match="even"):
        SchemeAttention(12, 4, "rope")  # heads of size 3
    with pytest.raises(ValueError, match="even d"):
        rope_rotate(torch.zeros(4, 3))  # pairs need an even d
