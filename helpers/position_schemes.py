"""Six ways to give a tiny transformer positions, encoder or decoder: the attention block of "Train it"."""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from helpers import validation
from helpers.relative_positions import alibi_slopes, t5_buckets
from helpers.scratch import ScratchEmbeddings

__all__ = ["SCHEMES", "MASKS", "rope_rotate"]

# scheme -> (what ScratchEmbeddings adds to the token vectors, what attention adds to its logits)
SCHEMES = {
    "none": ("none", None),
    "learned": ("learned", None),
    "sinusoid": ("sinusoid", None),
    "t5": ("none", "t5"),
    "alibi": ("none", "alibi"),
    "rope": ("none", "rope"),
}
MASKS = ("bidirectional", "causal")  # an encoder (BERT) and a decoder (GPT)


def _choice(name: str, value, options) -> str:
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}.")
    return value


def rope_rotate(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each (i, i + d/2) pair of x at position p by p * base^(-2i/d) (RoPE, Llama's halves layout).

    x: (..., length, d) with d even; returns the same shape. Taught in train it, "Six schemes"."""
    if not isinstance(x, torch.Tensor) or x.ndim < 2 or x.shape[-1] % 2:
        shape = getattr(x, "shape", x)
        raise ValueError(f"x must be (..., length, d) with an even d: {shape!r}")
    cos, sin = _rope_angles(x.shape[-2], x.shape[-1], float(base))  # (length, d) each
    d = x.shape[-1]
    first, second = x[..., : d // 2], x[..., d // 2:]
    rotated_half = torch.cat([-second, first], dim=-1)  # (..., length, d)
    return x * cos + rotated_half * sin


@functools.lru_cache(maxsize=64)
def _rope_angles(length: int, d: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of p * base^(-2i/d) for every position p and pair i, each repeated to (length, d)."""
    steps = torch.arange(0, d, 2, dtype=torch.float32)
    inverse = base ** (-steps / d)  # (d/2,)
    angle = torch.arange(length, dtype=torch.float32)[:, None] * inverse  # (length, d/2)
    return torch.cos(angle).repeat(1, 2), torch.sin(angle).repeat(1, 2)


@functools.lru_cache(maxsize=64)
def alibi_matrix(num_heads: int, length: int) -> torch.Tensor:
    """ALiBi's bias -m_h * |query - key| for every pair (symmetric: the encoder form); (heads, query, key)."""
    length = validation.integer("length", length, minimum=1)
    offsets = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # (query, key): query - key
    return -alibi_slopes(num_heads).float()[:, None, None] * offsets.abs()


@functools.lru_cache(maxsize=64)
def _alibi_bias(num_heads: int, length: int, steep: bool, right: float) -> torch.Tensor:
    """The ALiBi bias the model adds: the paper's (or steep slopes 1, 1/2, 1/4, ...), keys to the right x right."""
    slopes = 2.0 ** -torch.arange(num_heads).float() if steep else alibi_slopes(num_heads).float()
    offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (query, key): key - query
    distance = offsets.abs() * torch.where(offsets > 0, right, 1.0)
    return -slopes[:, None, None] * distance


class T5Bias(nn.Module):
    """T5's learned scalar per (bucket, head), looked up by the bucket of key - query.

    `clamp`, set at test time only, clips every offset to +-clamp first: the control that sends each pair to a
    bucket some training offset reached."""

    def __init__(self, num_heads: int, bidirectional: bool, num_buckets: int = 16, max_distance: int = 64):
        super().__init__()
        self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)
        self.clamp: int | None = None

    def buckets(self, length: int) -> torch.Tensor:
        """(query, key) bucket ids for one length, after the clamp if one is set."""
        return _t5_buckets(length, self.clamp, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, length: int) -> torch.Tensor:
        """(heads, query, key) bias for one length."""
        return self.relative_attention_bias(self.buckets(length)).permute(2, 0, 1)


@functools.lru_cache(maxsize=64)
def _t5_buckets(length: int, clamp: int | None, bidirectional: bool, num_buckets: int,
                max_distance: int) -> torch.Tensor:
    offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (query, key): key - query
    if clamp is not None:
        offsets = offsets.clamp(-clamp, clamp)
    return t5_buckets(offsets, bidirectional, num_buckets, max_distance)


@functools.lru_cache(maxsize=64)
def _hidden_keys(length: int, causal: bool, window: int | None, far: tuple[int, int] | None) -> torch.Tensor:
    """True where a query may not see a key: future keys (causal), and the test-time controls: keys `window` or
    more away; or all but the target (offset -far[1]) and the far[0] - 1 keys farthest from the query."""
    offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (query, key): key - query
    hidden = offsets > 0 if causal else torch.zeros(length, length, dtype=torch.bool)
    if window is not None:
        hidden = hidden | (offsets.abs() >= window)
    if far is not None:
        keys, target = far
        distance = offsets.abs().float().masked_fill(hidden, -1.0) - torch.arange(length) * 1e-3  # ties: left first
        distance = distance.masked_fill(offsets == -target, float("inf"))  # the target key always stays
        kept = torch.zeros_like(hidden).scatter(1, distance.topk(min(keys, length), dim=1).indices, True)
        hidden = hidden | ~kept
    return hidden


class SchemeAttention(nn.Module):
    """Multi-head self-attention whose logits get the scheme's bias or rotation, and a causal mask or none.

    Test-time controls: `window` hides every key |query - key| >= window away (no unseen offsets); `far`
    = (keys, k) keeps only the target key k back and the keys - 1 farthest ones (no more keys than training had)."""

    def __init__(self, hidden: int, heads: int, scheme: str, causal: bool, t5: T5Bias | None = None):
        super().__init__()
        if hidden % heads or (hidden // heads) % 2:
            raise ValueError(f"hidden={hidden} must split into {heads} heads of an even size.")
        self.extra = SCHEMES[_choice("scheme", scheme, SCHEMES)][1]
        self.heads, self.causal = heads, bool(causal)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        if self.extra == "t5" and t5 is None:
            t5 = T5Bias(heads, bidirectional=not self.causal)
        self.t5 = t5  # a module shared between blocks is registered in each; parameters() lists it once
        self.steep, self.right = False, 1.0  # ALiBi's slope set and right-hand factor (the ablations)
        self.window: int | None = None
        self.far: tuple[int, int] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, hidden) -> (batch, length, hidden)."""
        batch, length, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)  # (b, h, len, dh)
        if self.extra == "rope":
            q, k = rope_rotate(q), rope_rotate(k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (batch, heads, query, key)
        if self.extra == "alibi":
            scores = scores + _alibi_bias(self.heads, length, self.steep, self.right)
        elif self.extra == "t5":
            scores = scores + self.t5(length)
        hidden_keys = _hidden_keys(length, self.causal, self.window, self.far)  # (query, key): True = not seen
        mixed = scores.masked_fill(hidden_keys, float("-inf")).softmax(-1) @ v  # (batch, heads, length, dh)
        return self.out(mixed.transpose(1, 2).reshape(batch, length, hidden))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attention(LN x), then x + MLP(LN x)."""

    def __init__(self, hidden: int, heads: int, scheme: str, causal: bool, t5: T5Bias | None = None):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attention = SchemeAttention(hidden, heads, scheme, causal, t5)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """ScratchEmbeddings (the build-it-yourself layer), a few blocks, a linear read-out over the vocabulary.

    mask: "bidirectional" (an encoder, as BERT) or "causal" (a decoder). One-change ablations: shared_t5 (one T5
    table for every block, as T5 has), t5_init_std (T5's table drawn with this std, not nn.Embedding's 1),
    alibi_steep (slopes 1, 1/2, 1/4, ... instead of the paper's), alibi_right (keys to the right weigh this many
    times their distance: a directional encoder ALiBi)."""

    def __init__(self, scheme: str, vocab_size: int, hidden: int = 32, heads: int = 4, layers: int = 2,
                 max_positions: int = 128, mask: str = "bidirectional", shared_t5: bool = False,
                 t5_init_std: float | None = None, alibi_steep: bool = False, alibi_right: float = 1.0):
        super().__init__()
        positions = SCHEMES[_choice("scheme", scheme, SCHEMES)][0]
        causal = _choice("mask", mask, MASKS) == "causal"
        self.scheme, self.mask = scheme, mask
        self.embeddings = ScratchEmbeddings(vocab_size, hidden, max_positions, positions=positions, dropout=0.0)
        shared = T5Bias(heads, bidirectional=not causal) if shared_t5 and scheme == "t5" else None
        self.blocks = nn.ModuleList(Block(hidden, heads, scheme, causal, shared) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.readout = nn.Linear(hidden, vocab_size)
        for block in self.blocks:
            block.attention.steep, block.attention.right = bool(alibi_steep), float(alibi_right)
        for table in self.t5_tables() if t5_init_std is not None else ():
            nn.init.normal_(table.relative_attention_bias.weight, std=t5_init_std)  # drawn last: the rest unchanged

    def t5_tables(self) -> list[T5Bias]:
        """The distinct T5 bias tables (one per block, or one shared); empty for other schemes."""
        tables = [block.attention.t5 for block in self.blocks if block.attention.t5 is not None]
        return list({id(table): table for table in tables}.values())

    def set_controls(self, window: int | None = None, t5_clamp: int | None = None,
                     far: tuple[int, int] | None = None) -> None:
        """Test-time controls (None: off): keys within `window` only; T5 offsets clipped to +-t5_clamp;
        `far` = (keys, k): the target k back and the keys - 1 farthest keys only."""
        for block in self.blocks:
            block.attention.window, block.attention.far = window, far
        for table in self.t5_tables():
            table.clamp = t5_clamp

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(batch, length) ids -> (batch, length, vocab) logits."""
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln(x))
