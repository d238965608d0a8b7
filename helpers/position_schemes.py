"""Seven ways to give a tiny transformer positions, one switch apart: the attention block of "Train it"."""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers import validation
from helpers.relative_positions import alibi_slopes, t5_bucket_matrix
from helpers.scratch import ScratchEmbeddings

__all__ = ["SCHEMES", "rope_rotate", "TinyTransformer"]

# scheme -> (what ScratchEmbeddings adds to the token vectors, causal mask?, what attention adds)
SCHEMES = {
    "none-bidir": ("none", False, None),
    "none-causal": ("none", True, None),
    "learned": ("learned", True, None),
    "sinusoid": ("sinusoid", True, None),
    "t5": ("none", True, "t5"),
    "alibi": ("none", True, "alibi"),
    "rope": ("none", True, "rope"),
}


def _scheme(scheme) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {tuple(SCHEMES)}, got {scheme!r}.")
    return scheme


def rope_rotate(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each (i, i + d/2) pair of x at position p by p * base^(-2i/d) (RoPE, Llama's halves layout).

    x: (..., length, d) with d even; returns the same shape. Taught in train it, "Seven schemes"."""
    if not isinstance(x, torch.Tensor) or x.ndim < 2 or x.shape[-1] % 2:
        shape = getattr(x, "shape", x)
        raise ValueError(f"x must be (..., length, d) with an even d: {shape!r}")
    length, d = x.shape[-2], x.shape[-1]
    steps = torch.arange(0, d, 2, dtype=torch.float32)
    inverse = base ** (-steps / d)  # (d/2,)
    position = torch.arange(length, dtype=torch.float32)
    angle = position[:, None] * inverse  # (length, d/2)
    cos = torch.cos(angle).repeat(1, 2)  # (length, d)
    sin = torch.sin(angle).repeat(1, 2)
    first, second = x[..., : d // 2], x[..., d // 2:]
    rotated_half = torch.cat([-second, first], dim=-1)  # (..., length, d)
    return x * cos + rotated_half * sin


def alibi_matrix(num_heads: int, length: int) -> torch.Tensor:
    """ALiBi's bias -m_h * (query - key) for every pair, future keys included (masked later); (heads, q, k)."""
    length = validation.integer("length", length, minimum=1)
    offsets = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # (query, key): query - key
    return -alibi_slopes(num_heads).float()[:, None, None] * offsets.abs()


class T5Bias(nn.Module):
    """T5's learned scalar per (bucket, head), looked up by the bucket of key - query (causal buckets)."""

    def __init__(self, num_heads: int, num_buckets: int = 16, max_distance: int = 64):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    def forward(self, length: int) -> torch.Tensor:
        """(heads, query, key) bias for one length."""
        buckets = t5_bucket_matrix(length, length, bidirectional=False, num_buckets=self.num_buckets,
                                   max_distance=self.max_distance)  # (query, key)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)


class SchemeAttention(nn.Module):
    """Multi-head self-attention whose logits get the scheme's bias or rotation, and a causal mask or none."""

    def __init__(self, hidden: int, heads: int, scheme: str):
        super().__init__()
        if hidden % heads or (hidden // heads) % 2:
            raise ValueError(f"hidden={hidden} must split into {heads} heads of an even size.")
        _, self.causal, self.extra = SCHEMES[_scheme(scheme)]
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.t5 = T5Bias(heads) if self.extra == "t5" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, hidden) -> (batch, length, hidden)."""
        batch, length, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)  # (b, h, len, dh)
        if self.extra == "rope":
            q, k = rope_rotate(q), rope_rotate(k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (batch, heads, query, key)
        if self.extra == "alibi":
            scores = scores + alibi_matrix(self.heads, length)
        elif self.extra == "t5":
            scores = scores + self.t5(length)
        if self.causal:
            future = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        mixed = scores.softmax(-1) @ v  # (batch, heads, length, dh)
        return self.out(mixed.transpose(1, 2).reshape(batch, length, hidden))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attention(LN x), then x + MLP(LN x)."""

    def __init__(self, hidden: int, heads: int, scheme: str):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attention = SchemeAttention(hidden, heads, scheme)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """ScratchEmbeddings (the build-it-yourself layer), a few blocks, a linear read-out over the vocabulary."""

    def __init__(self, scheme: str, vocab_size: int, hidden: int = 32, heads: int = 4, layers: int = 2,
                 max_positions: int = 128):
        super().__init__()
        positions = SCHEMES[_scheme(scheme)][0]
        self.scheme = scheme
        self.embeddings = ScratchEmbeddings(vocab_size, hidden, max_positions, positions=positions, dropout=0.0)
        self.blocks = nn.ModuleList(Block(hidden, heads, scheme) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.readout = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(batch, length) ids -> (batch, length, vocab) logits."""
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln(x))
