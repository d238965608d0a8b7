"""The built HTML book as tests see it: where it is, a local server for it (`book_url`), one headless Chromium for
the session (`browser`), and each page loaded once for the read-only checks of several modules (`visited`): as a
desktop reader's cold visit shows it (test_browser, test_page_weight, test_math), then narrowed from a desktop's to
a phone's width in light and dark mode (test_layout's measures, test_accessibility's axe-core runs)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.book.visit_store import CODE, VisitStore, chromium_version, key_parts, replay_or_visit
from tools.book.pdf import CHROMIUM, CHROMIUM_ARGS, SETTLED  # the browser that prints the PDF runs tests
from tools.book.toc import ROOT, toc_pages
from tools.environment import venv_environment
from tools.testing import pytest_visit_cache as visit_cache

HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() == "true"
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Hosts a page may try to reach and fail offline, and why; nothing else may fail or log an error.
KNOWN_OFFLINE_HOSTS = {
    "unpkg.com": "thebe, loaded only when a reader starts live code",
}
DESKTOP = {"width": 1280, "height": 900}
AXE = ROOT / "tests" / "book" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("critical", "serious")  # the impacts test_accessibility fails on
# axe-core on the page, only the rules that can fail test_accessibility: those axe runs by default (enabled, not
# experimental) whose impact is serious or critical. axe gives each finding its rule's impact, so the moderate and
# minor rules left out (region, heading-order, the landmark-* rules, ...) can never fail it: they cost a sixth of axe.
AXE_RUN = f"""() => axe.run(document, {{resultTypes: ['violations'], runOnly: {{type: 'rule',
  values: axe._audit.rules.filter(rule => rule.enabled !== false && !rule.tags.includes('experimental')
                                  && {list(BLOCKING)}.includes(rule.impact)).map(rule => rule.id)}}}})"""
THEMES = ["light", "dark"]
WIDTHS = [1280, 768, 390]  # a desktop's, a tablet's and a phone's
POLL_MS = 20
SETTLE_TIMEOUT_S = 30  # as Playwright's own waits
# After a resize: two animation frames, so that layout and paint have run at the new width.
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# The theme button's effect without a reload: pydata-sphinx-theme keys its colours on <html data-theme>.
SET_THEME = """theme => { Object.assign(document.documentElement.dataset, {theme, mode: theme});
  return getComputedStyle(document.body).backgroundColor; }"""
# Colours switch at once, so axe measures the theme's final colours, not a transition's midpoint; a table's text can
# be hidden to photograph what is painted behind it (table_contrast).
NO_TRANSITIONS = """*, *::before, *::after { transition: none !important; animation: none !important; }
  .measuring-contrast .cell_output .text_html table { color: transparent !important; }
  .measuring-contrast [data-floats] { visibility: hidden !important; }"""
# What floats over the page (fixed or sticky: the header bar, the back-to-top button) and holds no table is marked, so
# that a table taller than the window is photographed without what scrolls over it.
MARK_FLOATS = """() => { for (const e of document.querySelectorAll('body *')) {
  const where = getComputedStyle(e).position;
  const floats = where === 'fixed' || where === 'sticky';
  if (floats && !e.querySelector('[data-contrast-box]')) e.dataset.floats = ''; } }"""
# Each HTML output table (a ResultTable; axe leaves their contrast "to review" over the scroll edges' gradients): its
# box, marked for a screenshot, and each cell's text colour and the rectangle of its text inside the box's view.
TABLE_CELLS = """() => [...document.querySelectorAll('.bd-article .cell_output .text_html')]
  .filter(box => box.querySelector('table') && box.offsetParent).map((box, index) => {
    box.dataset.contrastBox = index;
    const view = box.getBoundingClientRect();
    const cells = [...box.querySelectorAll('th, td')].filter(cell => cell.textContent.trim()).map(cell => {
      const range = document.createRange();
      range.selectNodeContents(cell);
      const text = range.getBoundingClientRect();
      const left = Math.max(text.left, view.left + box.clientLeft), top = Math.max(text.top, view.top);
      const right = Math.min(text.right, view.left + box.clientLeft + box.clientWidth);
      const bottom = Math.min(text.bottom, view.top + box.clientHeight);
      return {text: cell.textContent.trim().slice(0, 30), colour: getComputedStyle(cell).color,
              box: [left - view.left, top - view.top, right - view.left, bottom - view.top]};
    }).filter(cell => cell.box[2] - cell.box[0] >= 1 && cell.box[3] - cell.box[1] >= 1);
    return {index, cells};
  })"""
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
# Where a line breaks badly: punctuation that follows inline code, math or a link at the start of the next line, and a
# heading's code word (no space in it) broken across two lines.
LINE_STARTS = r"""() => {
  const found = [];
  for (const element of document.querySelectorAll('.bd-article :is(code.literal, span.math, a)')) {
    const next = element.nextSibling;
    if (!next || next.nodeType !== Node.TEXT_NODE || !/^[.,:;!?)]/.test(next.data)) continue;
    const range = document.createRange();
    range.setStart(next, 0);
    range.setEnd(next, 1);
    const mark = range.getClientRects()[0], rects = element.getClientRects(), last = rects[rects.length - 1];
    if (mark && last && mark.top >= last.bottom - 1)
      found.push(`${element.textContent.trim().slice(-24)} / ${next.data[0]}`);
  }
  for (const code of document.querySelectorAll('.bd-article :is(h1, h2, h3) code.literal'))
    if (code.getClientRects().length > 1 && !/\s/.test(code.textContent.trim()))  // inside a word, not at a space
      found.push(`heading: ${code.textContent.trim()}`);
  return found;
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


