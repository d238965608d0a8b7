"""Every page of the built book as a phone shows it (390 x 844, three device pixels per CSS pixel, touch), loaded once
in one cold context for the three modules that read it: test_phone_width (how wide each page lays out), test_figures
(each figure as shown, and every URL the phone fetched) and test_diagram_text (each named figure's shown width). Each
of them loaded the same pages at a phone's width in a context of its own: 38 page loads, now 22."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tests.book.conftest import visit
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
# What each cell-output figure shows: its link, the image it shows and its pixels, its displayed and set widths (the
# desktop PNG's CSS width), the width the desktop PNG alone would take there, and what its <picture> says of both.
MEASURE = """() => [...document.querySelectorAll('.cell_output img')].map(img => {
  const picture = img.closest('picture'), source = picture?.querySelector('source');
  const probe = Object.assign(document.createElement('img'), {alt: ''});  // the desktop PNG alone, in this place
  probe.style.width = img.style.width;
  (picture || img).after(probe);
  const desktopWidth = probe.getBoundingClientRect().width;
  probe.remove();
  return {desktopWidth, alt: img.alt, src: img.src, shown: img.currentSrc, link: img.closest('a')?.href ?? null,
    width: img.width, naturalWidth: img.naturalWidth,
    setWidth: parseFloat(img.style.width) || Number(img.getAttribute('width')) || null,
    textPx: picture ? Number(picture.dataset.textPx) : null,
    phoneSrc: source ? new URL(source.srcset.split(' ')[0], location.href).href : null,
    phoneTextPx: source ? Number(picture.dataset.phoneTextPx) : null,
    phoneWidth: source ? Number(picture.dataset.phoneWidth) : null};
})"""
# Each named figure's first image: its shown width and its natural size.
NAMED = """() => Object.fromEntries([...document.querySelectorAll('figure[id]')].map(figure => {
  const img = figure.querySelector('img');
  return [figure.id, img && [img.getBoundingClientRect().width, img.naturalWidth, img.naturalHeight]];
}))"""


@dataclass
class PhonePage:
    """One page on the phone: its laid-out width, what sticks out when it is too wide, its figures (MEASURE) and
    its named figures (NAMED)."""

    width: int
    overflowing: list[str]
    figures: list[dict]
    named: dict[str, list[float] | None]


@functools.cache
def phone_visit(browser, book_url: str) -> tuple[dict[str, PhonePage], list[str]]:
    """({page: PhonePage} for PAGES, every URL the phone fetched), once per browser and site in a session."""
    context = browser.new_context(viewport=PHONE, device_scale_factor=3, has_touch=True)
    tab = context.new_page()
    fetched: list[str] = []
    tab.on("requestfinished", lambda request: fetched.append(request.url))
    pages = {}
    for stem in PAGES:
        visit(tab, f"{book_url}/{stem}.html")
        width = tab.evaluate("document.documentElement.scrollWidth")
        overflowing = tab.evaluate(OVERFLOWING, PHONE["width"]) if width > PHONE["width"] else []
        pages[stem] = PhonePage(width, overflowing, tab.evaluate(MEASURE), tab.evaluate(NAMED))
    context.close()
    return pages, fetched
