"""The book's shared plot functions, in one house style; each returns its Figure."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = [
    "PART_COLOURS",
    "apply_house_style",
    "vector_strips",
    "heatmap",
    "similarity_heatmap",
    "embedding_pipeline_diagram",
    "token_scatter",
    "norm_histogram",
    "grouped_token_bars",
    "labelled_curves",
    "similarity_side_by_side",
    "bucket_heatmaps",
    "position_band_profile",
    "offset_profiles",
    "pca_trajectory",
    "probe_scatter",
    "layer_norm_steps",
    "dropout_scatter",
    "part_share_bars",
    "family_input_diagrams",
    "family_parameter_bars",
    "score_heatmaps",
]

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
        arrow((1.45, y + 0.4), (1.8, y + 0.4))
        box(1.8, y, 1.9, table, colour)
        arrow((3.75, y + 0.4), (4.55, 2.2))
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
    """Scatter 2-D token coordinates (e.g. PCA), one colour per group, every point labelled with its word."""
    points = _numpy(coords)  # (words, 2)
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    names = list(dict.fromkeys(groups))
    colours = plt.get_cmap("tab10")
    for index, name in enumerate(names):
        mask = np.array([g == name for g in groups])
        ax.scatter(points[mask, 0], points[mask, 1], s=28, color=colours(index), label=name)
    offsets = _token_label_boxes(points, words, width_pt=0.85 * 8.0 * 72, height_pt=0.8 * 5.6 * 72)
    for point, word, group, (dx, dy, ha, va) in zip(points, words, groups, offsets, strict=True):
        ax.annotate(word, point, xytext=(dx, dy), textcoords="offset points", fontsize=8, ha=ha, va=va,
                    color=colours(names.index(group)))
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
    """Histogram of row norms, with a labelled vertical line for each marked value (e.g. special tokens)."""
    values = _numpy(norms).reshape(-1)
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    ax.hist(values, bins=bins, color=PART_COLOURS["token"], alpha=0.75)
    ax.set(xlabel=xlabel, ylabel="number of rows", title=title)
    top = ax.get_ylim()[1]
    for index, (name, value) in enumerate(sorted((marked or {}).items(), key=lambda item: item[1])):
        ax.axvline(value, color="#d62728", lw=1.2, ls="--")
        ax.text(value, top * (0.95 - 0.11 * (index % 5)), f" {name}", color="#d62728", fontsize=8,
                ha="left", va="top", family="monospace")
    return fig




def grouped_token_bars(tokens: list[str], values: dict[str, object], title: str = "", ylabel: str = "",
                       colours: dict[str, str] | None = None, split_at: int | None = None):
    """Bars per token, one bar per series side by side; series named like PART_COLOURS keys get those colours.

    split_at: draw a dashed line before this token (e.g. where sentence B begins).
    """
    series = {name: _numpy(v).reshape(-1) for name, v in values.items()}  # name -> (tokens,)
    for name, row in series.items():
        if row.shape[0] != len(tokens):
            raise ValueError(f"series {name!r} has {row.shape[0]} values for {len(tokens)} tokens.")
    colours = colours or {}
    fallback = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"][4:])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.42 * len(tokens) + 2.0), 3.4))
    width = 0.8 / len(series)
    positions = np.arange(len(tokens))
    for k, (name, row) in enumerate(series.items()):
        colour = colours.get(name) or PART_COLOURS.get(name) or next(fallback)
        ax.bar(positions + (k - (len(series) - 1) / 2) * width, row, width, label=name, color=colour)
    if split_at is not None:
        ax.axvline(split_at - 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(positions, tokens, rotation=60, ha="right")
    ax.set(title=title, ylabel=ylabel, xlim=(-0.6, len(tokens) - 0.4))
    ax.legend(frameon=False, ncols=len(series), loc="upper right")
    return fig




def labelled_curves(series: dict[str, tuple], title: str = "", xlabel: str = "", ylabel: str = "",
                    logy: bool = False, reference_lines: dict[str, float] | None = None, step: bool = False):
    """Draw named curves, each (x, y) or (x, y, fmt), with optional labelled horizontal reference lines."""
    fig, ax = plt.subplots(figsize=(8.0, 3.4))
    for name, (x, y, *fmt) in series.items():
        draw = ax.step if step else ax.plot
        kwargs = {"where": "mid"} if step else {}
        draw(_numpy(x), _numpy(y), *fmt, label=name, **kwargs)
    for name, value in (reference_lines or {}).items():
        ax.axhline(value, color=PART_COLOURS["other"], linestyle=":", linewidth=1)
        ax.annotate(name, (0.0, value), xycoords=("axes fraction", "data"), xytext=(4, 3),
                    textcoords="offset points", fontsize=8, color=PART_COLOURS["other"])
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(frameon=False, fontsize=8)
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


def bucket_heatmaps(matrices: dict[str, object], num_buckets: int, max_distance: int | None = None):
    """Draw (query, key) matrices of relative-position bucket ids; dashed lines mark |key - query| = max_distance."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(4.2 * len(matrices) + 0.8, 4.0), squeeze=False)
    cmap = plt.get_cmap("turbo", num_buckets)  # neighbouring buckets get visibly different colours
    for ax, (name, matrix) in zip(axes[0], matrices.items(), strict=True):
        values = _numpy(matrix)
        image = ax.imshow(values, cmap=cmap, vmin=-0.5, vmax=num_buckets - 0.5)
        if max_distance is not None:
            n_query, n_key = values.shape
            for sign in (1, -1):
                queries = np.arange(n_query)
                keys = queries + sign * max_distance
                inside = (keys >= 0) & (keys < n_key)
                ax.plot(keys[inside], queries[inside], color="white", linestyle="--", linewidth=1)
        ax.set(title=name, xlabel="key position", ylabel="query position")
    fig.colorbar(image, ax=axes[0], shrink=0.85, label="bucket id")
    return fig




