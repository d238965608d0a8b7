"""What a reader's browser fetches: each page with its images stays under 2 MB on disk, on a desktop and on a phone
(which gets the figures' phone PNGs instead), and a cold visit (empty cache) fetches at most 1.2 MiB beside its
figures, every page alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.book.conftest import require_built_book
from tools.book.toc import toc_pages

LIMIT = 2 * 1024 * 1024
BUDGET = int(1.2 * 1024 * 1024)  # bytes of HTML, CSS, scripts and fonts a cold page fetches, uncompressed, figures
# excluded, math pages included: their math is MathML written at build time (tools/book/sphinx_mathml.py), with no
# script or font of its own (MathJax's components and fonts were 0.78-0.83 MiB of each math page's 1.7-1.9 MiB).


# A figure with a phone layout (tools/book/sphinx_phone_figures.py): the phone PNG, then the desktop PNG it replaces.
PICTURE = re.compile(r'<picture[^>]*>\s*(?:<source[^>]+srcset="([^" ]+)[^>]*>)?\s*<img[^>]+src="([^"]+)"')


def page_weight(html: Path, phone: bool = False) -> int:
    """Bytes of an HTML page plus the local images it shows on a desktop, or on a phone (its figures' phone PNGs)."""
    text = html.read_text()
    images = set(re.findall(r'<img[^>]+src="([^"]+)"', text))
    if phone:
        swaps = {desktop: narrow for narrow, desktop in PICTURE.findall(text) if narrow}
        images = {swaps.get(src, src) for src in images}
    return html.stat().st_size + sum((html.parent / src).stat().st_size for src in images if "://" not in src)


@pytest.mark.parametrize("phone", [False, True], ids=["desktop", "phone"])
@pytest.mark.parametrize("stem", toc_pages())
def test_page_with_its_images_is_under_two_megabytes(stem, phone):
    weight = page_weight(require_built_book() / f"{stem}.html", phone)
    assert weight < LIMIT, f"{stem}: {weight / 1e6:.2f} MB"


@pytest.mark.parametrize("stem", toc_pages())
def test_a_cold_visit_fetches_no_more_than_the_budget_beside_its_figures(visited, stem):
    fetched = visited[stem].fetched  # a fresh context (an empty cache), until the network was idle after the fonts
    assert not any("fontawesome.js" in url for url in fetched), "the 1.5 MB icon script is back"
    assert not any("mathjax" in url.lower() for url in fetched), "a math script is back: the math is MathML already"
    weight = sum(size for kind, size in fetched.values() if kind != "image")
    assert weight <= BUDGET, f"{stem}: {weight / 2**20:.2f} MiB without figures"
