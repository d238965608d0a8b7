"""On a phone (390 x 844) no page is wider than the screen: code, tables and display math scroll in their own box,
long inline code and links wrap (book/_static/book.css). Before that fix six pages were 401 to 513 px wide."""

from __future__ import annotations

import pytest

from tests.book.conftest import require_built_book, visit
from tools.book.toc import toc_pages

PHONE = {"width": 390, "height": 844}
PAGES = toc_pages() + ["search", "genindex"]
# What sticks out of the viewport, outside any box that scrolls: named in the failure message.
OVERFLOWING = """width => [...document.querySelectorAll('main *')]
  .filter(e => e.getBoundingClientRect().right > width + 0.5)
  .filter(e => { for (let p = e.parentElement; p; p = p.parentElement)
                   if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return false;
                 return true; })
  .map(e => `${e.tagName.toLowerCase()}.${e.className}: ${(e.textContent || '').trim().slice(0, 60)}`).slice(0, 5)"""


@pytest.fixture(scope="module")
def phone(browser):
    """One phone-sized tab for the module."""
    context = browser.new_context(viewport=PHONE, has_touch=True)
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("stem", PAGES)
def test_no_page_is_wider_than_a_phone(phone, book_url, stem):
    require_built_book()
    visit(phone, f"{book_url}/{stem}.html")
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], (width, phone.evaluate(OVERFLOWING, PHONE["width"]))


def test_no_line_starts_with_a_lone_mark_and_no_heading_breaks_its_code(visited):
    """At every width: no "." or ":" begins a line after inline code, math or a link (tools/book/sphinx_line_breaks.py),
    and no heading's code word (model.embeddings) is broken across two lines (book.css: a smaller title on a phone).
    """
    found = {(stem, width): where for stem in PAGES for width, where in visited[stem].line_starts.items() if where}
    assert found == {}
