"""The house style every figure of the book shares, and the figure primitives more than one chapter draws.

A chapter's own figures live beside the analysis they draw (or, where that module would grow past one sitting, in
position_figures.py and token_figures.py), and take their colours, hatches, dash patterns and markers from here.
Every figure function returns its Figure.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["OKABE_ITO", "PART_COLOURS", "vector_strips", "similarity_side_by_side", "grouped_token_bars"]


# Okabe & Ito's colour-blind-safe palette (jfly.uni-koeln.de/color): the book's only categorical colours.
OKABE_ITO = ["#0072B2", "#D55E00", "#CC79A7", "#009E73", "#E69F00", "#56B4E9", "#000000"]
# The three parts of the sum, the same in every chapter: blue, vermillion, reddish purple stay apart under
# protanopia, deuteranopia and tritanopia (tests/unit/test_plots.py simulates each).
PART_COLOURS = {"token": OKABE_ITO[0], "segment": OKABE_ITO[1], "position": OKABE_ITO[2], "other": "#6b6b6b"}
# The second cue where colour tells series apart, for readers who cannot rely on colour (and for print).
PART_HATCHES = {"token": "", "segment": "///", "position": "...", "other": "xx"}
HATCHES = ["", "///", "...", "xx", "\\\\", "++"]
LINE_STYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
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
            "axes.prop_cycle": mpl.cycler(color=OKABE_ITO),
        }
    )


def _relative_luminance(colour) -> float:
    """WCAG 2.x relative luminance of a matplotlib colour (alpha ignored)."""
    channels = np.array(mpl.colors.to_rgb(colour))
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def contrast_ratio(foreground, background) -> float:
    """WCAG contrast ratio (1 to 21) of two colours."""
    light, dark = sorted((_relative_luminance(foreground), _relative_luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_colour_on(fill) -> str:
    """Black or white, whichever contrasts more with the fill: labels on coloured boxes stay readable."""
    return "black" if contrast_ratio("black", fill) >= contrast_ratio("white", fill) else "white"


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


def similarity_side_by_side(similarities: dict[str, object], axis_label: str = "position", title: str = ""):
    """Draw square cosine-similarity matrices next to each other on one shared [-1, 1] scale."""
    fig, axes = plt.subplots(1, len(similarities), figsize=(4.2 * len(similarities) + 0.8, 4.0), squeeze=False)
    for ax, (name, matrix) in zip(axes[0], similarities.items(), strict=True):
        image = ax.imshow(_numpy(matrix), cmap=DIVERGING, vmin=-1.0, vmax=1.0)
        ax.set(title=name, xlabel=axis_label, ylabel=axis_label)
    fig.colorbar(image, ax=axes[0], shrink=0.85, label="cosine similarity")
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def grouped_token_bars(tokens: list[str], values: dict[str, object], title: str = "", ylabel: str = "",
                       colours: dict[str, str] | None = None, split_at: int | None = None):
    """Bars per token, one bar per series side by side, each with its own colour and hatching (PART_* for parts).

    split_at: draw a dashed line before this token (e.g. where sentence B begins).
    """
    series = {name: _numpy(v).reshape(-1) for name, v in values.items()}  # name -> (tokens,)
    for name, row in series.items():
        if row.shape[0] != len(tokens):
            raise ValueError(f"series {name!r} has {row.shape[0]} values for {len(tokens)} tokens.")
    colours = colours or {}
    fallback = iter(OKABE_ITO[3:])
    taken = {PART_HATCHES[name] for name in series if name in PART_HATCHES}
    fallback_hatches = iter([hatch for hatch in HATCHES if hatch not in taken])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.42 * len(tokens) + 2.0), 3.4))
    width = 0.8 / len(series)
    positions = np.arange(len(tokens))
    for k, (name, row) in enumerate(series.items()):
        colour = colours.get(name) or PART_COLOURS.get(name) or next(fallback)
        hatch = PART_HATCHES[name] if name in PART_HATCHES else next(fallback_hatches)
        ax.bar(positions + (k - (len(series) - 1) / 2) * width, row, width, label=name, color=colour, hatch=hatch,
               edgecolor="white", linewidth=0)
    if split_at is not None:
        ax.axvline(split_at - 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(positions, tokens, rotation=60, ha="right")
    ax.set(title=title, ylabel=ylabel, xlim=(-0.6, len(tokens) - 0.4))
    ax.legend(frameon=False, ncols=len(series), loc="upper right")
    return fig
