"""The house style every figure of the book shares, and the figure primitives more than one chapter draws.

A chapter's own figures live beside the analysis they draw (or, where that module would grow past one sitting, in
position_figures.py and token_figures.py), and take their colours, hatches, dash patterns and markers from here.
Every figure function returns its Figure. Each figure a chapter shows also gets a phone layout (retina_with_phone).
"""

from __future__ import annotations

import pickle
import textwrap
import warnings

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.text import Text

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


# A phone layout of every figure the book shows: helpers.notebook.setup() registers `retina_with_phone` as the inline
# backend's PNG formatter, so each figure's output keeps its desktop PNG and gains, in the output's metadata (which
# nbval does not compare), a second PNG drawn for a 390 px phone (panels in one column, as wide as its text column),
# and the smallest text of each in CSS px at its natural size. tools/book/sphinx_phone_figures.py serves the phone PNG
# to narrow screens only (<picture>); a desktop never fetches it.
PHONE_WIDTH_PX = 330  # the text column of a 390 px phone is 342 CSS px wide (Chromium); a tight crop may add some
READABLE_PX = 9.0  # the smallest text a figure may show on a phone, in CSS px
KEY = "phone"  # where the phone rendering goes in the PNG output's metadata


def _renderer(fig: Figure):
    """An Agg renderer for `fig`, once its layout is done (a figure unpickled outside pyplot has no Agg canvas)."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def smallest_text_px(fig: Figure) -> float:
    """The smallest text drawn in `fig`, in CSS px at the figure's natural size (1 px = 1/100 in at dpi 100)."""
    renderer = _renderer(fig)
    frame = fig.bbox
    sizes = [text.get_fontsize() for text in fig.findobj(Text)
             if text.get_visible() and text.get_text().strip() and text.get_alpha() != 0
             and text.get_window_extent(renderer).overlaps(frame)]
    return min(sizes, default=mpl.rcParams["font.size"]) * fig.dpi / 72


def _panels(fig: Figure) -> list:
    """The figure's axes laid out on one grid (colorbars and insets excluded), or [] when there is no such grid."""
    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    grids = {id(ax.get_subplotspec().get_gridspec()) for ax in panels}
    return panels if len(grids) == 1 else []


def _stack(fig: Figure, panels: list) -> float:
    """Re-grid the panels into one column, in reading order; return the height (in) the column needs."""
    grid = panels[0].get_subplotspec().get_gridspec()
    rows, columns = grid.get_geometry()
    width, height = fig.get_size_inches()
    heights = grid.get_height_ratios() or [1] * rows
    widths = grid.get_width_ratios() or [1] * columns
    placed = sorted(panels, key=lambda ax: (ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start))
    needs = []
    for ax in placed:
        spec = ax.get_subplotspec()
        panel_width = width * sum(widths[spec.colspan.start:spec.colspan.stop]) / sum(widths)
        panel_height = height * sum(heights[spec.rowspan.start:spec.rowspan.stop]) / sum(heights)
        # as wide as the phone: a panel of fixed aspect (a heatmap, a circle) keeps its shape; a wide plot keeps
        # most of its height, a narrow one grows a little
        scale = PHONE_WIDTH_PX / fig.dpi / panel_width
        scale = min(max(scale, 0.5), 2.0) if ax.get_aspect() != "auto" else min(max(scale, 0.75), 1.25)
        needs.append(panel_height * scale)
    column = GridSpec(len(placed), 1, figure=fig, height_ratios=needs)
    for row, ax in enumerate(placed):
        ax.set_subplotspec(column[row, 0])
    return sum(needs)


def _wrap_to(text: Text, limit: float, renderer) -> None:
    """Break `text` into lines about `limit` display units long, at spaces."""
    extent = text.get_window_extent(renderer).width
    content = text.get_text()
    if extent > limit and " " in content and "\n" not in content:
        text.set_text(textwrap.fill(content, max(8, int(len(content) * limit / extent))))


def _fit_text(fig: Figure) -> None:
    """A legend wider than the figure gets one column (a figure's own keeps its side); long titles and labels wrap."""
    renderer = _renderer(fig)
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend and legend._ncols > 1 and legend.get_window_extent(renderer).width > 0.9 * fig.bbox.width:
            _one_column(legend, ax)
    for legend in list(fig.legends):  # a figure's own legend: one column, above or below the panels as it was
        if legend._ncols > 1 and legend.get_window_extent(renderer).width > 0.9 * fig.bbox.width:
            labels, size = [text.get_text() for text in legend.texts], legend.texts[0].get_fontsize()
            side = "upper" if legend.get_window_extent(renderer).y0 > fig.bbox.height / 2 else "lower"
            legend.remove()
            fig.legend(legend.legend_handles, labels, loc=f"outside {side} center", ncols=1, frameon=False,
                       fontsize=size)
    renderer = _renderer(fig)
    least = 0.5 * fig.bbox.width  # a panel squeezed by the first layout must not wrap a title into a tower
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for title in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label):
            _wrap_to(title, max(box.width, least), renderer)
        _wrap_to(ax.yaxis.label, max(box.height, least), renderer)
    for text in (fig._suptitle, fig._supxlabel, *fig.texts):
        if text is not None:
            _wrap_to(text, fig.bbox.width * 0.95, renderer)


def _one_column(legend, parent) -> None:
    """Draw an axes' legend again in one column, in the same place (matplotlib packs its columns only once)."""
    anchor = legend.get_bbox_to_anchor().transformed(parent.transAxes.inverted()).bounds  # in the panel's units
    options = {"loc": legend._loc, "frameon": legend.get_frame_on(), "ncols": 1,
               "fontsize": legend.texts[0].get_fontsize(), "bbox_to_anchor": anchor}
    legend.remove()
    parent.legend(legend.legend_handles, [text.get_text() for text in legend.texts], **options)


def phone_copy(fig: Figure) -> Figure | None:
    """A copy of `fig` laid out for a phone's column, or None when `fig` already reads at 9 px there."""
    width, height = fig.get_size_inches()
    if smallest_text_px(fig) * min(1.0, PHONE_WIDTH_PX / (width * fig.dpi)) >= READABLE_PX:
        return None
    phone = pickle.loads(pickle.dumps(fig))
    plt.close(phone)  # a pickled pyplot figure comes back registered with pyplot: the inline backend must not show it
    for desktop, narrow in zip(fig.axes, phone.axes, strict=True):  # the same data ranges as the desktop figure
        if narrow.get_adjustable() == "box":
            narrow.set(xlim=desktop.get_xlim(), ylim=desktop.get_ylim())
    panels = _panels(phone)
    new_height = _stack(phone, panels) if len(panels) > 1 else height * max(PHONE_WIDTH_PX / fig.dpi / width, 0.75)
    phone.set_size_inches(PHONE_WIDTH_PX / fig.dpi, new_height)
    _fit_text(phone)
    return phone


def retina_with_phone(fig: Figure, base_formatter):
    """`base_formatter(fig)` (IPython's retina PNG and its size) plus the phone rendering and the text sizes."""
    data, metadata = base_formatter(fig)
    with warnings.catch_warnings():  # a layout warning about the phone copy is no output of the reader's cell
        warnings.simplefilter("ignore", UserWarning)
        metadata = dict(metadata, smallest_text_px=round(smallest_text_px(fig), 2))
        phone = phone_copy(fig)
        if phone is not None:
            phone_data, phone_size = base_formatter(phone)
            metadata[KEY] = dict(phone_size, png=phone_data, smallest_text_px=round(smallest_text_px(phone), 2))
    return data, metadata
