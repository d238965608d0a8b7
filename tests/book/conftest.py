"""The built HTML book as tests see it: where it is, a local server for it (`book_url`), one headless Chromium for
the session (`browser`), and each page loaded once for the read-only checks of several modules (`visited`): as a
desktop reader's cold visit shows it (test_browser, test_page_weight, test_math), then narrowed from a desktop's to
a phone's width in light and dark mode (test_layout's measures, test_accessibility's axe-core runs)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tools.book.pdf import CHROMIUM, CHROMIUM_ARGS  # the browser that prints the PDF runs the tests
from tools.book.toc import ROOT, toc_pages
from tools.environment import venv_environment

HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Hosts a page may try to reach and fail offline, and why; nothing else may fail or log an error.
KNOWN_OFFLINE_HOSTS = {
    "unpkg.com": "thebe, loaded only when a reader starts live code",
}
DESKTOP = {"width": 1280, "height": 900}
AXE = ROOT / "tests" / "book" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
THEMES = ["light", "dark"]
WIDTHS = [1280, 768, 390]  # a desktop's, a tablet's and a phone's
RESIZE_SETTLES_MS = 400
# The theme button's effect without a reload: pydata-sphinx-theme keys its colours on <html data-theme>.
SET_THEME = """theme => { Object.assign(document.documentElement.dataset, {theme, mode: theme});
  return getComputedStyle(document.body).backgroundColor; }"""
# Colours switch at once, so axe measures the theme's final colours, not a transition's midpoint.
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; animation: none !important; }"
# Each figure: its rendered and its natural shape; each box: its share of width out of sight, and its affordances.
LAYOUT = """async () => {
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  window.bookLabelScrollers?.();
  const figures = [...document.querySelectorAll('main img')].filter(img => img.offsetParent && img.naturalWidth)
    .map(img => ({name: img.src.split('/').pop(), drawn: img.width / img.height,
                  natural: img.naturalWidth / img.naturalHeight, size: `${img.width}x${img.height}`}));
  const boxes = [...document.querySelectorAll('main pre, main .bd-article .math')]
    .filter(box => box.offsetParent && box.scrollWidth > 0)
    .map(box => ({text: box.textContent.trim().slice(0, 50),
                  hidden: Math.max(0, box.scrollWidth - box.clientWidth) / box.scrollWidth,
                  focusable: box.tabIndex === 0 && !!box.getAttribute('aria-label'),
                  shadow: getComputedStyle(box).backgroundImage !== 'none'}));
  return {figures, boxes};
}"""
VISITED_PAGES = toc_pages() + ["search", "genindex"]  # index.html only redirects to the root page
# Each formula: drawn by the browser as MathML (an element of MathMLElement with a size), not left as TeX.
DRAWN = """() => [...document.querySelectorAll('.bd-article .math')].map(box => {
  const math = box.querySelector(':scope > math');
  const rect = math?.getBoundingClientRect();
  return {tex: box.textContent.slice(0, 40), native: math instanceof MathMLElement,
          drawn: !!rect && rect.width > 0 && rect.height > 0, raw: /\\\\[a-zA-Z]/.test(box.textContent)};
})"""


def require_built_book(folder: Path = HTML, target: str = "book") -> Path:
    """A built book's folder (`make <target>` builds it); skip (or, in CI, fail) with the reason when it is missing."""
    if (folder / "index.html").exists():
        return folder
    reason = f"the {target} is not built: run `make {target}` first (make test does)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def venv_first(monkeypatch):
    """The book's python3 kernel runs the first `python` on PATH: put this venv's first, as make does."""
    monkeypatch.setenv("PATH", venv_environment()["PATH"])


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def book_url():
    """Serve _build/html on a free localhost port for the session; yield its base URL."""
    directory = require_built_book()
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def visit(tab, url: str):
    """Open `url` in `tab` and return its response once the page, its images and its fonts have loaded.

    Playwright's "networkidle" adds half a second of quiet to every load; the tests that need every request settled
    (failed requests, bytes fetched) still wait for it, the others only for what they measure.
    """
    response = tab.goto(url, wait_until="load")
    tab.evaluate("document.fonts.ready.then(() => null)")
    return response


