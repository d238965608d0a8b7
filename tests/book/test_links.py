"""Every link and every file a page of the built site names resolves inside the site: no internal 404, the intro's
whole-book PDF included (make book prints it where it can, and links it only then), and every #fragment names an id
on its page. Static, no browser."""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote, urldefrag, urlparse

import pytest
from bs4 import BeautifulSoup

from tests.book.conftest import IN_CI, require_built_book
from tools.book import pdf
from tools.book.pdf import PDF

ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}


@functools.cache
def ids(page: Path) -> frozenset[str]:
    """Every id (and old-style anchor name) on an HTML page."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return frozenset(tag["id"] for tag in soup.find_all(id=True)) | frozenset(
        tag["name"] for tag in soup.find_all("a", attrs={"name": True}))


def broken_links(page: Path, site: Path) -> list[str]:
    """The links and file references of `page` that point inside the site at nothing (or at no such #fragment)."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    broken = []
    for tag, attribute in ATTRIBUTES.items():
        for element in soup.find_all(tag, attrs={attribute: True}):
            url = element[attribute]
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
