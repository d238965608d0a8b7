"""Figures and code as a reader sees them at a phone's, a tablet's and a desktop's width (390, 768, 1280 px):
every figure keeps its PNG's shape (within 2%), no code or output box hides more than 5% of its width on a desktop,
and a box that scrolls sideways shows it (the edge shadow of book.css) and can be reached with the keyboard."""

from __future__ import annotations

import pytest

from tests.book.conftest import WIDTHS
from tools.book.toc import toc_pages

DESKTOP = 1280
RATIO_TOLERANCE = 0.02
HIDDEN_ON_DESKTOP = 0.05


@pytest.fixture(scope="module")
def measured(visited):
    """{(page, width): {"figures": [...], "boxes": [...]}}: each page loaded once, then narrowed (conftest.py)."""
    return {(stem, width): visited[stem].layout[width] for stem in toc_pages() for width in WIDTHS}


def distorted(figures: list[dict]) -> list[str]:
    """The figures drawn in another shape than their PNG's."""
    return [f"{f['name']} drawn {f['size']}" for f in figures if abs(f["drawn"] / f["natural"] - 1) > RATIO_TOLERANCE]


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_every_figure_keeps_its_shape(measured, width):
    assert sum(len(m["figures"]) for (_, w), m in measured.items() if w == width) >= 20  # the check sees figures
    bad = {stem: d for (stem, w), m in measured.items() if w == width and (d := distorted(m["figures"]))}
    assert bad == {}


def test_no_box_hides_more_than_five_percent_of_its_width_on_a_desktop(measured):
    cut = {stem: [f"{b['hidden']:.0%} of {b['text']!r}" for b in m["boxes"] if b["hidden"] > HIDDEN_ON_DESKTOP]
           for (stem, width), m in measured.items() if width == DESKTOP}
    assert {stem: boxes for stem, boxes in cut.items() if boxes} == {}


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_a_box_that_scrolls_shows_it_and_takes_keyboard_focus(measured, width):
    hidden = [(stem, b) for (stem, w), m in measured.items() if w == width for b in m["boxes"] if b["hidden"] > 0]
    assert [f"{stem}: {b['text']!r}" for stem, b in hidden if not (b["focusable"] and b["shadow"])] == []
