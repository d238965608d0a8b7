"""Each rendered page with its images stays under 2 MB."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.book.conftest import require_built_book
from tools.book.toc import toc_pages

LIMIT = 2 * 1024 * 1024


def page_weight(html: Path) -> int:
    """Bytes of an HTML page plus the local images it shows."""
    images = set(re.findall(r'<img[^>]+src="([^"]+)"', html.read_text()))
    return html.stat().st_size + sum((html.parent / src).stat().st_size for src in images if "://" not in src)


@pytest.mark.parametrize("stem", toc_pages())
def test_page_with_its_images_is_under_two_megabytes(stem):
    weight = page_weight(require_built_book() / f"{stem}.html")
    assert weight < LIMIT, f"{stem}: {weight / 1e6:.2f} MB"
