"""The token chapter's figures: word groups in the plane of two components, and the histogram of row norms.

The analyses they draw are in tokens.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.plots import MARKERS, OKABE_ITO, PART_COLOURS, _numpy

__all__ = ["token_scatter", "norm_histogram"]


def _token_label_boxes(points: np.ndarray, words, width_pt: float, height_pt: float):
    """Pick, for each point, a label offset (in points) whose text box overlaps other labels and points least."""
    lo, span = points.min(axis=0), np.ptp(points, axis=0) + 1e-12
    xy = (points - lo) / span * np.array([width_pt, height_pt])  # point positions, in typographic points
    char_w, text_h, gap = 4.6, 9.0, 3.5  # 8 pt font: average character width and line height
    markers = [(x - 3, y - 3, x + 3, y + 3) for x, y in xy]
    placed: list[tuple] = []
    choices = []
    for (x, y), word in zip(xy, words, strict=True):
        w = char_w * len(word)
        candidates = [(gap, gap, "left", "bottom"), (gap, -gap, "left", "top"), (-gap, gap, "right", "bottom"),
                      (-gap, -gap, "right", "top"), (0, gap + 1, "center", "bottom"), (0, -gap - 1, "center", "top"),
                      (gap + 1, 0, "left", "center"), (-gap - 1, 0, "right", "center")]

        def box(candidate, x=x, y=y, w=w):
            dx, dy, ha, va = candidate
            x0 = x + dx - (w if ha == "right" else w / 2 if ha == "center" else 0)
            y0 = y + dy - (text_h if va == "top" else text_h / 2 if va == "center" else 0)
            return (x0, y0, x0 + w, y0 + text_h)

        def overlap(a, b):
            return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

        def cost(item):
            rank, candidate = item
            b = box(candidate)
            return sum(overlap(b, o) for o in placed + markers) + 0.5 * rank

        _, best = min(enumerate(candidates), key=cost)
        placed.append(box(best))
        choices.append(best)
    return choices


def token_scatter(coords, words, groups, title: str = "", explained=None):
    """Scatter 2-D token coordinates (e.g. PCA), one colour and marker per group, every point labelled with its word.

    Taught in token embeddings, "Geometry of the table"."""
    points = _numpy(coords)  # (words, 2)
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    names = list(dict.fromkeys(groups))
    colours = [OKABE_ITO[k % len(OKABE_ITO)] for k in range(len(names))]  # colour-blind safe, one per group
    for index, name in enumerate(names):
        mask = np.array([g == name for g in groups])
        ax.scatter(points[mask, 0], points[mask, 1], s=28, color=colours[index], marker=MARKERS[index % len(MARKERS)],
                   label=name)
    offsets = _token_label_boxes(points, words, width_pt=0.85 * 8.0 * 72, height_pt=0.8 * 5.6 * 72)
    for point, word, (dx, dy, ha, va) in zip(points, words, offsets, strict=True):  # black: 21:1 on white
        ax.annotate(word, point, xytext=(dx, dy), textcoords="offset points", fontsize=8, ha=ha, va=va)
    if explained is not None:
        share = _numpy(explained)
        ax.set_xlabel(f"component 1 ({share[0]:.0%} of the variance)")
        ax.set_ylabel(f"component 2 ({share[1]:.0%} of the variance)")
    else:
        ax.set(xlabel="component 1", ylabel="component 2")
    ax.axhline(0, color="0.85", lw=0.8, zorder=0)
    ax.axvline(0, color="0.85", lw=0.8, zorder=0)
    ax.legend(frameon=False, loc="best")
    ax.set_title(title)
    return fig


def norm_histogram(norms, marked: dict[str, float] | None = None, title: str = "", bins: int = 80,
                   xlabel: str = "row norm"):
    """Histogram of row norms, with a labelled vertical line for each marked value (e.g. special tokens).

    Taught in token embeddings, "Row norms, and the row of `[PAD]`"."""
    values = _numpy(norms).reshape(-1)
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    ax.hist(values, bins=bins, color=PART_COLOURS["token"], alpha=0.75)
    ax.set(xlabel=xlabel, ylabel="number of rows", title=title)
    top = ax.get_ylim()[1]
    for index, (name, value) in enumerate(sorted((marked or {}).items(), key=lambda item: item[1])):
        ax.axvline(value, color="black", lw=1.0, ls="--")
        ax.text(value, top * (0.95 - 0.11 * (index % 5)), f" {name}", fontsize=8,
                ha="left", va="top", family="monospace")
    return fig