@contextlib.contextmanager
def serve(directory: Path):
    """Serve `directory` on a free localhost port; yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def book_url():
    """Serve _build/html on a free localhost port for the session; yield its base URL."""
    with serve(require_built_book()) as url:
        yield url


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
        if (urlparse(request.url).hostname or "") in KNOWN_OFFLINE_HOSTS:
            return
        if request.resource_type == "image" and "ERR_ABORTED" in (request.failure or ""):
            return  # Chromium cancelled it (hypothesis: a <picture> source changed mid-load); a 404 is caught below
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
    tables: dict[tuple[int, str], list[tuple[str, float]]] = field(default_factory=dict)  # table_contrast's
    line_starts: dict[int, list[str]] = field(default_factory=dict)  # width -> LINE_STARTS, light mode


def settle(tab, pending: set) -> None:
    """Wait until the page's fonts and images are in and none of the requests `tab` started (`pending`, kept by its
    request events) is still open: what Playwright's "networkidle" waits for, without its half second of quiet."""
    tab.evaluate(SETTLED)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tab.url}: requests still open after {SETTLE_TIMEOUT_S} s: {[r.url for r in pending]}")
        tab.wait_for_timeout(POLL_MS)  # lets Playwright deliver the request events that empty `pending`
        if not pending:
            tab.evaluate(SETTLED)  # what the last responses asked for (a font's glyphs) is requested by now


def _rgb(css_colour: str) -> tuple[float, float, float]:
    """An `rgb(r, g, b)` or `rgba(...)` computed colour as matplotlib's 0..1 triple."""
    return tuple(float(v) / 255 for v in re.findall(r"[\d.]+", css_colour)[:3])


def table_contrast(tab) -> list[tuple[str, float]]:
    """Each visible cell of each HTML output table: its text and the lowest WCAG contrast of its text colour against
    any pixel painted behind its text (photographed with the text hidden), by helpers.plots.contrast_ratio."""
    from PIL import Image

    from helpers.plots import contrast_ratio

    found, tables = [], tab.evaluate(TABLE_CELLS)
    if not tables:
        return found
    tab.evaluate(MARK_FLOATS)
    tab.evaluate("() => document.documentElement.classList.add('measuring-contrast')")  # changes no layout
    shots = [tab.locator(f'[data-contrast-box="{table["index"]}"]').screenshot(caret="initial") for table in tables]
    tab.evaluate("() => document.documentElement.classList.remove('measuring-contrast')")
    for table, shot in zip(tables, shots, strict=True):
        pixels = Image.open(io.BytesIO(shot)).convert("RGB")
        for cell in table["cells"]:
            left, top, right, bottom = (round(v) for v in cell["box"])
            behind = {colour for _, colour in pixels.crop((left, top, right, bottom)).getcolors(1 << 16) or []}
            text = _rgb(cell["colour"])
            found.append((cell["text"], min(contrast_ratio(text, tuple(v / 255 for v in c)) for c in behind)))
    tab.evaluate("() => window.scrollTo(0, 0)")  # back at the top, where the theme hides its back-to-top button
    tab.evaluate(FRAMES)
    return found


