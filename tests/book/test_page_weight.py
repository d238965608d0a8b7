"""What a reader's browser fetches: each page with its images stays under 2 MB on disk, and a cold visit (empty cache)
fetches at most the budget beside its figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.book.conftest import require_built_book
from tools.book.toc import toc_pages

LIMIT = 2 * 1024 * 1024
BUDGET = 1_500_000  # bytes of HTML, CSS, scripts and fonts a cold page fetches, uncompressed, figures excluded
# MathJax's startup, core, TeX input with ams, CommonHTML output and its fonts, the screen readers' MathML: fetched
# only by a page with math (measured: 853,251 bytes on the sum-and-LayerNorm chapter; tex-chtml.js with its fonts
# was 1,267,941). Over the budget by itself with the theme's 1.1 MB, so math pages get this much more.
MATHJAX = 900_000


def page_weight(html: Path) -> int:
    """Bytes of an HTML page plus the local images it shows."""
    images = set(re.findall(r'<img[^>]+src="([^"]+)"', html.read_text()))
    return html.stat().st_size + sum((html.parent / src).stat().st_size for src in images if "://" not in src)


@pytest.mark.parametrize("stem", toc_pages())
def test_page_with_its_images_is_under_two_megabytes(stem):
    weight = page_weight(require_built_book() / f"{stem}.html")
    assert weight < LIMIT, f"{stem}: {weight / 1e6:.2f} MB"


@pytest.mark.parametrize("stem", toc_pages())
def test_a_cold_visit_fetches_no_more_than_the_budget_beside_its_figures(browser, book_url, stem):
    context = browser.new_context()  # a fresh cache
    tab = context.new_page()
    fetched: dict[str, tuple[str, int]] = {}
    tab.on("requestfinished", lambda r: fetched.__setitem__(r.url, (r.resource_type, r.sizes()["responseBodySize"])))
    tab.goto(f"{book_url}/{stem}.html", wait_until="networkidle")
    has_math = tab.locator("main .math").count() > 0
    tab.evaluate("async () => { await window.MathJax?.startup?.promise; await document.fonts.ready; }")
    tab.wait_for_load_state("networkidle")  # the math fonts MathJax asked for
    context.close()
    assert not any("fontawesome.js" in url for url in fetched), "the 1.5 MB icon script is back"
    assert not any("tex-chtml.js" in url for url in fetched), "MathJax's 1.16 MB all-in-one bundle is back"
    assert any("/mathjax/" in url for url in fetched) == has_math, "MathJax loads where there is no math, or not"
    weight = sum(size for kind, size in fetched.values() if kind != "image")
    assert weight <= BUDGET + (MATHJAX if has_math else 0), f"{stem}: {weight / 1e6:.2f} MB without figures"
