"""The learned-position chapter's figures: band profiles, offset profiles, the PCA trajectory, probe scatters.

The analyses they draw are in positions.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.plots import LINE_STYLES, MARKERS, PART_COLOURS, SEQUENTIAL, _numpy

__all__ = ["position_band_profile", "offset_profiles", "pca_trajectory", "probe_scatter"]


def _shade_bands(ax, edges, positions: int) -> None:
    """Shade alternate bands of positions [0, e1), [e1, e2), ... and draw their edges."""
    bounds = [0, *[e for e in edges if 0 < e < positions], positions]
    for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        if i % 2:
            ax.axvspan(start - 0.5, stop - 0.5, color=PART_COLOURS["other"], alpha=0.12, lw=0)
    for edge in bounds[1:-1]:
        ax.axvline(edge - 0.5, color="black", lw=0.8, ls="--")


def position_band_profile(norms, neighbour_cosine, edges=(128, 256), title: str = ""):
    """Two stacked panels along the positions: row norm (log scale) and cosine of each row with the next.

    Taught in learned positions, "Training length leaves a mark"."""
    norms, neighbour = _numpy(norms), _numpy(neighbour_cosine)  # (positions,), (positions - 1,)
    positions = len(norms)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 4.6), sharex=True)
    top.plot(np.arange(positions), norms, color=PART_COLOURS["position"], lw=1.0)
    top.set(yscale="log", ylabel="row norm")
    bottom.plot(np.arange(positions - 1), neighbour, color=PART_COLOURS["position"], lw=1.0)
    bottom.set(ylabel="cos(row x, row x+1)", xlabel="position x", xlim=(-0.5, positions - 0.5))
    for ax in (top, bottom):
        _shade_bands(ax, edges, positions)
    if title:
        top.set_title(title)
    return fig


def offset_profiles(profiles: dict[str, object], title: str = "", ylabel: str = "mean cosine similarity"):
    """Mean similarity of rows x and x + k against the offset k, one line per named profile.

    Taught in learned positions, "Training length leaves a mark"."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for i, (name, profile) in enumerate(profiles.items()):  # each line its own colour, dash pattern and marker
        values = _numpy(profile)  # (max_offset + 1,)
        ax.plot(np.arange(len(values)), values, LINE_STYLES[i % len(LINE_STYLES)], marker=MARKERS[i % len(MARKERS)],
                ms=3, lw=1.2, label=name)
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set(xlabel="offset k", ylabel=ylabel, title=title)
    ax.legend(frameon=False)
    return fig


def pca_trajectory(coords, explained, window: int = 48, title: str = ""):
    """Left: positions in the plane of two principal components, the first `window` joined in order.
    Right: both components against the position, for the first `window` positions.

    Taught in learned positions, "Pictures of the rows"."""
    coords, explained = _numpy(coords)[:, :2], _numpy(explained)  # (positions, 2), (2,)
    positions = len(coords)
    window = min(window, positions)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 4.0), width_ratios=(1.0, 1.25))
    left.plot(coords[:window, 0], coords[:window, 1], color="black", lw=0.7, alpha=0.7, zorder=2)
    points = left.scatter(coords[:, 0], coords[:, 1], c=np.arange(positions), cmap=SEQUENTIAL, s=9, zorder=3)
    for index in (0, 1, 2):
        if index < positions:
            left.annotate(f"{index}", coords[index], textcoords="offset points", xytext=(5, 4))
    left.set(xlabel=f"PC 1 ({explained[0]:.1%} of variance)", ylabel=f"PC 2 ({explained[1]:.1%} of variance)",
             title=f"all rows; positions 0..{window - 1} joined")
    left.set_aspect("equal", adjustable="datalim")
    fig.colorbar(points, ax=left, label="position", shrink=0.85)
    steps = np.arange(window)
    for column, style in ((0, "-o"), (1, "--s")):
        right.plot(steps, coords[:window, column], style, ms=2.5, lw=1.0, label=f"PC {column + 1}",
                   color=PART_COLOURS["position"] if column == 0 else PART_COLOURS["token"])
    right.axhline(0.0, color="black", lw=0.6)
    right.set(xlabel="position", ylabel="component value", title=f"positions 0..{window - 1}")
    right.legend(frameon=False)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def probe_scatter(predictions: dict[str, object], title: str = "", margin: float = 0.25):
    """Predicted against true position, one panel per table, with the perfect-prediction diagonal.

    The y axis spans the positions plus `margin` of their range on each side; points beyond it are drawn as
    triangles on the border, and each panel says how many there are.

    Taught in learned positions, "Published probes, reproduced"."""
    fig, axes = plt.subplots(1, len(predictions), figsize=(3.2 * len(predictions) + 0.6, 3.3), squeeze=False,
                             sharey=True)
    for ax, (name, predicted) in zip(axes[0], predictions.items(), strict=True):
        predicted = _numpy(predicted)  # (positions,)
        truth = np.arange(len(predicted))
        low, high = -margin * len(truth), (1 + margin) * len(truth)
        inside = (predicted >= low) & (predicted <= high)
        ax.plot(truth, truth, color="black", lw=0.8)
        ax.scatter(truth[inside], predicted[inside], s=5, color=PART_COLOURS["position"], alpha=0.7)
        for mask, edge, marker in ((predicted > high, high, "^"), (predicted < low, low, "v")):
            ax.scatter(truth[mask], np.full(mask.sum(), edge), s=18, marker=marker, color=PART_COLOURS["segment"],
                       clip_on=False, zorder=3)
        outside = int((~inside).sum())
        ax.set(title=f"{name} ({outside} off the scale)" if outside else name, xlabel="true position",
               ylim=(low, high))
    axes[0, 0].set_ylabel("predicted position")
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig
