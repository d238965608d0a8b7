"""A phone layout of every figure the book shows: panels in one column, as wide as a phone's text column.

helpers.notebook.setup() registers `retina_with_phone` as the inline backend's PNG formatter: each figure's output
keeps its desktop PNG and gains, in the output's metadata (which nbval does not compare), a second PNG drawn for a
390 px phone, and the smallest text of each in CSS px at its natural size. tools/book/sphinx_phone_figures.py serves
the phone PNG to narrow screens only (<picture>); desktops never fetch it.
"""

from __future__ import annotations

import pickle
import textwrap
import warnings

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.text import Text

__all__ = ["PHONE_WIDTH_PX", "READABLE_PX", "smallest_text_px", "phone_copy", "retina_with_phone"]

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
    """A legend wider than the figure gets one column; then titles and labels wider than their panel wrap."""
    renderer = _renderer(fig)
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend and legend._ncols > 1 and legend.get_window_extent(renderer).width > 0.9 * fig.bbox.width:
            _one_column(legend, ax)
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
        phone_data, phone_size = base_formatter(phone) if phone is not None else (None, None)
    if phone is not None:
        metadata[KEY] = dict(phone_size, png=phone_data, smallest_text_px=round(smallest_text_px(phone), 2))
    return data, metadata
