"""The book's shared plot functions, in one house style; each returns its Figure."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["PART_COLOURS", "apply_house_style", "vector_strips", "heatmap", "similarity_heatmap",
           "embedding_pipeline_diagram"]

# Colours for the three parts of the sum, used the same way in every chapter.
PART_COLOURS = {"token": "#1f77b4", "segment": "#ff7f0e", "position": "#2ca02c", "other": "#7f7f7f"}
DIVERGING = "RdBu_r"
SEQUENTIAL = "viridis"


def apply_house_style() -> None:
    """Set the rcParams every figure of the book shares."""
    mpl.rcParams.update(
        {
            "figure.figsize": (8.0, 3.2),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.constrained_layout.use": True,
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.titleweight": "bold",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": False,
            "image.interpolation": "nearest",
        }
    )


def _numpy(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().float().numpy()
    return np.asarray(values, dtype=float)


def vector_strips(vectors: dict[str, object], title: str = "", vmax: float | None = None):
    """Draw each vector as a one-row colour strip on one shared, symmetric colour scale."""
    rows = {name: _numpy(v).reshape(-1) for name, v in vectors.items()}  # name -> (hidden,)
    limit = vmax if vmax is not None else max(float(np.abs(r).max()) for r in rows.values())
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.0, 0.42 * len(rows) + 0.9), sharex=True, squeeze=False)
    for ax, (name, row) in zip(axes[:, 0], rows.items(), strict=True):
        image = ax.imshow(row[None, :], aspect="auto", cmap=DIVERGING, vmin=-limit, vmax=limit)
        ax.set_yticks([0], [name])
        ax.tick_params(axis="y", length=0)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    axes[-1, 0].set_xlabel("dimension")
    if title:
        axes[0, 0].set_title(title)
    fig.colorbar(image, ax=axes[:, 0], shrink=0.9, pad=0.01, label="value")
    return fig


def heatmap(matrix, title: str = "", xlabel: str = "", ylabel: str = "", cmap: str = SEQUENTIAL,
            vmin: float | None = None, vmax: float | None = None, label: str = "", ax=None):
    """Draw a matrix as a heatmap with a colour bar; origin at the top left."""
    values = _numpy(matrix)
    fig = ax.figure if ax is not None else plt.subplots(figsize=(4.6, 4.0))[0]
    ax = ax if ax is not None else fig.axes[0]
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.colorbar(image, ax=ax, shrink=0.85, label=label)
    return fig


def similarity_heatmap(similarity, title: str = "cosine similarity", axis_label: str = "position", ax=None):
    """Draw a square cosine-similarity matrix on the fixed scale [-1, 1]."""
    return heatmap(similarity, title=title, xlabel=axis_label, ylabel=axis_label, cmap=DIVERGING,
                   vmin=-1.0, vmax=1.0, label="cosine similarity", ax=ax)


def embedding_pipeline_diagram(hidden_size: int, vocab_size: int, max_positions: int, type_vocab_size: int):
    """Draw the embedding layer's four steps: three lookups, their sum, LayerNorm, dropout."""
    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    ax.set(xlim=(0, 10), ylim=(0, 4.2))
    ax.axis("off")

    def box(x, y, w, text, colour):
        ax.add_patch(FancyBboxPatch((x, y), w, 0.8, boxstyle="round,pad=0.05", fc=colour, ec="black",
                                    alpha=0.85))
        ax.text(x + w / 2, y + 0.4, text, ha="center", va="center", fontsize=9, color="white"
                if colour != "white" else "black")

    def arrow(start, end):
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="black"))

    lookups = [
        ("input_ids", f"token table\n{vocab_size} x {hidden_size}", PART_COLOURS["token"], 3.2),
        ("token_type_ids", f"segment table\n{type_vocab_size} x {hidden_size}", PART_COLOURS["segment"], 1.8),
        ("position_ids", f"position table\n{max_positions} x {hidden_size}", PART_COLOURS["position"], 0.4),
    ]
    for ids, table, colour, y in lookups:
        ax.text(0.05, y + 0.4, ids, ha="left", va="center", family="monospace", fontsize=9)
        arrow((1.25, y + 0.4), (1.6, y + 0.4))
        box(1.6, y, 2.0, table, colour)
        arrow((3.65, y + 0.4), (4.55, 2.2))
    ax.add_patch(plt.Circle((4.8, 2.2), 0.25, fc="white", ec="black"))
    ax.text(4.8, 2.2, "+", ha="center", va="center", fontsize=14)
    arrow((5.05, 2.2), (5.45, 2.2))
    box(5.45, 1.8, 1.5, "LayerNorm\n(gamma, beta)", PART_COLOURS["other"])
    arrow((7.0, 2.2), (7.35, 2.2))
    box(7.35, 1.8, 1.2, "Dropout", PART_COLOURS["other"])
    arrow((8.6, 2.2), (8.95, 2.2))
    ax.text(8.97, 2.2, f"(batch, seq,\n {hidden_size})", ha="left", va="center", family="monospace", fontsize=8)
    ax.set_title("BertEmbeddings: three lookups, one sum, LayerNorm, dropout")
    return fig