def page_visit(browser, url: str, screenshot: Path | None) -> PageVisit:
    """Load `url` in a fresh context (an empty cache) in light mode, let the network settle, read it, screenshot it;
    then at each width, once the book has re-marked its scrolling boxes, measure it, its tables' contrast and its
    line starts, and run axe in each theme. Every wait is on an event (load, fonts, images, the open requests, two
    animation frames), never a fixed time: a fixed time is too long on a fast machine and too short on a busy one."""
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script("localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');")
    tab = context.new_page()
    problems = record_problems(tab)
    fetched: dict[str, tuple[str, int]] = {}
    pending: set = set()
    tab.on("request", lambda r: pending.add(r))
    tab.on("requestfailed", lambda r: pending.discard(r))
    tab.on("requestfinished", lambda r: pending.discard(r))
    tab.on("requestfinished", lambda r: fetched.__setitem__(r.url, (r.resource_type, r.sizes()["responseBodySize"])))
    response = tab.goto(url, wait_until="load")
    settle(tab, pending)
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
        tab.screenshot(path=str(screenshot), full_page=True, type="jpeg", quality=80)  # a PNG takes 3x as long
    found.problems = list(problems)
    if AXE.exists():  # test_accessibility skips (or in CI fails) without it; the other checks do not need it
        tab.add_script_tag(path=str(AXE))
    tab.add_style_tag(content=NO_TRANSITIONS)
    for width in WIDTHS:
        tab.set_viewport_size({"width": width, "height": DESKTOP["height"]})
        tab.evaluate(FRAMES)
        # The book marks its scrolling boxes now (the theme's own tab stops follow 300 ms later and agree with it).
        tab.evaluate("() => window.bookLabelScrollers?.()")
        for theme in THEMES:
            found.backgrounds.add(tab.evaluate(SET_THEME, theme))
            if theme == "light":
                found.layout[width] = tab.evaluate(LAYOUT)
                found.line_starts[width] = tab.evaluate(LINE_STARTS)
            if AXE.exists():
                found.axe[width, theme] = tab.evaluate(AXE_RUN)["violations"]
            found.tables[width, theme] = table_contrast(tab)  # after axe: it scrolls to each table
    context.close()
    return found


@pytest.fixture(scope="session")
def visited(request, book_url) -> dict[str, PageVisit]:
    """Every page of the book (and its search and index pages), each loaded once: see PageVisit. With `--visit-cache
    DIR`, loaded from DIR when this site was visited by this code and browser (tests/book/visit_store.py)."""
    shots = {stem: SCREENSHOTS / f"{Path(stem).name}.jpg" for stem in toc_pages()}

    def visit_all() -> dict[str, PageVisit]:
        browser = request.getfixturevalue("browser")
        return {stem: page_visit(browser, f"{book_url}/{stem}.html", shots.get(stem)) for stem in VISITED_PAGES}

    folder = visit_cache.folder(request.config)
    chromium = chromium_version(CHROMIUM) if folder else None  # nothing is read or run without the option
    store = VisitStore(folder, key_parts(HTML, CODE, AXE, chromium, VISITED_PAGES)) if folder and chromium else None
    visits, line = replay_or_visit(store, visit_all, PageVisit, book_url, list(shots.values()))
    if line:
        visit_cache.note(request.config, line, store.path)
    return visits