def _shade_bands(ax, edges, positions: int) -> None:
    """Shade alternate bands of positions [0, e1), [e1, e2), ... and draw their edges."""
    bounds = [0, *[e for e in edges if 0 < e < positions], positions]
    for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        if i % 2:
            ax.axvspan(start - 0.5, stop - 0.5, color=PART_COLOURS["other"], alpha=0.12, lw=0)
    for edge in bounds[1:-1]:
        ax.axvline(edge - 0.5, color="black", lw=0.8, ls="--")


def position_band_profile(norms, neighbour_cosine, edges=(128, 256), title: str = ""):
    """Two stacked panels along the positions: row norm (log scale) and cosine of each row with the next."""
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
    """Mean similarity of rows x and x + k against the offset k, one line per named profile."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    styles = ["-", "--", "-.", ":"]
    for i, (name, profile) in enumerate(profiles.items()):
        values = _numpy(profile)  # (max_offset + 1,)
        ax.plot(np.arange(len(values)), values, styles[i % len(styles)], marker="o", ms=2.5, lw=1.2, label=name)
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set(xlabel="offset k", ylabel=ylabel, title=title)
    ax.legend(frameon=False, fontsize=8)
    return fig


def pca_trajectory(coords, explained, window: int = 48, title: str = ""):
    """Left: positions in the plane of two principal components, the first `window` joined in order.
    Right: both components against the position, for the first `window` positions."""
    coords, explained = _numpy(coords)[:, :2], _numpy(explained)  # (positions, 2), (2,)
    positions = len(coords)
    window = min(window, positions)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 4.0), width_ratios=(1.0, 1.25))
    left.plot(coords[:window, 0], coords[:window, 1], color="black", lw=0.7, alpha=0.7, zorder=2)
    points = left.scatter(coords[:, 0], coords[:, 1], c=np.arange(positions), cmap=SEQUENTIAL, s=9, zorder=3)
    for index in (0, 1, 2):
        if index < positions:
            left.annotate(f"{index}", coords[index], textcoords="offset points", xytext=(5, 4), fontsize=8)
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
    right.legend(frameon=False, fontsize=8)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def probe_scatter(predictions: dict[str, object], title: str = "", margin: float = 0.25):
    """Predicted against true position, one panel per table, with the perfect-prediction diagonal.

    The y axis spans the positions plus `margin` of their range on each side; points beyond it are drawn as
    triangles on the border, and each panel says how many there are."""
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




def layer_norm_steps(steps: dict[str, object], title: str = ""):
    """One row per LayerNorm step: a token's values per dimension on a shared y scale, with mean and +-1 std."""
    rows = {name: _numpy(v).reshape(-1) for name, v in steps.items()}  # name -> (hidden,)
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.0, 1.35 * len(rows) + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    colours = [PART_COLOURS["other"], PART_COLOURS["token"], PART_COLOURS["position"], PART_COLOURS["segment"]]
    for i, (ax, (name, row)) in enumerate(zip(axes[:, 0], rows.items(), strict=True)):
        mean, std = float(row.mean()), float(row.std())  # biased std, as LayerNorm uses
        ax.bar(np.arange(row.size), row, width=1.0, color=colours[i % len(colours)], linewidth=0)
        ax.axhspan(mean - std, mean + std, color="black", alpha=0.08, linewidth=0)
        ax.axhline(mean, color="black", linewidth=0.8, linestyle="--")
        ax.set_ylabel(name, rotation=0, ha="right", va="center")
        ax.text(1.01, 0.5, f"mean {mean:+.3f}\nstd  {std:.3f}", transform=ax.transAxes, ha="left", va="center",
                family="monospace", fontsize=8)
    axes[-1, 0].set_xlabel("dimension")
    axes[-1, 0].set_xlim(-0.5, max(r.size for r in rows.values()) - 0.5)
    if title:
        axes[0, 0].set_title(title)
    return fig


