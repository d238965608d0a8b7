"""Relative position schemes: T5's bucketed attention bias (Raffel et al. 2020, section 2.1), ALiBi's linear bias
(Press et al. 2022, section 3), and their figures."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from transformers.models.t5.modeling_t5 import T5Attention

from helpers import validation
from helpers.plots import OKABE_ITO, PART_COLOURS, SEQUENTIAL, _numpy

__all__ = ["t5_buckets", "t5_bucket_matrix", "embedding_tables",
           "bucket_heatmaps", "bucket_staircase", "bias_each_block_receives", "alibi_slopes", "alibi_bias"]


def _check_bucket_config(bidirectional: bool, num_buckets, max_distance) -> int:
    """Validate T5's bucket settings; return max_exact, the number of one-offset buckets per direction."""
    num_buckets = validation.integer("num_buckets", num_buckets, hint=" (T5 uses 32)")
    max_distance = validation.integer("max_distance", max_distance, hint=" (T5 uses 128)")
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    if per_direction < 2 or (bidirectional and num_buckets % 2):
        need = "an even number of at least 4 (two halves, one per direction)" if bidirectional else "at least 2"
        raise ValueError(
            f"num_buckets={num_buckets} does not work with bidirectional={bidirectional}: T5 splits each "
            f"direction's buckets into exact and log-spaced ones, so use {need}; T5 uses 32."
        )
    max_exact = per_direction // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance={max_distance} must exceed the {max_exact} exactly-bucketed offsets; "
            "the log-spaced buckets cover offsets max_exact .. max_distance (T5 uses 128)."
        )
    return max_exact


def relative_offsets(query_len: int, key_len: int) -> torch.Tensor:
    """Offset key position - query position for every (query, key) pair, as T5's compute_bias; (query, key) long.

    Taught in relative positions, "What T5 really does"."""
    query_len = validation.integer("query_len", query_len, minimum=1)
    key_len = validation.integer("key_len", key_len, minimum=1)
    validation.check_allocation("relative_offsets", (query_len, key_len), 8 * 4)  # offsets + bucket temporaries
    return torch.arange(key_len)[None, :] - torch.arange(query_len)[:, None]  # (query, key)


def t5_buckets(offsets, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """T5's bucket id for each offset (key - query), computed by transformers' T5Attention._relative_position_bucket.

    Taught in relative positions, "What T5 really does"."""
    _check_bucket_config(bidirectional, num_buckets, max_distance)
    num_buckets, max_distance = int(num_buckets), int(max_distance)
    offsets = validation.numbers_tensor("offsets", offsets, "integer offsets (key position - query position)")
    if offsets.dtype.is_floating_point:
        raise TypeError(f"offsets must be integers (key position - query position), got dtype {offsets.dtype}.")
    return T5Attention._relative_position_bucket(offsets.long(), bidirectional=bidirectional,
                                                 num_buckets=num_buckets, max_distance=max_distance)


def t5_bucket_matrix(query_len: int, key_len: int, bidirectional: bool = True, num_buckets: int = 32,
                     max_distance: int = 128) -> torch.Tensor:
    """Bucket id of every (query, key) pair: the index into relative_attention_bias; shape (query_len, key_len).

    Taught in relative positions, "What T5 really does"."""
    return t5_buckets(relative_offsets(query_len, key_len), bidirectional, num_buckets, max_distance)


def t5_bucket_ranges(max_offset: int, bidirectional: bool = True, num_buckets: int = 32,
                     max_distance: int = 128) -> list[tuple[int, int, int]]:
    """(bucket, first offset, last offset) for every bucket hit by offsets -max_offset .. max_offset, by bucket id.

    Taught in relative positions, "What T5 really does"."""
    max_offset = validation.integer("max_offset", max_offset, minimum=1)
    validation.check_allocation("t5_bucket_ranges", (2 * max_offset + 1,), 8 * 4)
    offsets = torch.arange(-max_offset, max_offset + 1)
    buckets = t5_buckets(offsets, bidirectional, num_buckets, max_distance)
    ranges = []
    for bucket in torch.unique(buckets).tolist():
        covered = offsets[buckets == bucket]
        ranges.append((bucket, int(covered.min()), int(covered.max())))
    return ranges


def embedding_tables(model: nn.Module) -> dict[str, tuple[int, ...]]:
    """Every nn.Embedding in a model -> its weight shape, in module order; tied (shared) weights listed once.

    Taught in relative positions, "What T5 really does"."""
    tables, seen = {}, set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Embedding) and id(module.weight) not in seen:
            seen.add(id(module.weight))
            tables[name] = tuple(module.weight.shape)
    return tables


