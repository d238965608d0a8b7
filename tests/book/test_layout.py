"""Figures and code as a reader sees them at a phone's, a tablet's and a desktop's width (390, 768, 1280 px):
every figure keeps its PNG's shape (within 2%), no code or output box hides more than 5% of its width on a desktop,
and a box that scrolls sideways shows it (the edge shadow of book.css) and can be reached with the keyboard."""

from __future__ import annotations

import pytest

from tests.book.conftest import require_built_book, visit
from tools.book.toc import toc_pages

WIDTHS = [390, 768, 1280]
DESKTOP = 1280
RATIO_TOLERANCE = 0.02
HIDDEN_ON_DESKTOP = 0.05
# Each figure: its rendered and its natural shape; each box: its share of width out of sight, and its affordances.
MEASURE = """async () => {
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  window.bookLabelScrollers?.();
  const figures = [...document.querySelectorAll('main img')].filter(img => img.offsetParent && img.naturalWidth)
    .map(img => ({name: img.src.split('/').pop(), drawn: img.width / img.height,
                  natural: img.naturalWidth / img.naturalHeight, size: `${img.width}x${img.height}`}));
  const boxes = [...document.querySelectorAll('main pre, main .bd-article .math')]
    .filter(box => box.offsetParent && box.scrollWidth > 0)
    .map(box => ({text: box.textContent.trim().slice(0, 50),
                  hidden: Math.max(0, box.scrollWidth - box.clientWidth) / box.scrollWidth,
                  focusable: box.tabIndex === 0 && !!box.getAttribute('aria-label'),
                  shadow: getComputedStyle(box).backgroundImage !== 'none'}));
  return {figures, boxes};
}"""


@pytest.fixture(scope="module")
def measured(browser, book_url):
    """{(page, width): {"figures": [...], "boxes": [...]}}: each page loaded once, then narrowed."""
    require_built_book()
    context = browser.new_context(viewport={"width": DESKTOP, "height": 900})
    tab = context.new_page()
    found = {}
    for stem in toc_pages():
        tab.set_viewport_size({"width": DESKTOP, "height": 900})
        visit(tab, f"{book_url}/{stem}.html")
        for width in sorted(WIDTHS, reverse=True):
            tab.set_viewport_size({"width": width, "height": 900})
            found[stem, width] = tab.evaluate(MEASURE)
    context.close()
    return found


def distorted(figures: list[dict]) -> list[str]:
    """The figures drawn in another shape than their PNG's."""
    return [f"{f['name']} drawn {f['size']}" for f in figures if abs(f["drawn"] / f["natural"] - 1) > RATIO_TOLERANCE]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_keeps_its_shape(measured, width):
    assert sum(len(m["figures"]) for (_, w), m in measured.items() if w == width) >= 20  # the check sees figures
    bad = {stem: d for (stem, w), m in measured.items() if w == width and (d := distorted(m["figures"]))}
    assert bad == {}


def test_no_box_hides_more_than_five_percent_of_its_width_on_a_desktop(measured):
    cut = {stem: [f"{b['hidden']:.0%} of {b['text']!r}" for b in m["boxes"] if b["hidden"] > HIDDEN_ON_DESKTOP]
           for (stem, width), m in measured.items() if width == DESKTOP}
    assert {stem: boxes for stem, boxes in cut.items() if boxes} == {}


@pytest.mark.parametrize("width", WIDTHS)
def test_a_box_that_scrolls_shows_it_and_takes_keyboard_focus(measured, width):
    hidden = [(stem, b) for (stem, w), m in measured.items() if w == width for b in m["boxes"] if b["hidden"] > 0]
    assert [f"{stem}: {b['text']!r}" for stem, b in hidden if not (b["focusable"] and b["shadow"])] == []
