"""make pdf and the print view: the whole book as one PDF (tools/book/pdf.py), and every page as the theme's ".pdf"
button prints it, with code wrapped, figures whole and within the page, and the chapters numbered in book order."""

from __future__ import annotations

import re

import nbformat
import pytest
import yaml

from tests.book.conftest import IN_CI, require_built_book
from tools.book.pdf import (
    MARGIN_MM,
    PDF,
    PX_PER_MM,
    SINGLE_HTML,
    SINGLE_PAGE,
    book_title,
    open_for_print,
    pdf_name,
    print_tab,
    show_for_print,
)
from tools.book.toc import ROOT, is_notebook, toc_pages

PAGES = range(100, 400)  # eight chapters and an appendix: fewer means lost pages, more means runaway output
A4_HEIGHT_MM = 297
PRINT_HEIGHT_PX = (A4_HEIGHT_MM - MARGIN_MM["top"] - MARGIN_MM["bottom"]) * PX_PER_MM
CUT_CODE = "() => [...document.querySelectorAll('pre')].filter(p => p.scrollWidth > p.clientWidth + 1).length"
FIGURE_SIZES = """() => [[...document.querySelectorAll('.bd-article')].map(a => a.clientWidth)[0],
  [...document.images].filter(img => img.offsetParent).map(img => [img.src.split('/').pop(), img.width, img.height])]"""
CHAPTER_HEADINGS = """() => [...document.querySelectorAll('span[id^="document-"] + section > h2')]
  .map(h => h.innerText.trim())"""


def source_title(page: str) -> str:
    """A page's title as its source writes it (a notebook's first cell, a Markdown page's first line), as plain text."""
    path = ROOT / f"{page}.ipynb" if is_notebook(page) else ROOT / f"{page}.md"
    text = nbformat.read(path, as_version=4).cells[0].source if is_notebook(page) else path.read_text()
    return re.search(r"^# (.+)$", text, re.M).group(1).replace("`", "")


def numbered_titles() -> list[str]:
    """Every page after the root, in _toc.yml's order, titled as the reader sees it: "2. Title" in numbered parts."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    titles, number = [], 0
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            number += bool(part.get("numbered"))
            prefix = f"{number}. " if part.get("numbered") else ""
            titles.append(prefix + source_title(chapter["file"]))
    assert [page for part in toc["parts"] for page in (c["file"] for c in part["chapters"])] == toc_pages()[1:]
    return titles


def plain(text: str) -> str:
    """Text compared across HTML and PDF: typographic apostrophes as ASCII, no whitespace (lines wrap anywhere)."""
    return re.sub(r"\s+", "", text.replace("’", "'"))


def test_the_pdf_is_named_after_the_book_and_the_intro_links_that_name():
    assert pdf_name("BERT's First Vectors") == "bert-first-vectors.pdf"
    assert pdf_name("The T5 Book: Buckets") == "the-t5-book-buckets.pdf"
    assert PDF.name == pdf_name(book_title())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["parse"]["myst_substitutions"]["book_pdf"] == f"../{PDF.name}", "the PDF lies beside index.html"
    assert "book_pdf" in (ROOT / "book" / "intro.md").read_text()
    intro = require_built_book() / "book" / "intro.html"
    assert f'<a href="../{PDF.name}">' in intro.read_text(), "the built intro links the PDF"


@pytest.fixture(scope="module")
def single_page(browser):
    """The whole book's single page (make pdf builds it) as Chromium prints it."""
    require_built_book(SINGLE_HTML, "pdf")
    page = open_for_print(browser, SINGLE_PAGE)
    yield page
    page.close()


def test_the_single_page_numbers_every_chapter_in_book_order(single_page):
    headings = single_page.evaluate(CHAPTER_HEADINGS)
    assert [plain(h) for h in headings] == [plain(t) for t in numbered_titles()]


def test_no_code_box_is_cut_at_the_page_edge_in_the_whole_book(single_page):
    assert single_page.evaluate("() => document.querySelectorAll('pre').length") > 100  # the check sees code
    assert single_page.evaluate(CUT_CODE) == 0


def test_every_figure_fits_on_one_printed_page_in_the_whole_book(single_page):
    column, figures = single_page.evaluate(FIGURE_SIZES)
    assert len(figures) >= 20  # the chapters' figures, not just an icon
    too_large = [name for name, width, height in figures if width > column + 1 or height > PRINT_HEIGHT_PX]
    assert not too_large, f"wider than the {column}px column or taller than a page: {too_large}"


@pytest.fixture(scope="module")
def print_view(browser):
    """One print tab for every page, as the ".pdf" button prints each (a new context per page: 3x the CPU)."""
    page = print_tab(browser)
    yield page
    page.close()


@pytest.mark.parametrize("stem", toc_pages())
def test_a_pages_print_view_cuts_no_code_and_no_figure(print_view, stem):
    page = show_for_print(print_view, require_built_book() / f"{stem}.html")
    cut_code = page.evaluate(CUT_CODE)
    column, figures = page.evaluate(FIGURE_SIZES)
    assert cut_code == 0, f"{stem}: {cut_code} code boxes cut at the page edge when printed"
    assert all(width <= column + 1 for _, width, _ in figures), f"{stem}: a figure wider than the page"


@pytest.fixture(scope="module")
def pdf():
    """The book's PDF, read with pypdf (requirements-dev.txt)."""
    try:
        import pypdf
    except ImportError:
        if IN_CI:
            pytest.fail("pypdf is not installed: pip install -r requirements-dev.txt")
        pytest.skip("pypdf is not installed: pip install -r requirements-dev.txt")
    require_built_book(SINGLE_HTML, "pdf")
    return pypdf.PdfReader(PDF)


def outline_entries(pdf, outline=None) -> list:
    """Every entry of the PDF's outline (its bookmarks), depth first."""
    entries = []
    for item in pdf.outline if outline is None else outline:
        entries += outline_entries(pdf, item) if isinstance(item, list) else [item]
    return entries


def test_the_pdf_has_a_book_length_and_numbers_its_pages(pdf):
    count = len(pdf.pages)
    assert count in PAGES
    # Chromium's footer counts the pages it printed; the file must hold exactly those.
    assert re.search(rf"\b{count} / {count}\b", pdf.pages[-1].extract_text())


def test_the_pdf_has_every_chapter_title_with_its_number_in_book_order(pdf):
    bookmarks = {plain(entry.title): pdf.get_destination_page_number(entry) for entry in outline_entries(pdf)}
    found = []
    for title in numbered_titles():
        assert plain(title) in bookmarks, f"{title!r} has no bookmark in the PDF"
        page = bookmarks[plain(title)]
        assert plain(title) in plain(pdf.pages[page].extract_text()), f"{title!r} is not on its page {page + 1}"
        found.append(page)
    assert found == sorted(found) and found[0] > 0, f"chapters out of book order (pages {found})"


def test_every_figure_is_printed_whole_on_one_page(pdf, single_page):
    figures = single_page.evaluate(FIGURE_SIZES)[1]
    # A figure split across a page break is drawn on both pages.
    drawn = sum(xobject.get_object()["/Subtype"] == "/Image"
                for page in pdf.pages for xobject in page["/Resources"].get("/XObject", {}).values())
    assert drawn == len(figures)


def test_the_site_holds_the_same_pdf():
    require_built_book(SINGLE_HTML, "pdf")
    site = require_built_book()
    assert (site / PDF.name).read_bytes() == PDF.read_bytes(), "make pdf copies the PDF into _build/html/"
