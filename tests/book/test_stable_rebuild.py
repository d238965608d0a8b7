"""A rebuild of an unchanged book leaves the site's bytes as they were (the stored browser visit's key reads them):
the page fixes apply once (tools/book/sphinx_fixes.py) and a reprint of the same PDF keeps the first one
(tools/book/pdf.py)."""

from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace

from tests.book.conftest import require_built_book
from tools.book.pdf import PRINT_TIME, cannot_print, keep_unless_changed
from tools.book.sphinx_fixes import fix_pages

PAGE = ('<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">'
        '<button title="Search" aria-label="Search" data-bs-placement="bottom">Search</button>'
        '<div role="list"><div class="citation" id="id1" role="doc-biblioentry">A</div>'
        '<div class="citation" id="id2" role="doc-biblioentry">B</div></div></div>')


class Attributes(HTMLParser):
    """Every start tag whose attribute names repeat."""

    def __init__(self):
        super().__init__()
        self.repeated = []

    def handle_starttag(self, tag, attrs):
        names = [name for name, _ in attrs]
        if len(names) != len(set(names)):
            self.repeated.append((tag, names))


def repeated_attributes(text: str) -> list:
    parser = Attributes()
    parser.feed(text)
    return parser.repeated


def test_the_page_fixes_apply_once_however_often_the_build_finishes(tmp_path):
    page = tmp_path / "references.html"
    page.write_text(PAGE)
    app = SimpleNamespace(outdir=str(tmp_path), builder=SimpleNamespace(format="html"))
    fix_pages(app, None)
    once = page.read_text()
    fix_pages(app, None)  # an incremental build reads the pages it did not write again
    assert page.read_text() == once
    assert once.count('role="listitem" class="citation"') == 2 and "doc-biblioentry" not in once
    assert 'aria-label="Search"' not in once and once.count('aria-label="Chapters"') == 1
    assert repeated_attributes(once) == []
    assert repeated_attributes(PAGE.replace('class="citation"', 'role="x" role="x" class="citation"'))  # it sees one


def test_no_page_of_the_built_site_repeats_an_attribute():
    site = require_built_book()
    found = {page.name: repeated for page in site.rglob("*.html")
             if (repeated := repeated_attributes(page.read_text(encoding="utf-8")))}
    assert found == {}


def printed(when: bytes, body: bytes = b"the book") -> bytes:
    return b"%PDF-1.4 /CreationDate (D:" + when + b"+00'00') /ModDate (D:" + when + b"+00'00') " + body


def test_a_reprint_of_the_same_book_keeps_the_first_pdf_and_a_changed_book_replaces_it(tmp_path):
    pdf, new = tmp_path / "book.pdf", tmp_path / "book.new.pdf"
    new.write_bytes(printed(b"20261128161914"))
    keep_unless_changed(new, pdf)  # the first print
    assert pdf.read_bytes() == printed(b"20261128161914") and not new.exists()
    new.write_bytes(printed(b"20261128171948"))  # the same book, later
    keep_unless_changed(new, pdf)
    assert pdf.read_bytes() == printed(b"20261128161914") and not new.exists()
    new.write_bytes(printed(b"20261128171948", b"the book, edited"))
    keep_unless_changed(new, pdf)
    assert pdf.read_bytes() == printed(b"20261128171948", b"the book, edited") and not new.exists()


def test_the_print_time_pattern_finds_both_stamps_chromium_wrote_into_the_site_pdf():
    pdfs = list(require_built_book().glob("*.pdf"))
    assert pdfs or cannot_print(), "make book printed no PDF although this machine can print one"
    for pdf in pdfs:
        assert [m.group(1) for m in PRINT_TIME.finditer(pdf.read_bytes())] == [b"CreationDate", b"ModDate"]
