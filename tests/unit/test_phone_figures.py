"""helpers/plots.py: each figure's phone layout, read back from matplotlib's artists and Pillow's pixels."""

from __future__ import annotations

import base64
import io
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from helpers import setup
from helpers.plots import PHONE_WIDTH_PX, READABLE_PX, phone_copy, smallest_text_px

PHONE_COLUMN_PX = 342  # the text column of a 390 px phone in Chromium (tests/book/test_figures.py measures it)


@pytest.fixture
def one_row():
    """A desktop figure of three panels side by side, with a three-column legend, as several chapters draw."""
    setup()
    fig, axes = plt.subplots(1, 3, figsize=(8.0, 3.2))
    for k, ax in enumerate(axes):
        ax.plot(np.arange(50), np.arange(50) * (k + 1), label=f"series {k}")
        ax.set(title=f"a rather long title for panel {k}", xlabel="position")
    axes[0].legend(handles=[ax.lines[0] for ax in axes], ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    yield fig
    plt.close("all")


def test_smallest_text_px_is_the_smallest_font_in_css_px_at_100_dpi(one_row):
    one_row.axes[1].text(0.5, 0.5, "note", fontsize=8)
    assert smallest_text_px(one_row) == pytest.approx(8 * 100 / 72)  # 1 pt = 1/72 in, 100 px per inch
    one_row.text(2.0, 2.0, "outside", fontsize=6).set_in_layout(False)  # outside the picture: not counted
    assert smallest_text_px(one_row) == pytest.approx(8 * 100 / 72)


def test_a_one_row_figure_is_stacked_into_one_column_as_wide_as_a_phone(one_row):
    one_row.draw_without_rendering()  # its layout, as the desktop PNG was drawn
    before = [ax.get_position().bounds for ax in one_row.axes]
    phone = phone_copy(one_row)
    assert phone is not None and phone is not one_row
    assert phone.get_size_inches()[0] * phone.dpi == pytest.approx(PHONE_WIDTH_PX)
    boxes = [ax.get_position() for ax in phone.axes]
    assert max(b.x0 for b in boxes) - min(b.x0 for b in boxes) < 0.05  # one column
    assert [b.y0 for b in boxes] == sorted((b.y0 for b in boxes), reverse=True)  # in reading order, top down
    assert [ax.get_xlim() for ax in phone.axes] == [ax.get_xlim() for ax in one_row.axes]  # the same data ranges
    after = [ax.get_position().bounds for ax in one_row.axes]
    assert np.allclose(after, before, atol=0.01)  # untouched (each constrained layout moves a panel by ~0.001)
    assert one_row.axes[0].get_legend()._ncols == 3
    assert phone.axes[0].get_legend()._ncols == 1  # three columns were wider than the phone
    assert [t.get_text() for t in phone.axes[0].get_legend().get_texts()] == ["series 0", "series 1", "series 2"]


def test_a_figure_that_reads_on_a_phone_already_gets_no_phone_layout():
    setup()
    fig, ax = plt.subplots(figsize=(3.2, 3.0))
    ax.plot([0, 1], [0, 1])
    assert smallest_text_px(fig) >= READABLE_PX
    assert phone_copy(fig) is None
    plt.close(fig)


def test_the_notebook_formatter_adds_a_sharp_legible_phone_png_and_prints_nothing(one_row):
    """Through IPython's display formatter, as a chapter's cell shows a figure: the desktop PNG is unchanged, the
    phone PNG has 2x the pixels of its CSS size, and its smallest text is legible where the desktop's is not."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    setup()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be printed into the reader's cell
        data, metadata = shell.display_formatter.format(one_row)
    desktop = metadata["image/png"]
    phone = desktop["phone"]
    image = Image.open(io.BytesIO(base64.b64decode(phone["png"])))
    assert abs(image.width - 2 * phone["width"]) <= 1 and abs(image.height - 2 * phone["height"]) <= 1
    assert phone["width"] <= PHONE_COLUMN_PX
    assert desktop["smallest_text_px"] * PHONE_COLUMN_PX / desktop["width"] < READABLE_PX  # the old rendering fails
    assert phone["smallest_text_px"] * min(1, PHONE_COLUMN_PX / phone["width"]) >= READABLE_PX
    assert len(plt.get_fignums()) == 1  # the phone copy is no figure the inline backend would show


def test_a_phone_copy_whose_layout_collapses_still_prints_nothing_into_the_cell():
    """vector_strips' short strips collapse constrained layout on a phone: its warning must not reach the cell."""
    from IPython.core.interactiveshell import InteractiveShell

    from helpers.plots import vector_strips

    shell = InteractiveShell.instance()
    setup()
    rows = 0.02 * torch.randn(2, 384, generator=torch.Generator().manual_seed(0))
    strips = {"type 0 (A)": rows[0], "type 1 (B)": rows[1], "B - A": rows[1] - rows[0]}
    fig = vector_strips(strips, vmax=0.05,
                        title="The token-type table, row by row, and the difference of its rows")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, metadata = shell.display_formatter.format(fig)
    assert "phone" in metadata["image/png"]
    plt.close("all")


def test_a_figure_legend_wider_than_a_phone_keeps_its_side_in_one_column_and_the_png_fits_the_column():
    """A legend of the whole figure in many columns (train_positions' summary) would widen the phone PNG past the
    column, and the browser would shrink its text below READABLE_PX: it is redrawn in one column on its side."""
    fig, axes = plt.subplots(1, 3, figsize=(8, 3))
    for ax in axes:
        for k, name in enumerate(["before L, at L", "past L, at 4L", "chance", "a ceiling of one scheme"]):
            ax.plot([0, 1], [k, k + 1], label=name)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=4, frameon=False)
    phone = phone_copy(fig)
    data = io.BytesIO()
    phone.savefig(data, format="png", bbox_inches="tight", dpi=phone.dpi)
    width = Image.open(data).width
    assert width <= PHONE_COLUMN_PX, width
    assert [legend._ncols for legend in phone.legends] == [1]
    plt.close("all")


def test_the_graders_switch_leaves_out_the_phone_layout_and_nothing_else(one_row, monkeypatch):
    """BERT_BOOK_PHONE_FIGURES=0 (the grading sandbox's policy): the same desktop PNG, no phone rendering."""
    from IPython.core.interactiveshell import InteractiveShell

    from helpers.notebook import PHONE_SWITCH
    from tools.classroom.policy.policy import POLICY

    assert POLICY.environment(Path("/nonexistent"))[PHONE_SWITCH] == "0"
    shell = InteractiveShell.instance()
    setup()
    data, metadata = shell.display_formatter.format(one_row)
    assert "phone" in metadata["image/png"]  # the control: a reader's kernel
    monkeypatch.setenv(PHONE_SWITCH, "0")
    setup()
    plain, plain_metadata = shell.display_formatter.format(one_row)
    assert "phone" not in plain_metadata.get("image/png", {})
    sizes = [Image.open(io.BytesIO(base64.b64decode(d["image/png"]))).size for d in (data, plain)]
    assert sizes[0] == sizes[1]  # the desktop PNG is drawn as before
    monkeypatch.delenv(PHONE_SWITCH)
    setup()  # the next test's kernel has its phone layouts again
