"""The rendered book in a real browser (Debian's headless Chromium via Playwright), as a reader uses it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest
import yaml

from tests.book.conftest import DESKTOP, SCREENSHOTS, record_problems, visit
from tools.book.toc import ROOT, is_notebook, toc_pages

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


@pytest.fixture
def page(browser):
    """A fresh page that records console errors, page errors and failed requests."""
    context = browser.new_context(viewport=DESKTOP)
    tab = context.new_page()
    tab.problems = record_problems(tab)
    yield tab
    context.close()


@pytest.fixture(scope="module")
def fetch(browser):
    """GET a URL of the served book, once per URL for the module: (ok, HTTP status, body text)."""
    context = browser.new_context()
    seen: dict[str, tuple[bool, int, str]] = {}

    def get(url: str) -> tuple[bool, int, str]:
        if url not in seen:
            response = context.request.get(url)
            seen[url] = (response.ok, response.status, response.text())
        return seen[url]

    yield get
    context.close()


PAGES = toc_pages()


def test_a_failed_request_is_a_problem_and_an_image_the_browser_cancelled_is_not(page, book_url):
    """record_problems: a refused request is reported; an image load the browser itself aborted is not."""
    page.route("**/cancelled.png", lambda route: route.abort("aborted"))
    page.route("**/refused.png", lambda route: route.abort("connectionrefused"))
    page.goto(f"{book_url}/intro.html")
    page.set_content(f'<img src="{book_url}/cancelled.png"><img src="{book_url}/refused.png">')
    assert [p for p in page.problems if "refused.png" in p], page.problems
    assert not [p for p in page.problems if "cancelled.png" in p], page.problems


@pytest.mark.parametrize("stem", PAGES)
def test_page_loads_without_errors_and_is_screenshotted(visited, stem):
    seen = visited[stem]  # loaded until the network was idle, then screenshotted (tests/book/conftest.py)
    assert seen.ok
    assert CONFIG["title"] in seen.title
    assert seen.h1 >= 1
    assert (SCREENSHOTS / f"{Path(stem).name}.jpg").exists()
    assert seen.problems == []


@pytest.mark.parametrize("stem", [p for p in PAGES if is_notebook(p)])
def test_every_figure_has_a_natural_size(visited, stem):
    sizes = visited[stem].images
    assert sizes, "a chapter without a single figure"
    assert [s for s in sizes if s[1] == 0 or s[2] == 0] == []


@pytest.mark.parametrize("stem", PAGES)
def test_every_internal_link_resolves(visited, fetch, book_url, stem):
    for href in (h for h in visited[stem].hrefs if h.startswith(book_url)):
        target, fragment = urldefrag(href)
        ok, status, text = fetch(target)
        assert ok, f"{href} -> HTTP {status}"
        if fragment and target.endswith(".html"):
            assert re.search(rf'id="{re.escape(fragment)}"', text), f"{href}: no anchor"


def test_math_renders_offline_on_every_page_with_math(visited):
    with_math = {stem: visited[stem].math for stem in PAGES if visited[stem].math[0]}  # what Sphinx wrote
    # MathML written at build time (tools/book/sphinx_mathml.py), drawn by the browser
    assert "book/sum_and_layernorm" in with_math and "book/sinusoidal_encodings" in with_math, sorted(with_math)
    assert {stem: counts for stem, counts in with_math.items() if counts[1] != counts[0] or counts[2]} == {}
    assert {stem: visited[stem].problems for stem in PAGES if visited[stem].problems} == {}


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
def test_launch_and_download_buttons(visited, fetch, book_url, stem):
    org_repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    hrefs = set(visited[stem].hrefs)
    colab = f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/{stem}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{org_repo}/{branch}?urlpath=tree/{stem}.ipynb"
    assert colab in hrefs and binder in hrefs
    download = f"{book_url}/_sources/{stem}.ipynb"
    assert download in hrefs
    ok, _, notebook = fetch(download)
    assert ok and json.loads(notebook)["nbformat"] == 4
    assert visited[stem].pdf_buttons == 1
