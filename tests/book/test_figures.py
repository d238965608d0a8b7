"""Figures on a phone (390 px, Chromium): each cell's figure is sharp (2x pixels) and links to its full-size image,
where its smallest text is at least 11 CSS px."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import matplotlib as mpl
import pytest

from helpers.plots import apply_house_style
from tests.book.conftest import visit
from tools.book.toc import ROOT, is_notebook, toc_pages

PHONE = {"width": 390, "height": 844}
READABLE_PX = 11.0
SMALLEST_PT = 8  # no figure text is set smaller: test_no_figure_text_is_set_below_the_smallest_size checks
CHAPTERS = [p for p in toc_pages() if is_notebook(p)]
# What each cell-output figure shows at 390 px: its link, the image's pixels and its displayed and natural widths.
MEASURE = """() => [...document.querySelectorAll('.cell_output img')].map(img => ({
    alt: img.alt, src: img.src, link: img.closest('a') ? img.closest('a').href : null,
    width: img.width, naturalWidth: img.naturalWidth,
    setWidth: parseFloat(img.style.width) || Number(img.getAttribute('width')) || null}))"""


def house_px(points: float) -> float:
    """CSS px of a font size in points in a figure drawn at the house style's dpi and shown at its natural size."""
    apply_house_style()
    return points * mpl.rcParams["figure.dpi"] / 72


def figures_at(tab, url: str) -> list[dict]:
    """The cell-output figures of a page as `tab` shows them."""
    visit(tab, url)
    return tab.evaluate(MEASURE)


def displayed_text_px(figure: dict, points: float) -> float:
    """The size of text set at `points` as the page shows the figure: natural px x displayed / natural width."""
    natural = figure["setWidth"] or figure["naturalWidth"]  # retina: myst-nb sets half the pixels as the CSS width
    return house_px(points) * figure["width"] / natural


@pytest.fixture(scope="module")
def measured(browser, book_url) -> dict[str, list[dict]]:
    """Each chapter's figures as a 390 px phone shows them (device pixel ratio 3, as on most phones)."""
    context = browser.new_context(viewport=PHONE, device_scale_factor=3)
    tab = context.new_page()
    found = {stem: figures_at(tab, f"{book_url}/{stem}.html") for stem in CHAPTERS}
    context.close()
    return found


@pytest.fixture(scope="module")
def requests(browser):
    """A context to fetch the figures' links with."""
    context = browser.new_context()
    yield context.request
    context.close()


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_figure_links_to_its_full_size_image_with_readable_text(measured, requests, stem):
    figures = measured[stem]
    for figure in figures:
        assert figure["link"] == figure["src"], f"{stem}: {figure['alt'][:60]!r} is not inside a link to its image"
        response = requests.get(figure["link"])
        assert response.ok and response.headers["content-type"] == "image/png", figure["link"]
        # retina: twice the pixels of the size the page asks for; shown at that size, text is house_px(points)
        assert figure["setWidth"], f"{stem}: a figure without 2x output"
        assert abs(figure["naturalWidth"] - 2 * figure["setWidth"]) <= 2, figure
    assert house_px(SMALLEST_PT) >= READABLE_PX


def test_report_the_figure_text_size_at_390_px(measured):
    """The figure's own text on a phone, before any tap: the house font (10 pt) scaled by displayed / natural width."""
    sizes = [displayed_text_px(f, mpl.rcParams["font.size"]) for figures in measured.values() for f in figures]
    assert sizes, "no figures found"
    print(f"\n{len(sizes)} figures at 390 px: house text median {statistics.median(sizes):.1f} px, "
          f"min {min(sizes):.1f}, max {max(sizes):.1f}; full size {house_px(mpl.rcParams['font.size']):.1f} px")
    assert all(size <= house_px(mpl.rcParams["font.size"]) + 0.01 for size in sizes)  # never shown above natural size


def test_no_figure_text_is_set_below_the_smallest_size():
    """Every fontsize= given in helpers/ or the chapters is a number of at least SMALLEST_PT, or a name."""
    sources = [*sorted((ROOT / "helpers").glob("*.py")), *sorted((ROOT / "book").glob("*.ipynb"))]
    small = [(path.name, match) for path in sources
             for match in re.findall(r"\b(?:fontsize|size)=(\d+(?:\.\d+)?)\b", Path(path).read_text())
             if float(match) < SMALLEST_PT]
    assert not small
    assert mpl.rcParams["font.size"] >= SMALLEST_PT