def bucket_heatmaps(matrices: dict[str, object], num_buckets: int, max_distance: int | None = None):
    """Draw (query, key) matrices of relative-position bucket ids; dashed lines mark |key - query| = max_distance.

    Taught in relative positions, "What T5 really does"."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(4.2 * len(matrices) + 0.8, 4.0), squeeze=False)
    cmap = plt.get_cmap(SEQUENTIAL, num_buckets)  # one shade per bucket id, dark (0) to light (last)
    for ax, (name, matrix) in zip(axes[0], matrices.items(), strict=True):
        values = _numpy(matrix)
        image = ax.imshow(values, cmap=cmap, vmin=-0.5, vmax=num_buckets - 0.5)
        if max_distance is not None:
            n_query, n_key = values.shape
            for sign in (1, -1):
                queries = np.arange(n_query)
                keys = queries + sign * max_distance
                inside = (keys >= 0) & (keys < n_key)
                ax.plot(keys[inside], queries[inside], color="black", linestyle="--", linewidth=1)
        ax.set(title=name, xlabel="key position", ylabel="query position")
    fig.colorbar(image, ax=axes[0], shrink=0.85, label="bucket id")
    return fig


def bucket_staircase(num_buckets: int = 32, max_distance: int = 128, max_offset: int = 200):
    """Bucket id against the offset key - query, encoder and decoder, with each last bucket's start marked.

    Taught in relative positions, "Which buckets are used"."""
    offsets = torch.arange(-max_offset, max_offset + 1)
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    kinds = {"encoder (bidirectional)": (True, "-"), "decoder (causal)": (False, "--")}  # colour and dash pattern
    for colour, (label, (bidirectional, style)) in zip(OKABE_ITO, kinds.items(), strict=False):
        buckets = t5_buckets(offsets, bidirectional, num_buckets, max_distance)
        ax.step(_numpy(offsets), _numpy(buckets), style, where="mid", color=colour, label=label)
        for direction in (1, -1) if bidirectional else (-1,):
            side = offsets * direction > 0
            last = int(buckets[side].max())  # the direction's last bucket
            start = int(offsets[side & (buckets == last)].abs().min()) * direction
            ax.axvline(start, color=colour, linestyle=":", linewidth=1)
            ax.annotate(f"bucket {last} from {start:+d}", (start, last), xytext=(4, -12),
                        textcoords="offset points", fontsize=8)
    for distance in (-max_distance, max_distance):
        ax.axvline(distance, color=PART_COLOURS["other"], linestyle="--", linewidth=1)
    ax.set(title="T5 bucket id against the offset (dashed: max_distance)", xlabel="offset key - query",
           ylabel="bucket id")
    ax.legend(frameon=False, fontsize=8, loc="upper center")
    return fig


def bias_each_block_receives(stack: nn.Module, input_ids: torch.Tensor) -> list:
    """Run a T5 stack once; the position_bias argument each block's self-attention received (None: computes it).

    Taught in relative positions, "One table, every layer"."""
    if not isinstance(stack, nn.Module) or not isinstance(getattr(stack, "block", None), nn.ModuleList):
        raise TypeError(f"bias_each_block_receives needs a T5 stack (model.encoder or model.decoder of a T5Model), "
                        f"got {type(stack).__name__}.")
    input_ids = validation.model_ids("input_ids", input_ids, stack, "bias_each_block_receives")  # (batch, seq)
    received = []

    def record(module, args, kwargs):
        received.append(kwargs.get("position_bias"))

    attentions = [block.layer[0].SelfAttention for block in stack.block]
    handles = [a.register_forward_pre_hook(record, with_kwargs=True) for a in attentions]
    try:
        with torch.no_grad():
            stack(input_ids=input_ids)
    finally:
        for handle in handles:
            handle.remove()
    return received


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes: 2^(-8k/n) for k = 1..n when n is a power of two; otherwise the closest power of two's
    slopes, then every other slope of twice that many heads (Press et al. 2022, section 3); float64, (heads,).

    Taught in relative positions, "ALiBi: a straight line instead of buckets"."""
    num_heads = validation.integer("num_heads", num_heads, minimum=1)
    validation.check_allocation("alibi_slopes", (2 * num_heads,), 8 * 4)  # Python floats in lists, then a tensor

    def powers_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = powers_of_two(closest) + powers_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(num_heads: int, length: int) -> torch.Tensor:
    """ALiBi's causal bias -m_h * (query - key) for keys at or before the query; (heads, query, key), float64.

    Taught in relative positions, "ALiBi: a straight line instead of buckets"."""
    num_heads = validation.integer("num_heads", num_heads, minimum=1)
    length = validation.integer("length", length, minimum=1)
    validation.check_allocation("alibi_bias", (num_heads + 4, length, length), 8)  # the bias and the offsets
    distance = -relative_offsets(length, length).clamp(max=0)  # (query, key): query - key, 0 for future keys
    return -alibi_slopes(num_heads)[:, None, None] * distance
