"""Figures on a phone (390 px, Chromium): every figure's smallest text is at least 9 CSS px, because a phone is served
each figure's phone layout (helpers/plots.py, tools/book/sphinx_phone_figures.py) and a desktop never fetches
it; each figure stays sharp (2x pixels) and links to its full-size desktop image."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib as mpl
import pytest

from helpers.plots import READABLE_PX
from tests.book.conftest import visit
from tests.book.phone_visit import MEASURE, phone_visit
from tools.book.sphinx_phone_figures import PHONE_MAX_PX
from tools.book.toc import ROOT, is_notebook, toc_pages

SMALLEST_PT = 8  # no figure text is set smaller: test_no_figure_text_is_set_below_the_smallest_size checks
CHAPTERS = [p for p in toc_pages() if is_notebook(p)]
PHONE_IMAGE = "/_images/phone-"  # tools/book/sphinx_phone_figures.py names each phone PNG so


def smallest_text_px(figure: dict) -> float:
    """The smallest text of the rendering the page shows, in CSS px: its size at natural size x shown / natural."""
    if figure["phoneSrc"] and figure["shown"] == figure["phoneSrc"]:
        return figure["phoneTextPx"] * figure["width"] / figure["phoneWidth"]
    return figure["textPx"] * figure["width"] / figure["setWidth"]


def desktop_text_px(figure: dict) -> float:
    """The smallest text the desktop PNG alone would show in this place (the book before phone layouts)."""
    return figure["textPx"] * figure["desktopWidth"] / figure["setWidth"]


@pytest.fixture(scope="module")
def measured(browser, book_url) -> dict[str, list[dict]]:
    """Each chapter's figures as a 390 px phone shows them (device pixel ratio 3, as on most phones), and every image
    URL the phone fetched (a cold visit: a fresh context; tests/book/phone_visit.py, shared with two modules)."""
    pages, fetched = phone_visit(browser, book_url)
    return {**{stem: pages[stem].figures for stem in CHAPTERS}, "fetched": fetched}


@pytest.fixture(scope="module")
def requests(browser):
    """A context to fetch the figures' links with."""
    context = browser.new_context()
    yield context.request
    context.close()


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_figure_is_sharp_and_links_to_its_full_size_image(measured, requests, stem):
    for figure in measured[stem]:
        assert figure["link"] == figure["src"], f"{stem}: {figure['alt'][:60]!r} is not inside a link to its image"
        response = requests.get(figure["link"])
        assert response.ok and response.headers["content-type"] == "image/png", figure["link"]
        assert figure["setWidth"], f"{stem}: a figure without 2x output"
        if figure["shown"] != figure["phoneSrc"]:  # the desktop PNG: twice the pixels of its CSS width
            assert abs(figure["naturalWidth"] - 2 * figure["setWidth"]) <= 2, figure
            continue
        # the phone PNG, declared 2x in srcset (naturalWidth is then its CSS width): its IHDR says its pixels
        png = requests.get(figure["phoneSrc"]).body()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and figure["naturalWidth"] == figure["phoneWidth"], figure
        assert abs(int.from_bytes(png[16:20], "big") - 2 * figure["phoneWidth"]) <= 2, figure


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_figure_text_is_legible_on_a_phone(measured, stem):
    """The smallest text of every figure, as a 390 px phone shows it, is at least READABLE_PX (9 CSS px)."""
    figures = measured[stem]
    assert figures, "a chapter without a figure"
    unknown = [f["alt"][:60] for f in figures if not f["textPx"]]
    assert unknown == [], f"{stem}: figures with no recorded text size (not drawn through helpers.notebook.setup)"
    small = {f["alt"][:60]: round(smallest_text_px(f), 1) for f in figures if smallest_text_px(f) < READABLE_PX}
    assert small == {}


def test_the_measure_fails_the_desktop_figures_a_phone_was_shown_before(measured):
    """The same measure applied to the desktop PNG in the phone's column (what every page showed before the phone
    layouts): most figures fall below READABLE_PX, so the check above can fail; the sizes are printed per chapter."""
    rows = []
    for stem in CHAPTERS:
        figures = measured[stem]
        before, after = min(desktop_text_px(f) for f in figures), min(smallest_text_px(f) for f in figures)
        rows.append((stem, before, after))
        print(f"{Path(stem).name:32s} smallest figure text at 390 px: desktop PNG {before:4.1f} px, "
              f"as served {after:4.1f} px")
    assert sum(before < READABLE_PX for _, before, _ in rows) >= len(rows) // 2
    assert all(after >= READABLE_PX for *_, after in rows)


def test_a_phone_fetches_the_phone_layouts_and_a_desktop_never_does(measured, visited):
    """A cold phone visit fetches each phone PNG and not the desktop PNG it replaces; a cold desktop visit (the
    session's visit at 1280 px, until its network was idle) fetches no phone PNG."""
    phone_figures = [f for stem in CHAPTERS for f in measured[stem] if f["phoneSrc"]]
    assert len(phone_figures) >= 25, len(phone_figures)
    fetched = set(measured["fetched"])
    assert {f["phoneSrc"] for f in phone_figures} <= fetched
    assert not {f["src"] for f in phone_figures} & fetched
    on_desktop = {url for stem in CHAPTERS for url in visited[stem].fetched if PHONE_IMAGE in url}
    assert on_desktop == set()


@pytest.mark.parametrize("width", [PHONE_MAX_PX, PHONE_MAX_PX + 1])
def test_every_figure_is_legible_on_both_sides_of_the_phone_breakpoint(browser, book_url, width):
    """A tablet or a narrow window gets the phone layout up to PHONE_MAX_PX, at its own size at any width there (at
    601 px the desktop PNG alone showed 7.5 px text); from the next pixel on, the desktop PNG, whose smallest text
    there is at least READABLE_PX too."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    tab = context.new_page()
    small, served = {}, set()
    for stem in CHAPTERS:
        visit(tab, f"{book_url}/{stem}.html")
        figures = tab.evaluate(MEASURE)
        served |= {figure["shown"] == figure["phoneSrc"] for figure in figures if figure["phoneSrc"]}
        small |= {f["alt"][:60]: round(smallest_text_px(f), 1) for f in figures if smallest_text_px(f) < READABLE_PX}
    context.close()
    assert served == {width <= PHONE_MAX_PX}  # the layout the breakpoint promises, and only it
    assert small == {}


def test_the_stylesheet_sizes_phone_layouts_at_the_same_breakpoint():
    """book.css shows a phone layout at its own size up to the width the extension serves it to."""
    css = (ROOT / "book" / "_static" / "book.css").read_text()
    assert f"@media screen and (max-width: {PHONE_MAX_PX}px) {{ .bd-article picture.with-phone img" in css


def test_no_figure_text_is_set_below_the_smallest_size():
    """Every fontsize= given in helpers/ or the chapters is a number of at least SMALLEST_PT, or a name."""
    sources = [*sorted((ROOT / "helpers").glob("*.py")), *sorted((ROOT / "book").glob("*.ipynb"))]
    small = [(path.name, match) for path in sources
             for match in re.findall(r"\b(?:fontsize|size)=(\d+(?:\.\d+)?)\b", Path(path).read_text())
             if float(match) < SMALLEST_PT]
    assert not small
    assert mpl.rcParams["font.size"] >= SMALLEST_PT
