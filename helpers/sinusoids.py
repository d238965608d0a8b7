"""Sinusoidal position encodings (Vaswani et al. 2017, section 3.5), interleaved layout, and their geometry; the same
rotations applied to queries and keys (rotary scores, RoPE: Su et al. 2021, section 3.4); their figures."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from helpers import validation
from helpers.plots import DIVERGING, LINE_STYLES, OKABE_ITO, PART_COLOURS, SEQUENTIAL, _numpy

__all__ = [
    "sinusoidal_table",
    "wavelengths",
    "rotation_matrix",
    "offset_dot_product",
    "halves_permutation",
    "to_halves_layout",
    "rotary_scores",
    "offset_residual",
    "heatmap",
    "similarity_heatmap",
    "labelled_curves",
    "score_heatmaps",
    "clock_hands",
]


WIDTH_HINT = (": each frequency fills a (sin, cos) pair of columns. Use an even width (BERT-sized models use 384, "
              "512 or 768)")
BASE_HINT = " (the paper uses 10000)"
OFFSET_HINT = " (a number of positions)"


def _d_model(d_model) -> int:
    return validation.integer("d_model", d_model, minimum=1, even=True, hint=WIDTH_HINT)


def _base(base) -> float:
    return validation.real("base", base, above=1.0, hint=BASE_HINT)


def _inverse_frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Angular frequency w_i = base^(-2i/d) of each (sin, cos) pair i = 0 .. d/2 - 1; float64, shape (d_model/2,)."""
    d_model, base = _d_model(d_model), _base(base)
    validation.check_allocation("the frequency vector", (d_model // 2,), 8 * 2)
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def wavelengths(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Wavelength 2*pi / w_i of each pair, in positions: 2*pi up to 2*pi*base^(1 - 2/d); float64, (d_model/2,).

    Taught in sinusoidal encodings, "Pictures"."""
    return 2 * math.pi / _inverse_frequencies(d_model, base)


def sinusoidal_table(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)); shape (positions, d_model).

    Taught in sinusoidal encodings, "The formula"."""
    num_positions = validation.integer("num_positions", num_positions, minimum=1)
    d_model = _d_model(d_model)
    _base(base)
    validation.check_allocation("sinusoidal_table", (num_positions, d_model), 8 * 2)  # float64 table + angles
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (positions, 1)
    angle = position * _inverse_frequencies(d_model, base)  # (positions, d_model/2)
    table = torch.empty(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


def rotation_matrix(offset: int, d_model: int, base: float = 10000.0,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Block-diagonal M_k of 2x2 rotations with PE[p + k] = M_k @ PE[p] for every p; shape (d_model, d_model).

    Block i maps (sin a, cos a) to (sin(a + k w_i), cos(a + k w_i)): [[cos kw, sin kw], [-sin kw, cos kw]].

    Taught in sinusoidal encodings, "Properties, asserted".
    """
    offset, d_model = validation.integer("offset", offset, hint=OFFSET_HINT), _d_model(d_model)
    validation.check_allocation("rotation_matrix", (d_model, d_model), 8 * 2)  # block_diag in float64, then dtype
    angle = offset * _inverse_frequencies(d_model, base)  # (d_model/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d_model/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)


def offset_dot_product(offset: int, d_model: int, base: float = 10000.0) -> float:
    """Closed form of PE[p] . PE[p + k] = sum_i cos(k w_i): it does not depend on p.

    Taught in sinusoidal encodings, "Properties, asserted"."""
    offset = validation.integer("offset", offset, hint=OFFSET_HINT)
    return float(torch.cos(offset * _inverse_frequencies(d_model, base)).sum())


def halves_permutation(d_model: int) -> torch.Tensor:
    """Column order r_[0:d:2, 1:d:2]: all sin columns first, then all cos columns (Marian's layout); (d_model,).

    Taught in sinusoidal encodings, "Against the implementations in transformers"."""
    d_model = _d_model(d_model)
    validation.check_allocation("halves_permutation", (d_model,), 8 * 2)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def to_halves_layout(table: torch.Tensor) -> torch.Tensor:
    """Reorder an interleaved (positions, d_model) table to the sin-half / cos-half layout.

    Taught in sinusoidal encodings, "Against the implementations in transformers"."""
    if not isinstance(table, torch.Tensor) or table.ndim != 2:
        raise ValueError(f"table must be a 2-D tensor (positions, d_model), got {getattr(table, 'shape', table)!r}.")
    return table[:, halves_permutation(table.shape[1])]


def rotary_scores(query: torch.Tensor, key: torch.Tensor, num_positions: int, base: float = 10000.0) -> torch.Tensor:
    """S[m, n] = <RoPE(query, m), RoPE(key, n)> with transformers' Llama rotary code; shape (positions, positions).

    The same query vector is placed at every position m and the same key vector at every position n.

    Taught in one layer, many families, "Rotary encodings: the sinusoidal chapter's rotations, applied to queries
    and keys".
    """
    num_positions = validation.integer("num_positions", num_positions, minimum=1)
    base = _base(base)
    validation.check_allocation("rotary_scores", (6, num_positions, num_positions), 8)  # scores + rotated copies
    query, key = torch.as_tensor(query, dtype=torch.float32), torch.as_tensor(key, dtype=torch.float32)
    if query.dim() != 1 or query.shape != key.shape or query.shape[0] % 2:
        raise ValueError(
            f"query and key must be 1-D vectors of one even length (the head size), got {tuple(query.shape)} "
            f"and {tuple(key.shape)}: rotary encodings rotate pairs of dimensions."
        )
    head_dim = query.shape[0]
    config = transformers.LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                                      max_position_embeddings=num_positions,
                                      rope_parameters={"rope_type": "default", "rope_theta": float(base)})
    rotary = LlamaRotaryEmbedding(config)
    positions = torch.arange(num_positions)[None, :]  # (1, positions)
    cos, sin = rotary(query[None, None, None, :], positions)  # each (1, positions, head_dim)
    q = query.expand(1, 1, num_positions, head_dim)  # (batch, heads, positions, head_dim)
    k = key.expand(1, 1, num_positions, head_dim)
    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    return (q_rot[0, 0] @ k_rot[0, 0].T).double()  # (positions, positions)


def offset_residual(scores: torch.Tensor) -> torch.Tensor:
    """Each entry minus the mean of its diagonal (one offset); all zero iff the scores depend on the offset only.

    Taught in one layer, many families, "Rotary encodings: the sinusoidal chapter's rotations, applied to queries
    and keys"."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must be a square 2-D tensor (query positions, key positions), got {shape}.")
    n = scores.shape[0]
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # (n, n): key position - query position
    sums = torch.zeros(2 * n - 1, dtype=scores.dtype).index_add_(0, (offsets + n - 1).reshape(-1), scores.reshape(-1))
    counts = n - (torch.arange(2 * n - 1) - (n - 1)).abs()  # entries on each diagonal, offsets -(n-1) .. n-1
    means = sums / counts
    return scores - means[offsets + n - 1]  # (n, n)


def heatmap(matrix, title: str = "", xlabel: str = "", ylabel: str = "", cmap: str = SEQUENTIAL,
            vmin: float | None = None, vmax: float | None = None, label: str = "", ax=None):
    """Draw a matrix as a heatmap with a colour bar; origin at the top left.

    Taught in sinusoidal encodings, "Pictures"."""
    values = _numpy(matrix)
    fig = ax.figure if ax is not None else plt.subplots(figsize=(4.6, 4.0))[0]
    ax = ax if ax is not None else fig.axes[0]
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.colorbar(image, ax=ax, shrink=0.85, label=label)
    return fig


def similarity_heatmap(similarity, title: str = "cosine similarity", axis_label: str = "position", ax=None):
    """Draw a square cosine-similarity matrix on the fixed scale [-1, 1].

    Taught in sinusoidal encodings, "Pictures"."""
    return heatmap(similarity, title=title, xlabel=axis_label, ylabel=axis_label, cmap=DIVERGING,
                   vmin=-1.0, vmax=1.0, label="cosine similarity", ax=ax)


def labelled_curves(series: dict[str, tuple], title: str = "", xlabel: str = "", ylabel: str = "",
                    logy: bool = False, reference_lines: dict[str, float] | None = None, step: bool = False):
    """Draw named curves, each (x, y) or (x, y, fmt), with optional labelled horizontal reference lines.

    Taught in sinusoidal encodings, "Pictures"."""
    fig, ax = plt.subplots(figsize=(8.0, 3.4))
    for i, (name, (x, y, *fmt)) in enumerate(series.items()):  # no fmt given: a dash pattern per curve
        draw = ax.step if step else ax.plot
        kwargs = {"where": "mid"} if step else {}
        draw(_numpy(x), _numpy(y), *(fmt or [LINE_STYLES[i % len(LINE_STYLES)]]), label=name, **kwargs)
    for name, value in (reference_lines or {}).items():
        ax.axhline(value, color=PART_COLOURS["other"], linestyle=":", linewidth=1)
        ax.annotate(name, (0.0, value), xycoords=("axes fraction", "data"), xytext=(4, 3),
                    textcoords="offset points", fontsize=8, color=PART_COLOURS["other"])
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(frameon=False, fontsize=8)
    return fig


def score_heatmaps(rows: dict[str, dict[str, object]], xlabel: str = "key position",
                   ylabel: str = "query position", title: str = "", own_scale: tuple[str, ...] = ()):
    """A grid of heatmaps: one row per dict entry, its panels on one shared symmetric colour scale and colour bar.

    rows maps a row label (used for the colour bar) to {panel title: square matrix}; rows named in own_scale give
    each panel its own symmetric scale and colour bar instead.

    Taught in one layer, many families, "Rotary encodings: the sinusoidal chapter's rotations, applied to queries
    and keys".
    """
    columns = max(len(panels) for panels in rows.values())
    fig, axes = plt.subplots(len(rows), columns, figsize=(3.7 * columns + 1.2, 3.3 * len(rows)), squeeze=False)
    for axes_row, (label, panels) in zip(axes, rows.items(), strict=True):
        values = {name: _numpy(matrix) for name, matrix in panels.items()}
        limit = max(float(np.abs(v).max()) for v in values.values()) or 1.0
        for ax, (name, matrix) in zip(axes_row, values.items(), strict=False):
            own = float(np.abs(matrix).max()) or 1.0
            image = ax.imshow(matrix, cmap=DIVERGING, vmin=-(own if label in own_scale else limit),
                              vmax=own if label in own_scale else limit)
            ax.set(title=name, xlabel=xlabel, ylabel=ylabel)
            if label in own_scale:
                fig.colorbar(image, ax=ax, shrink=0.85, label=label)
        for ax in axes_row[len(values):]:
            ax.axis("off")
        if label not in own_scale:
            fig.colorbar(image, ax=list(axes_row), shrink=0.85, label=label)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def clock_hands(d_model: int, pairs: tuple[int, ...], positions: tuple[int, ...], base: float = 10000.0):
    """One dial per (sin, cos) pair i: a hand at angle pos * w_i for each position, drawn as (cos, sin).

    Taught in sinusoidal encodings, "Clock hands"."""
    if len(positions) > len(OKABE_ITO):
        raise ValueError(f"at most {len(OKABE_ITO)} positions fit the palette, got {len(positions)}.")
    frequencies = _inverse_frequencies(d_model, base)
    fig, axes = plt.subplots(1, len(pairs), figsize=(2.9 * len(pairs), 3.3), squeeze=False)
    circle = np.linspace(0, 2 * np.pi, 200)
    for ax, pair in zip(axes[0], pairs, strict=True):
        ax.plot(np.cos(circle), np.sin(circle), color=PART_COLOURS["other"], linewidth=0.8)
        for colour, pos in zip(OKABE_ITO, positions, strict=False):
            angle = pos * float(frequencies[pair])
            ax.annotate("", (np.cos(angle), np.sin(angle)), (0, 0),
                        arrowprops={"arrowstyle": "->", "color": colour, "linewidth": 1.6})
            ax.annotate(str(pos), (1.18 * np.cos(angle), 1.18 * np.sin(angle)),  # direct label, black text
                        ha="center", va="center", fontsize=9, fontweight="bold")
        ax.set(xlim=(-1.4, 1.4), ylim=(-1.4, 1.4), aspect="equal", xticks=[], yticks=[],
               title=f"pair {pair}: {float(frequencies[pair]):.3f} rad per step",
               xlabel="cos (column 2i+1)", ylabel="sin (column 2i)")
        ax.title.set_fontsize(10)
    fig.suptitle("One hand per position: each pair turns at its own speed", fontweight="bold")
    return fig
