"""The rendered book in a real browser (Debian's headless Chromium via Playwright), as a reader uses it."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest
import yaml

from tests.book.conftest import visit
from tools.book.toc import ROOT, is_notebook, toc_pages

SCREENSHOTS = ROOT / "_build" / "screenshots"
# Hosts a page may try to reach and fail offline, and why; nothing else may fail or log an error.
KNOWN_OFFLINE_HOSTS = {
    "unpkg.com": "thebe, loaded only when a reader starts live code",
}
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


@pytest.fixture
def page(browser):
    """A fresh page that records console errors, page errors and failed requests."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.problems = []

    def on_console(message):
        host = urlparse(message.location.get("url", "")).hostname or ""
        if message.type == "error" and host not in KNOWN_OFFLINE_HOSTS:
            tab.problems.append(f"console error: {message.text}")

    def on_failed(request):
        if (urlparse(request.url).hostname or "") not in KNOWN_OFFLINE_HOSTS:
            tab.problems.append(f"request failed: {request.url} ({request.failure})")

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: tab.problems.append(f"page error: {error}"))
    tab.on("requestfailed", on_failed)
    tab.on("response", lambda r: r.status >= 400 and tab.problems.append(f"HTTP {r.status}: {r.url}"))
    yield tab
    context.close()


PAGES = toc_pages()


@pytest.mark.parametrize("stem", PAGES)
def test_page_loads_without_errors_and_is_screenshotted(page, book_url, stem):
    response = page.goto(f"{book_url}/{stem}.html", wait_until="networkidle")
    assert response.ok
    assert CONFIG["title"] in page.title()
    assert page.locator("main h1").count() >= 1
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{Path(stem).name}.png"), full_page=True)
    assert page.problems == []


@pytest.mark.parametrize("stem", [p for p in PAGES if is_notebook(p)])
def test_every_figure_has_a_natural_size(page, book_url, stem):
    visit(page, f"{book_url}/{stem}.html")
    sizes = page.eval_on_selector_all("main img", "imgs => imgs.map(i => [i.src, i.naturalWidth, i.naturalHeight])")
    assert sizes, "a chapter without a single figure"
    assert [s for s in sizes if s[1] == 0 or s[2] == 0] == []


@pytest.mark.parametrize("stem", PAGES)
def test_every_internal_link_resolves(page, book_url, stem):
    visit(page, f"{book_url}/{stem}.html")
    hrefs = set(page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"))
    for href in sorted(h for h in hrefs if h.startswith(book_url)):
        target, fragment = urldefrag(href)
        response = page.request.get(target)
        assert response.ok, f"{href} -> HTTP {response.status}"
        if fragment and target.endswith(".html"):
            assert re.search(rf'id="{re.escape(fragment)}"', response.text()), f"{href}: no anchor"


def test_math_renders_offline_on_every_page_with_math(page, book_url):
    with_math = {}
    for stem in PAGES:
        visit(page, f"{book_url}/{stem}.html")
        written = page.locator("main .math").count()  # what Sphinx wrote: inline spans and display divs
        if written:  # MathML written at build time (tools/book/sphinx_mathml.py), drawn by the browser
            with_math[stem] = (written, page.locator("main .math > math").count(),
                               page.locator("main .math merror").count())
    assert "book/sum_and_layernorm" in with_math and "book/sinusoidal_encodings" in with_math, sorted(with_math)
    assert {stem: counts for stem, counts in with_math.items() if counts[1] != counts[0] or counts[2]} == {}
    assert page.problems == []


def test_search_finds_layernorm_in_the_sum_and_layernorm_chapter(page, book_url):
    visit(page, f"{book_url}/search.html?q=LayerNorm")
    page.wait_for_function("document.querySelector('#search-results')?.innerText.includes('Search finished')")
    results = page.eval_on_selector_all("#search-results a", "links => links.map(a => a.href)")
    assert any("sum_and_layernorm" in href for href in results), results
    assert page.problems == []


def test_light_and_dark_switch(page, book_url):
    visit(page, f"{book_url}/{PAGES[1]}.html")
    background = lambda: page.evaluate("getComputedStyle(document.body).backgroundColor")
    seen = {}
    for _ in range(3):  # the button cycles auto -> light -> dark (order depends on the start)
        page.click(".theme-switch-button")
        seen[page.evaluate("document.documentElement.dataset.theme")] = background()
    assert {"light", "dark"} <= set(seen)
    assert seen["light"] != seen["dark"]


@pytest.mark.parametrize("stem", [p for p in PAGES if is_notebook(p)])
def test_launch_and_download_buttons(page, book_url, stem):
    visit(page, f"{book_url}/{stem}.html")
    org_repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    hrefs = set(page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"))
    colab = f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/{stem}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{org_repo}/{branch}?urlpath=tree/{stem}.ipynb"
    assert colab in hrefs and binder in hrefs
    download = f"{book_url}/_sources/{stem}.ipynb"
    assert download in hrefs
    notebook = page.request.get(download)
    assert notebook.ok and notebook.json()["nbformat"] == 4
    assert page.locator(".btn-download-pdf-button").count() == 1