def _chromium_or_skip():
    if Path(CHROMIUM).exists():
        return CHROMIUM
    reason = f"Chromium not found at {CHROMIUM}: apt-get install chromium chromium-driver (.ci/run does in CI)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session."""
    executable = _chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def record_problems(tab) -> list[str]:
    """The console errors, page errors, failed requests and HTTP errors `tab` will see, as a list that grows."""
    problems: list[str] = []

    def on_console(message):
        host = urlparse(message.location.get("url", "")).hostname or ""
        if message.type == "error" and host not in KNOWN_OFFLINE_HOSTS:
            problems.append(f"console error: {message.text}")

    def on_failed(request):
        if (urlparse(request.url).hostname or "") not in KNOWN_OFFLINE_HOSTS:
            problems.append(f"request failed: {request.url} ({request.failure})")

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("requestfailed", on_failed)
    tab.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    return problems


@dataclass
class PageVisit:
    """What one cold visit of a page showed: at 1280 x 900 once the network was idle (for the checks that only read
    the page), then narrowed to each width and measured and checked by axe-core in each theme."""

    ok: bool  # the page's own response
    title: str
    h1: int  # headings in <main>
    fetched: dict[str, tuple[str, int]]  # url -> (resource type, body bytes) once the network was idle
    images: list[list]  # [src, naturalWidth, naturalHeight] of each <main> image
    hrefs: list[str]  # every a[href], resolved, sorted, once each
    pdf_buttons: int
    math: tuple[int, int, int]  # <main> .math boxes, those holding a <math>, MathML errors
    formulas: tuple[int, int]  # .math boxes in the article, elements there a screen reader reads as math
    drawn: list[dict]  # DRAWN on the article's formulas
    problems: list[str]  # console and page errors, failed requests, until the screenshot was taken
    layout: dict[int, dict] = field(default_factory=dict)  # width -> LAYOUT's {"figures", "boxes"}, light mode
    axe: dict[tuple[int, str], list[dict]] = field(default_factory=dict)  # (width, theme) -> violations, if axe
    backgrounds: set[str] = field(default_factory=set)  # the body's background in each theme


def page_visit(browser, url: str, screenshot: Path | None) -> PageVisit:
    """Load `url` in a fresh context (an empty cache) in light mode, let the network settle, read it, screenshot it;
    then at each width, once the theme has re-marked its scrolling boxes, measure it and run axe in each theme."""
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script("localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');")
    tab = context.new_page()
    problems = record_problems(tab)
    fetched: dict[str, tuple[str, int]] = {}
    tab.on("requestfinished", lambda r: fetched.__setitem__(r.url, (r.resource_type, r.sizes()["responseBodySize"])))
    response = tab.goto(url, wait_until="networkidle")
    tab.evaluate("() => document.fonts.ready")
    tab.wait_for_load_state("networkidle")  # the icon fonts the page asked for
    main = tab.locator("main")
    found = PageVisit(
        ok=response.ok, title=tab.title(), h1=main.locator("h1").count(), fetched=dict(fetched),
        images=tab.eval_on_selector_all("main img", "imgs => imgs.map(i => [i.src, i.naturalWidth, i.naturalHeight])"),
        hrefs=sorted(set(tab.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"))),
        pdf_buttons=tab.locator(".btn-download-pdf-button").count(),
        math=tuple(main.locator(selector).count() for selector in (".math", ".math > math", ".math merror")),
        formulas=(tab.locator(".bd-article .math").count(),  # the page's own text, not its contents list
                  tab.locator(".bd-article").get_by_role("math", include_hidden=True).count()),
        drawn=tab.evaluate(DRAWN), problems=problems)
    if screenshot:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(screenshot), full_page=True)
    found.problems = list(problems)
    if AXE.exists():  # test_accessibility skips (or in CI fails) without it; the other checks do not need it
        tab.add_script_tag(path=str(AXE))
    tab.add_style_tag(content=NO_TRANSITIONS)
    for width in WIDTHS:
        tab.set_viewport_size({"width": width, "height": DESKTOP["height"]})
        tab.wait_for_timeout(RESIZE_SETTLES_MS)  # the theme re-marks scrolling boxes 300 ms after a resize
        tab.evaluate("() => window.bookLabelScrollers?.()")
        for theme in THEMES:
            found.backgrounds.add(tab.evaluate(SET_THEME, theme))
            if theme == "light":
                found.layout[width] = tab.evaluate(LAYOUT)
            if AXE.exists():
                found.axe[width, theme] = tab.evaluate(
                    "() => axe.run(document, {resultTypes: ['violations']})")["violations"]
    context.close()
    return found


@pytest.fixture(scope="session")
def visited(browser, book_url) -> dict[str, PageVisit]:
    """Every page of the book (and its search and index pages), each loaded once: see PageVisit."""
    shots = {stem: SCREENSHOTS / f"{Path(stem).name}.png" for stem in toc_pages()}
    return {stem: page_visit(browser, f"{book_url}/{stem}.html", shots.get(stem)) for stem in VISITED_PAGES}