def dropout_scatter(before, after, p: float, title: str = ""):
    """Each entry after dropout against before it: dropped entries sit on 0, kept ones on the line x / (1 - p)."""
    x, y = _numpy(before).reshape(-1), _numpy(after).reshape(-1)
    dropped = (y == 0) & (x != 0)
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    ax.scatter(x[~dropped], y[~dropped], s=4, color=PART_COLOURS["token"], alpha=0.5,
               label=f"kept ({int((~dropped).sum())}): scaled by 1/(1-p) = {1 / (1 - p):.3f}")
    ax.scatter(x[dropped], y[dropped], s=4, color=PART_COLOURS["segment"], alpha=0.7,
               label=f"dropped ({int(dropped.sum())}): set to 0")
    line = np.array([x.min(), x.max()])
    ax.plot(line, line, color="black", linewidth=0.8, linestyle=":", label="unchanged (y = x)")
    ax.plot(line, line / (1 - p), color=PART_COLOURS["token"], linewidth=0.8)
    ax.set(xlabel="value before dropout", ylabel="value after dropout", title=title or f"dropout, p = {p}")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return fig


def part_share_bars(shares: dict[str, object], tokens: list[str], title: str = "", split_at: int | None = None):
    """Each part's share of the summed vector per token (grouped_token_bars with a zero line and legend room)."""
    fig = grouped_token_bars(tokens, shares, title=title, ylabel="share of the sum", split_at=split_at)
    ax = fig.axes[0]
    ax.axhline(0, color="black", linewidth=0.6)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.15 * (high - low))  # headroom for the legend
    return fig




