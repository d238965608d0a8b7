"""On a phone (390 x 844) no page is wider than the screen: code, tables and display math scroll in their own box,
long inline code and links wrap (book/_static/book.css). Before that fix six pages were 401 to 513 px wide."""

from __future__ import annotations

import pytest

from tests.book.conftest import require_built_book
from tests.book.phone_visit import PAGES, PHONE, phone_visit


@pytest.mark.parametrize("stem", PAGES)
def test_no_page_is_wider_than_a_phone(browser, book_url, stem):
    """Each page loaded in one phone context (tests/book/phone_visit.py, shared with test_figures)."""
    require_built_book()
    page = phone_visit(browser, book_url)[0][stem]
    assert page.width <= PHONE["width"], (page.width, page.overflowing)


def test_no_line_starts_with_a_lone_mark_and_no_heading_breaks_its_code(visited):
    """At every width: no "." or ":" begins a line after inline code, math or a link (tools/book/sphinx_line_breaks.py),
    and no heading's code word (model.embeddings) is broken across two lines (book.css: a smaller title on a phone).
    """
    found = {(stem, width): where for stem in PAGES for width, where in visited[stem].line_starts.items() if where}
    assert found == {}
