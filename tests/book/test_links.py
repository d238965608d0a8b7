"""Every link and every file a page of the built site names resolves inside the site: no internal 404, the intro's
whole-book PDF included (make book prints it where it can, and links it only then), and every #fragment names an id
on its page. Static, no browser."""

from __future__ import annotations

import functools
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urldefrag, urlparse

import pytest

from tests.book.conftest import IN_CI, require_built_book
from tools.book import pdf
from tools.book.pdf import PDF

ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}


class _Page(HTMLParser):
    """One pass of the standard library's HTML parser over a page: its ids and anchor names, and each (tag,
    attribute) value ATTRIBUTES names, in document order. (BeautifulSoup built a tree on the same parser for this: 7x
    the CPU.)"""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        values = {name: value or "" for name, value in attrs}  # a repeated attribute: the last wins, as in bs4
        if "id" in values:
            self.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.ids.add(values["name"])
        if ATTRIBUTES.get(tag) in values:
            self.urls.append((tag, values[ATTRIBUTES[tag]]))

    handle_startendtag = handle_starttag


@functools.cache
def _parsed(page: Path) -> _Page:
    parser = _Page()
    parser.feed(page.read_text(encoding="utf-8"))
    parser.close()
    return parser


def ids(page: Path) -> frozenset[str]:
    """Every id (and old-style anchor name) on an HTML page."""
    return frozenset(_parsed(page).ids)


def broken_links(page: Path, site: Path) -> list[str]:
    """The links and file references of `page` that point inside the site at nothing (or at no such #fragment)."""
    broken = []
    for tag in ATTRIBUTES:  # grouped by tag, as the failure message always listed them
        for url in (url for named, url in _parsed(page).urls if named == tag):
            parsed = urlparse(url)
            if parsed.scheme or parsed.netloc or url.startswith(("mailto:", "javascript:")):
                continue  # another site: not this check's business (the browser test runs offline)
            address, fragment = urldefrag(url)
            address = urlparse(address).path  # without ?digest=... (the theme's cache busting)
            target = (page.parent / unquote(address)).resolve() if address else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or site.resolve() not in target.parents:
                broken.append(f"{url} (no such file)")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in ids(target):
                broken.append(f"{url} (no such anchor)")
    return broken


def test_no_page_of_the_site_links_to_nothing():
    site = require_built_book()
    pages = [page for page in sorted(site.rglob("*.html")) if "_static" not in page.relative_to(site).parts]
    assert len(pages) > 15  # every page, not the theme's template macros copied into _static/
    found = {str(page.relative_to(site)): broken for page in pages if (broken := broken_links(page, site))}
    assert found == {}, "\n".join(f"{page}: {', '.join(links[:5])}" for page, links in found.items())


def test_the_intro_links_the_whole_book_pdf_where_the_site_holds_it():
    site = require_built_book()
    linked = f'href="../{PDF.name}"' in (site / "book" / "intro.html").read_text(encoding="utf-8")
    held = (site / PDF.name).is_file() and (site / PDF.name).read_bytes()[:5] == b"%PDF-"
    assert linked <= held, f"the intro links {PDF.name} and the site lacks it: run make pdf"
    if IN_CI:  # a fresh clone with Chromium and the test tools: make book printed and linked it
        assert linked and pdf.cannot_print() is None


@pytest.mark.parametrize("reason", [None, "no Chromium"])
def test_the_pdf_link_stays_only_where_make_book_prints_it(monkeypatch, reason):
    config = SimpleNamespace(myst_substitutions={"book_pdf": "../book.pdf", "other": "kept"})
    monkeypatch.setattr(pdf, "cannot_print", lambda: reason)
    pdf.link_only_a_printed_pdf(None, config)
    assert config.myst_substitutions == {"book_pdf": "" if reason else "../book.pdf", "other": "kept"}


def test_make_book_says_why_it_prints_no_pdf(monkeypatch, capsys):
    monkeypatch.setattr(pdf, "CHROMIUM", "/nowhere/chromium")
    monkeypatch.setattr(pdf, "print_to_pdf", lambda *args: pytest.fail("printed without Chromium"))
    pdf.main(["--with-book"])
    assert "make book: no PDF of the whole book here (no Chromium at /nowhere/chromium" in capsys.readouterr().err


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "index.html").write_text('<p id="here"><a href="#here">ok</a><a href="gone.html">x</a>'
                                         '<a href="index.html#nowhere">y</a><img src="https://example.org/a.png">'
                                         '<link href="index.html?v=1">')
    assert broken_links(tmp_path / "index.html", tmp_path) == ["gone.html (no such file)",
                                                               "index.html#nowhere (no such anchor)"]