def family_input_diagrams(families: dict[str, dict], columns: int = 3, title: str = ""):
    """One small diagram per model family: its input tables, their sum, norm, projection, and the blocks.

    Each value is a dict with keys token, segment, position (a shape string or None), norm, projection (str or
    None), position_enters ("added to the input", "bias on attention logits" or "rotates queries and keys"),
    position_note (str) and blocks (e.g. "post-norm"). Green marks where position information enters.
    """
    rows = -(-len(families) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.8 * columns, 2.5 * rows), squeeze=False)
    grey = PART_COLOURS["other"]

    def box(ax, x, y, w, h, text, colour, dashed=False, size=7.5):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", fc="white" if dashed else colour,
                                    ec=grey if dashed else "black", ls="--" if dashed else "-", lw=0.8,
                                    alpha=1.0 if dashed else 0.88))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                color=grey if dashed else "white")

    def arrow(ax, start, end):
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=8, color="black", lw=0.8))

    for ax in axes.flat:
        ax.set(xlim=(0, 10), ylim=(0, 6))
        ax.axis("off")
    for ax, (name, spec) in zip(axes.flat, families.items(), strict=False):  # spare panels stay empty
        ax.set_title(name, fontsize=10)
        slots = [("token", 4.3), ("segment", 2.6), ("position", 0.9)]
        for part, y in slots:
            shape = spec.get(part)
            label = f"{part}\n{shape}" if shape else f"no {part}\ntable"
            box(ax, 0.1, y, 2.1, 1.1, label, PART_COLOURS[part], dashed=not shape, size=8)
            if shape:
                arrow(ax, (2.25, y + 0.55), (2.62, 3.15))
        ax.add_patch(plt.Circle((2.85, 3.15), 0.25, fc="white", ec="black", lw=0.8))
        ax.text(2.85, 3.15, "+", ha="center", va="center", fontsize=10)
        x = 3.1
        for key, label in (("norm", "{}"), ("projection", "Linear\n{}")):
            if spec.get(key):
                arrow(ax, (x, 3.15), (x + 0.25, 3.15))
                box(ax, x + 0.25, 2.6, 1.65, 1.1, label.format(spec[key]), grey, size=7)
                x += 1.95
        arrow(ax, (x, 3.15), (x + 0.25, 3.15))
        left, width = x + 0.25, 9.9 - (x + 0.25)
        ax.add_patch(FancyBboxPatch((left, 0.9), width, 4.5, boxstyle="round,pad=0.04", fc="#f2f2f2", ec="black",
                                    lw=0.8))
        ax.text(left + width / 2, 5.0, "blocks", ha="center", va="center", fontsize=8, fontweight="bold")
        ax.text(left + width / 2, 4.3, spec.get("blocks", "").replace(" (", "\n(", 1), ha="center", va="center",
                fontsize=7)
        enters = spec.get("position_enters", "")
        if enters == "added to the input":
            note = "attention sees\npositions only\nthrough the input"
            ax.text(left + width / 2, 2.4, note, ha="center", va="center", fontsize=7, color=grey)
        else:
            text = "bias added to\nattention logits" if "bias" in enters else "rotate queries\nand keys"
            box(ax, left + 0.15, 1.9, width - 0.3, 1.6, text, PART_COLOURS["position"], size=8)
        if spec.get("position_note"):
            ax.text(left + width / 2, 1.35, spec["position_note"], ha="center", va="center", fontsize=7,
                    color=PART_COLOURS["position"])
    spare = list(axes.flat)[len(families):]
    if spare:  # a key to the colours in the first empty panel
        handles = [FancyBboxPatch((0, 0), 1, 1, fc=PART_COLOURS[part], ec="black", lw=0.8) for part in
                   ("token", "segment", "position", "other")]
        handles.append(FancyBboxPatch((0, 0), 1, 1, fc="white", ec=grey, ls="--", lw=0.8))
        labels = ["token table", "segment table", "position information", "norm, projection", "absent"]
        spare[0].legend(handles, labels, loc="center", frameon=False, fontsize=9)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def family_parameter_bars(parts: dict[str, dict[str, int]], total_parameters: dict[str, int], title: str = ""):
    """Stacked horizontal bars: each model's input-layer parameters by part, as a share of all its parameters.

    parts maps a model to {part: count}; parts named like PART_COLOURS keys (token, segment, position) get those
    colours, every other part is drawn in the "other" grey.
    """
    names = list(parts)
    fig, ax = plt.subplots(figsize=(8.0, 0.4 * len(names) + 1.3))
    y = np.arange(len(names))
    ax.barh(y, np.ones(len(names)), color="#ececec", height=0.65)
    left = np.zeros(len(names))
    for part in ("token", "segment", "position", "other"):
        share = np.array([sum(v for k, v in parts[n].items() if (k if k in PART_COLOURS else "other") == part)
                          / total_parameters[n] for n in names])
        ax.barh(y, share, left=left, color=PART_COLOURS[part], height=0.65, label=f"{part} table" if part !=
                "other" else "norm and projection")
        left += share
    for i, name in enumerate(names):
        inside = sum(parts[name].values())
        ax.text(left[i] + 0.01, i, f"{left[i]:.0%}", va="center", fontsize=8)
        ax.text(1.01, i, f"{inside / 1e6:,.1f}M of {total_parameters[name] / 1e6:,.1f}M", va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="share of all parameters that sit in the input layer", title=title)
    ax.xaxis.set_major_formatter(mpl.ticker.PercentFormatter(1.0))
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.4, -0.16), ncols=4, fontsize=8)
    return fig




def score_heatmaps(rows: dict[str, dict[str, object]], xlabel: str = "key position",
                   ylabel: str = "query position", title: str = "", own_scale: tuple[str, ...] = ()):
    """A grid of heatmaps: one row per dict entry, its panels on one shared symmetric colour scale and colour bar.

    rows maps a row label (used for the colour bar) to {panel title: square matrix}; rows named in own_scale give
    each panel its own symmetric scale and colour bar instead.
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


