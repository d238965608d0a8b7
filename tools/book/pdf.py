"""`python -m tools.book.pdf` (make pdf): the whole book as one PDF, Chromium printing a single-page build.

Jupyter Book's singlehtml builder writes every page of _toc.yml into one HTML page, from the same execution cache
as `make book`, with the theme's print-only title and contents at the front. Debian's Chromium, driven by
Playwright, opens it with print styles (book/_static/print.css), waits for fonts and figures (the math is MathML,
drawn by the browser), and prints it to A4 with page numbers. The PDF goes to _build/pdf/ and, when the reader's
site is built, into it as well.

`make book` prints it too (`--with-book`) where this machine can (Chromium, and Playwright from the test tools), and
says so where it cannot; as a Sphinx extension this module keeps the intro's link to the PDF (`book_pdf`) only in a
build that will hold it, so the site `make book` alone produces has no dead link.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import yaml

from tools.book.side_build import build_beside, relocated_config
from tools.book.toc import ROOT

PDF_BUILD = ROOT / "_build" / "pdf"
SINGLE_HTML = PDF_BUILD / "_build" / "singlehtml"  # where --path-output puts the singlehtml builder's output
SINGLE_PAGE = SINGLE_HTML / "book.html"  # the whole book on one page
SITE = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Flags for a closed network (as in tests/book/conftest.py): without them Chromium keeps trying Google's hosts.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]
MARGIN_MM = {"top": 16, "bottom": 16, "left": 15, "right": 15}
A4_WIDTH_MM = 210
PX_PER_MM = 96 / 25.4
# The printed column's width in CSS pixels: what a reader's browser lays the page out in when it prints.
PRINT_WIDTH_PX = round((A4_WIDTH_MM - MARGIN_MM["left"] - MARGIN_MM["right"]) * PX_PER_MM)
FOOTER = ('<div style="font-size: 9px; width: 100%; text-align: center; color: #555;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
# Everything a printed page waits for: web fonts and every figure decoded.
SETTLED = """async () => {
  await document.fonts.ready;
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  return [...document.images].filter(img => !img.naturalWidth).map(img => img.src);
}"""
# Links to other files of the build (sources, downloads) mean nothing in a PDF; links inside it and to the web stay.
# Chromium stamps each print with the time: a reprint of the same book differs from the last only there.
PRINT_TIME = re.compile(rb"/(CreationDate|ModDate) \(D:[0-9]{14}[^)]{0,12}\)")
UNLINK_LOCAL_FILES = """() => {
  for (const a of document.querySelectorAll('a[href]')) {
    const url = new URL(a.href);
    if (url.protocol === 'file:' && url.pathname !== location.pathname) a.removeAttribute('href');
  }
}"""


def book_title(root: Path = ROOT) -> str:
    """The book's title from _config.yml."""
    return yaml.safe_load((root / "_config.yml").read_text())["title"]


def pdf_name(title: str) -> str:
    """The PDF's file name from the book's title: lower case words joined by hyphens, possessive 's dropped."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"['’]s\b", "", title.lower()))
    return "-".join(words) + ".pdf"


PDF = PDF_BUILD / pdf_name(book_title())
PDF_BUILT = PDF_BUILD / ".built"  # the Makefile's stamp: `make pdf` has nothing to do after `make book` printed it


def cannot_print() -> str | None:
    """Why this machine cannot print the PDF (no Chromium, no Playwright), or None when it can."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (Debian/Ubuntu: apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "no Playwright (make test's dev set-up installs it)"
    return None


def link_only_a_printed_pdf(app, config) -> None:
    """Sphinx, config-inited: empty the intro's `book_pdf` link where `make book` cannot print the PDF."""
    if cannot_print():
        config.myst_substitutions = {**config.myst_substitutions, "book_pdf": ""}


def setup(app) -> dict:
    """Register the hook that keeps the PDF link only where the PDF is printed."""
    app.connect("config-inited", link_only_a_printed_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def build_single_page() -> Path:
    """Build the book into one HTML page (with -W, like make book) and return its path, SINGLE_PAGE."""
    if build_beside(relocated_config(), PDF_BUILD, builder="singlehtml"):
        raise SystemExit("make pdf: the single-page build failed (its warnings are above)")
    # The builder names the page after the root (book/intro.html) but writes its links relative to the build's
    # top folder (_static/..., _images/...): there is where the page must lie for its styles and figures to load.
    root_page = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
    return (SINGLE_HTML / f"{root_page}.html").replace(SINGLE_PAGE)


def print_tab(browser):
    """A new page in `browser` that shows what it loads as Chromium prints it."""
    page = browser.new_page(viewport={"width": PRINT_WIDTH_PX, "height": 1000}, color_scheme="light")
    page.emulate_media(media="print")
    return page


def open_for_print(browser, page_html: Path):
    """A new page in `browser` showing `page_html` as Chromium prints it, once fonts, math and figures have settled."""
    return show_for_print(print_tab(browser), page_html)


def show_for_print(page, page_html: Path):
    """`page_html` loaded into a print tab (one tab serves page after page), fonts, math and figures settled."""
    page.goto(page_html.as_uri(), wait_until="load")
    missing = page.evaluate(SETTLED)
    if missing:
        raise RuntimeError(f"{page_html.name}: figures that did not load: {missing}")
    return page


def print_to_pdf(page_html: Path, pdf: Path) -> None:
    """Print the single page to `pdf`: A4, page numbers in the footer, headings as the PDF's outline."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = open_for_print(browser, page_html)
        page.evaluate(UNLINK_LOCAL_FILES)
        margin = {side: f"{mm}mm" for side, mm in MARGIN_MM.items()}
        printed = pdf.with_name(f"{pdf.stem}.new.pdf")
        page.pdf(path=str(printed), format="A4", print_background=True, margin=margin, display_header_footer=True,
                 header_template="<span></span>", footer_template=FOOTER, outline=True, tagged=True)
        browser.close()
    keep_unless_changed(printed, pdf)


def keep_unless_changed(printed: Path, pdf: Path) -> None:
    """Move `printed` to `pdf`, unless `pdf` is the same book with another print time: then keep `pdf` as it is, so
    an unchanged book gives an unchanged site (the stored browser visit's key reads every byte of it)."""
    if pdf.exists() and PRINT_TIME.sub(b"", pdf.read_bytes()) == PRINT_TIME.sub(b"", printed.read_bytes()):
        printed.unlink()
    else:
        printed.replace(pdf)


def main(argv: list[str]) -> None:
    """Build the single page, print it, and put the PDF beside it and into the reader's site; with `--with-book`
    (make book), only where this machine can print it, saying so where it cannot."""
    if argv == ["--with-book"] and (reason := cannot_print()):
        print(f"make book: no PDF of the whole book here ({reason}); the intro does not link one.", file=sys.stderr)
        return
    print_to_pdf(build_single_page(), PDF)
    if (SITE / "index.html").exists():
        shutil.copy2(PDF, SITE / PDF.name)
    PDF_BUILT.touch()
    print(f"The book as one PDF is in {PDF.relative_to(ROOT)} and in the site.", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
