"""axe-core (pinned in tests/book/axe/package.json, installed by `make test`'s set-up with `npm ci`) on every page of
the built book at a phone's, a tablet's and a desktop's width (390, 768, 1280 px), in light and in dark mode, with
every rule that can find a serious or critical violation (conftest.AXE_RUN): no critical or serious violation the
book controls (a box that scrolls only on a phone must still take keyboard focus). Each page loads once; the window
narrows and the theme switches in place (conftest.py's `visited`). One that lives in the pinned theme's own markup,
out of reach of book.css and tools/book/sphinx_fixes.py, goes in ALLOWED with the reason (none does today); the list
must stay true (an entry that no page shows any more fails too)."""

from __future__ import annotations

import pytest

from tests.book.conftest import (
    AXE,
    AXE_RUN,
    BLOCKING,
    FRAMES,
    IN_CI,
    NO_TRANSITIONS,
    SET_THEME,
    THEMES,
    VISITED_PAGES,
    require_built_book,
    table_contrast,
    visit,
)
from tools.book.toc import ROOT

PAGES = VISITED_PAGES  # the book's pages, search and genindex (index.html only redirects to the root page)
# (rule, CSS selector axe reports) -> why the book leaves it: markup the pinned theme writes, out of CSS's reach.
ALLOWED: dict[tuple[str, str], str] = {}
AA_TEXT = 4.5  # WCAG 2.x, level AA, body text
# The pages whose cells show HTML tables (ResultTable): axe leaves their contrast to review over the scroll edges.
TABLE_PAGES = {"book/learned_positions", "book/one_layer_many_families", "book/sinusoidal_encodings"}


def _axe_or_skip():
    if AXE.exists():
        return AXE
    reason = f"axe-core is not installed: npm ci --prefix {AXE.parents[2].relative_to(ROOT)} (make test does)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def violations(request):
    """Every page at every width in both themes: {(page, width, theme): axe violations}."""
    _axe_or_skip()
    visited = request.getfixturevalue("visited")  # each page loaded once, with axe-core (conftest.py)
    for stem in PAGES:
        assert len(visited[stem].backgrounds) == len(THEMES), f"{stem}: the themes did not switch"
    return {(stem, *key): found for stem in PAGES for key, found in visited[stem].axe.items()}


def blocking_findings(violations: dict) -> dict[tuple[str, str], list[str]]:
    """(rule, selector) -> the pages, widths and themes where axe finds it, for critical and serious violations."""
    found: dict[tuple[str, str], list[str]] = {}
    for (stem, width, theme), found_there in violations.items():
        for violation in found_there:
            if violation["impact"] in BLOCKING:
                for node in violation["nodes"]:
                    key = (violation["id"], " ".join(map(str, node["target"])))
                    found.setdefault(key, []).append(f"{stem} ({width} px, {theme})")
    return found


def test_no_critical_or_serious_violation_the_book_controls(violations):
    found = blocking_findings(violations)
    unlisted = {key: pages for key, pages in found.items() if key not in ALLOWED}
    assert unlisted == {}, "\n".join(f"{rule} at {selector}: {pages}" for (rule, selector), pages in unlisted.items())


def test_every_allowed_violation_still_occurs(violations):
    assert sorted(set(ALLOWED) - set(blocking_findings(violations))) == []


def test_axe_reports_a_planted_violation(browser, book_url):
    """The harness can fail: an image without alt text, added to a page, is a critical finding."""
    require_built_book()
    context = browser.new_context()
    tab = context.new_page()
    visit(tab, f"{book_url}/{PAGES[0]}.html")
    tab.evaluate("document.querySelector('main').append(document.createElement('img'))")
    tab.add_script_tag(path=str(_axe_or_skip()))
    results = tab.evaluate(AXE_RUN)  # as `visited` runs it
    context.close()
    assert ("image-alt", "critical") in {(v["id"], v["impact"]) for v in results["violations"]}


def test_axe_leaves_out_only_rules_that_cannot_fail_the_test(browser, book_url):
    """AXE_RUN runs, of the rules axe runs by default, every one whose impact (each of its findings' impact) is
    serious or critical; those it leaves out are moderate or minor, which the test above ignores. Which rules run
    does not depend on the page (each lands in one of the four lists, inapplicable included: the same sets on the
    intro and on the first chapter, measured), so the smallest page serves: a chapter cost 2.5x the CPU."""
    require_built_book()
    _axe_or_skip()
    context = browser.new_context()
    tab = context.new_page()
    visit(tab, f"{book_url}/{PAGES[0]}.html")
    tab.add_script_tag(path=str(AXE))
    ids = "r => [...r.violations, ...r.passes, ...r.incomplete, ...r.inapplicable].map(rule => rule.id)"
    by_default = set(tab.evaluate(f"() => axe.run(document, {{resultTypes: ['violations']}}).then({ids})"))
    ran = set(tab.evaluate(f"() => ({AXE_RUN})().then({ids})"))
    impact = dict(tab.evaluate("() => axe._audit.rules.map(rule => [rule.id, rule.impact])"))
    context.close()
    assert {"color-contrast", "link-in-text-block", "image-alt", "scrollable-region-focusable"} <= ran
    assert ran == {rule for rule in by_default if impact[rule] in BLOCKING}
    assert {impact[rule] for rule in by_default - ran} == {"moderate", "minor"}


def test_every_formula_carries_mathml_for_screen_readers(visited):
    """Each formula is MathML (tools/book/sphinx_mathml.py), which the browser exposes to screen readers as math."""
    # (.math boxes in the article, elements there with the role math) on each page with a .math box in <main>
    formulas = {stem: visited[stem].formulas for stem in PAGES if visited[stem].math[0]}
    assert "book/sum_and_layernorm" in formulas
    assert {stem: counts for stem, counts in formulas.items() if counts[0] == 0 or counts[1] != counts[0]} == {}


def test_every_html_table_is_legible_at_every_width_in_both_themes(visited):
    """Each HTML output table's cell text against the worst pixel painted behind it (conftest.table_contrast), where
    axe cannot judge: in dark mode a scrolling table's edge once painted the page's dark surface under its first
    column's dark text (1.13:1 at 390 px)."""
    measured = {stem: cells for stem in PAGES for cells in visited[stem].tables.values() if cells}
    assert TABLE_PAGES <= set(measured), sorted(measured)
    low = {(stem, width, theme, text): round(ratio, 2) for stem in PAGES
           for (width, theme), cells in visited[stem].tables.items() for text, ratio in cells if ratio < AA_TEXT}
    assert low == {}


def test_the_table_measure_finds_a_dark_band_under_dark_text(browser, book_url):
    """The measure can fail: the page's dark surface put back under a table's edge in dark mode at 390 px."""
    require_built_book()
    context = browser.new_context(viewport={"width": 390, "height": 900})
    tab = context.new_page()
    visit(tab, f"{book_url}/book/learned_positions.html")
    tab.add_style_tag(content=NO_TRANSITIONS + " .text_html.scrolls { --scroll-cover: #29313d !important; }")
    tab.evaluate(FRAMES)
    tab.evaluate("() => window.bookLabelScrollers?.()")
    tab.evaluate(SET_THEME, "dark")
    worst = min(ratio for _, ratio in table_contrast(tab))
    context.close()
    assert worst < 1.5
