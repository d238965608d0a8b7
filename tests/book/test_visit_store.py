"""tests/book/visit_store.py: the browser visit's stored results load back as they were visited, only for the same
site, code, axe-core and Chromium and the same screenshots; anything else, or a damaged entry, means a visit."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.book.conftest import AXE, PageVisit, page_visit, serve
from tests.book.visit_store import BOOK_URL, CODE, VisitStore, key_of, key_parts, replay_or_visit
from tools.environment import ROOT

pytest_plugins = ["pytester"]

# A page with what a chapter has for each PageVisit field: a heading, a figure, a code box, a link, an output table.
PAGE = """<!doctype html><html><head><title>Tiny</title><style>
html[data-theme=dark] body {background: #121212; color: #eee}</style></head>
<body><main><div class="bd-article"><h1>Tiny</h1><p>See <a href="other.html">the other page</a>.</p>
<img src="dot.png" alt="a grey square"><pre>x = 1</pre>
<div class="cell_output"><div class="text_html"><table><tr><th>token</th><td>0.25</td></tr></table></div></div>
</div></main></body></html>"""


def tiny_site(where):
    where.mkdir()
    (where / "page.html").write_text(PAGE)
    (where / "other.html").write_text("<!doctype html><title>Other</title><main><h1>Other</h1></main>")
    Image.new("RGB", (40, 20), "grey").save(where / "dot.png")
    return where


def a_visit(title="t") -> PageVisit:
    return PageVisit(ok=True, title=title, h1=1, fetched={"u": ("image", 3)}, images=[["u", 1, 2]], hrefs=["u"],
                     pdf_buttons=1, math=(1, 1, 0), formulas=(1, 1), drawn=[{"tex": "x"}], problems=[],
                     layout={390: {"figures": []}}, axe={(390, "dark"): []}, backgrounds={"rgb(0, 0, 0)"},
                     tables={(390, "dark"): [("0.25", 12.5)]}, line_starts={390: []})


def test_a_stored_visit_loads_back_equal_to_what_was_visited(browser, tmp_path):
    site, shot = tiny_site(tmp_path / "site"), tmp_path / "shots" / "page.jpg"
    with serve(site) as url:
        visits = {"page": page_visit(browser, f"{url}/page.html", shot)}
    seen = visits["page"]
    assert seen.layout and seen.line_starts and seen.axe.keys() == seen.tables.keys() and seen.tables[390, "dark"]
    assert f"{url}/other.html" in seen.hrefs and shot.exists()
    store = VisitStore(tmp_path / "cache", {"site": "tiny"})
    store.save(visits, url, [shot])
    assert url not in store.path.read_text() and BOOK_URL in store.path.read_text()  # the port is not stored
    loaded, why = store.load(PageVisit, url, [shot])
    assert loaded == visits, why
    elsewhere, _ = store.load(PageVisit, "http://127.0.0.1:1", [shot])  # the next session's server
    assert "http://127.0.0.1:1/other.html" in elsewhere["page"].hrefs


def change_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("change", ["site file", "conftest", "axe", "chromium"])
def test_the_key_changes_with_one_byte_of_what_the_visit_depends_on(tmp_path, change):
    site = tiny_site(tmp_path / "site")
    code, axe = tmp_path / "conftest.py", tmp_path / "axe.min.js"
    code.write_bytes((ROOT / "tests" / "book" / "conftest.py").read_bytes())
    axe.write_bytes(AXE.read_bytes() if AXE.exists() else b"window.axe = {};")

    def key(chromium="Chromium 156.0.8078.108"):
        return key_of(key_parts(site, [code], axe, chromium, ["page"]))

    before = key()
    assert key() == before  # the same inputs, the same key
    if change == "chromium":
        assert key("Chromium 156.0.8078.109") != before
        return
    change_byte({"site file": site / "dot.png", "conftest": code, "axe": axe}[change])
    assert key() != before


def test_the_key_covers_the_visiting_and_measuring_code():
    covered = {path.relative_to(ROOT).as_posix() for path in CODE}
    assert {"tests/book/conftest.py", "tests/book/visit_store.py", "helpers/plots.py"} <= covered


def stored(tmp_path, shot):
    shot.write_bytes(b"a screenshot")
    store = VisitStore(tmp_path / "cache", {"site": "tiny"})
    store.save({"page": a_visit()}, "http://127.0.0.1:9", [shot])
    return store


def counted(calls):
    def visit():
        calls.append(1)
        return {"page": a_visit("visited")}
    return visit


@pytest.mark.parametrize("screenshot", ["unchanged", "missing", "changed"])
def test_a_missing_or_changed_screenshot_forces_a_visit(tmp_path, screenshot):
    shot = tmp_path / "page.jpg"
    store, calls = stored(tmp_path, shot), []
    if screenshot == "missing":
        shot.unlink()
    if screenshot == "changed":
        change_byte(shot)
    visits, line = replay_or_visit(store, counted(calls), PageVisit, "http://127.0.0.1:9", [shot])
    if screenshot == "unchanged":
        assert (calls, visits, "replayed" in line) == ([], {"page": a_visit()}, True), line
    else:
        assert (calls, visits["page"].title) == ([1], "visited"), line
        assert "page.jpg" in line and "screenshots differ" in line


def test_a_damaged_entry_means_a_visit_with_a_message(tmp_path):
    shot = tmp_path / "page.jpg"
    store, calls = stored(tmp_path, shot), []
    store.path.write_text(store.path.read_text()[:100])  # cut short, as by a full disk
    visits, line = replay_or_visit(store, counted(calls), PageVisit, "http://127.0.0.1:9", [shot])
    assert calls == [1] and visits["page"].title == "visited"
    assert "unreadable" in line and str(store.path) in line
    assert json.loads(store.path.read_text())["pages"]["page"]["title"] == "visited"  # the visit replaced it


def test_only_the_newest_entries_are_kept(tmp_path):
    shot = tmp_path / "page.jpg"
    shot.write_bytes(b"a screenshot")
    for site in range(5):
        VisitStore(tmp_path / "cache", {"site": str(site)}).save({"page": a_visit()}, "http://x", [shot])
    kept = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert kept == sorted(VisitStore(tmp_path / "cache", {"site": str(s)}).path.name for s in (2, 3, 4))


def test_without_the_option_nothing_is_read_or_written(tmp_path, monkeypatch, pytester):
    def forbidden(*args):
        raise AssertionError("the store was used")

    monkeypatch.setattr(VisitStore, "load", forbidden)
    monkeypatch.setattr(VisitStore, "save", forbidden)
    calls = []
    assert replay_or_visit(None, counted(calls), PageVisit, "http://x", []) == ({"page": a_visit("visited")}, None)
    assert calls == [1]
    pytester.makepyfile("def test_option(request):\n    from tools.testing.pytest_visit_cache import folder\n"
                        "    assert folder(request.config) is None\n")
    pytester.runpytest_inprocess("-p", "tools.testing.pytest_visit_cache", "-p", "no:cacheprovider").assert_outcomes(
        passed=1)


FAILING = """
from pathlib import Path

import pytest
from tools.testing.pytest_visit_cache import note

@pytest.fixture(scope="session")
def visited(request):
    entry = Path({entry!r})
    note(request.config, "browser visit: replayed from entry.json", entry)
    return entry

def test_reads(visited):
    assert visited.exists()

def test_fails(visited):
    assert {outcome!r}
"""


@pytest.mark.parametrize("outcome", [True, False])
def test_a_failed_test_on_the_visit_drops_its_entry(pytester, outcome):
    entry = pytester.path / "entry.json"
    entry.write_text("{}")
    pytester.makepyfile(FAILING.format(outcome=outcome, entry=str(entry)))
    result = pytester.runpytest_inprocess("-p", "tools.testing.pytest_visit_cache", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2 if outcome else 1, failed=0 if outcome else 1)
    assert entry.exists() == outcome
    result.stdout.fnmatch_lines(["*browser visit: replayed from entry.json*"])
    assert ("test_fails failed: dropped" in result.stdout.str()) != outcome
