"""A reader finds their way on a phone, a tablet and a desktop: the menu and contents buttons open what they name
(with pydata-sphinx-theme 0.17.1 they did nothing below 960 px: its issue #2451)."""

from __future__ import annotations

import pytest

from tests.book.conftest import require_built_book

CHAPTER = "book/token_embeddings.html"
SHOWN = "e => e.getBoundingClientRect().width > 0 && getComputedStyle(e).visibility !== 'hidden'"


def _open_page(browser, book_url, width):
    require_built_book()
    context = browser.new_context(viewport={"width": width, "height": 800}, has_touch=width < 960)
    tab = context.new_page()
    tab.goto(f"{book_url}/{CHAPTER}")
    return context, tab


def _press(tab, selector: str, width: int) -> None:
    button = tab.locator(f"{selector}:visible").first
    button.tap() if width < 960 else button.click()
    tab.wait_for_timeout(300)


@pytest.mark.parametrize("width", [390, 768])
@pytest.mark.parametrize(("toggle", "sidebar", "link"), [
    (".primary-toggle", "#pst-primary-sidebar-modal", "a[href*='learned_positions']"),
    (".secondary-toggle", "#pst-secondary-sidebar-modal", "a[href^='#']"),
])
def test_on_phones_and_tablets_each_toggle_opens_its_sidebar(browser, book_url, width, toggle, sidebar, link):
    context, tab = _open_page(browser, book_url, width)
    assert not tab.locator(sidebar).evaluate(SHOWN)
    _press(tab, toggle, width)
    assert tab.locator(sidebar).evaluate("e => e.open"), f"{toggle} did not open {sidebar} at {width} px"
    assert tab.locator(f"{sidebar} {link}").first.is_visible()  # the chapters, or this page's sections
    context.close()


def test_on_a_desktop_the_menu_button_hides_and_shows_the_chapters(browser, book_url):
    context, tab = _open_page(browser, book_url, 1400)
    chapters = tab.locator("#pst-primary-sidebar")
    assert chapters.evaluate(SHOWN)
    _press(tab, ".primary-toggle", 1400)
    assert not chapters.evaluate(SHOWN)
    _press(tab, ".primary-toggle", 1400)
    assert chapters.evaluate(SHOWN)
    context.close()


def test_header_icons_are_drawn_by_the_web_font_without_the_icon_script(browser, book_url):
    """fontawesome.js is gone (tools/book/sphinx_fixes.py): the theme's CSS must still draw every header icon."""
    context, tab = _open_page(browser, book_url, 1400)
    icons = tab.locator(".bd-header-article i.fa-solid, .bd-header-article i.fa-brands")
    assert icons.count() >= 3
    for index in range(icons.count()):
        style = icons.nth(index).evaluate(
            "e => { const s = getComputedStyle(e, '::before'); return [s.content, s.fontFamily]; }")
        assert style[0] not in ("none", "normal", '""') and "Font Awesome" in style[1], style
    context.close()
