"""The live widget in headless Chromium, offline: a one-page Sphinx build with the book's theme, style and the
live-box extension serves the assets `make widget` built; the test types the chapters' sentences into it and compares
what the page shows with torch (and with Python's onnxruntime on the same graph), runs axe at three widths, and times
the first result. Self-contained: the built book is not needed (the chapters' own boxes are checked when it is)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.book.conftest import AXE, HTML, IN_CI, WIDTHS, serve
from tools.environment import ROOT
from tools.widget import compare
from tools.widget.export import DIST, FORMAT, onnx_path
from tools.widget.model import blinded

FIRST_RESULT_S = 3.0  # the issue's budget: the first result after the model has loaded
SHOWN = 0.5e-3  # the page shows norms and the cosine to 3 decimals
BOXES = {"token": ("I am Sinan", "She is Zoe"), "segment": ("Where do penguins live?", "Most penguins live in the "
         "Southern Hemisphere."), "position": ("the cat saw the dog", ""), "sum": ("I am Sinan", "We lived above "
         "the clouds")}
CONF = f"""import sys
sys.path.insert(0, {str(ROOT)!r})
extensions = ["myst_parser", "tools.book.sphinx_widget"]
html_theme = "sphinx_book_theme"
html_static_path = [{str(ROOT / "book" / "_static")!r}]
html_css_files = ["book.css"]
html_title = "Live widget test"
"""
READ = """box => ({rows: [...box.querySelectorAll('.bfv-table tbody tr')]
    .map(tr => [...tr.cells].map(c => c.textContent)),
  cosine: box.querySelector('.bfv-cosine')?.textContent ?? null, runs: Number(box.querySelector('.bfv-output')
  .dataset.runs || 0), ms: Number(box.querySelector('.bfv-output').dataset.ms || 0)})"""
COLUMNS = ["token", "id", "type", "pos", "word", "segment", "position", "summed", "normed"]
# The box's form filled and sent as its button sends it, in one round trip: READ once the run it started is shown
# (data-runs grew and nothing is pending, seen by a MutationObserver), or an error after a minute. The same 42 texts
# and modes sent by _type's four Playwright actions, two waits and two reads took 7.0 CPU s, this 2.1 s (measured);
# test_first_result_within_three_seconds still types and clicks as a reader does.
SUBMIT = """async (box, [a, b, mode]) => {
  const form = box.querySelector('form'), output = box.querySelector('.bfv-output');
  const runs = Number(output.dataset.runs || 0);
  const shown = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no result within 60 s for ${a} / ${b} / ${mode}`)), 60_000);
    const observer = new MutationObserver(() => {
      if (Number(output.dataset.runs || 0) > runs && !output.dataset.pending) {
        observer.disconnect();
        clearTimeout(timer);
        resolve();
      }
    });
    observer.observe(output, {attributes: true});
  });
  form.elements.a.value = a;
  form.elements.b.value = b;
  form.querySelector(`input[value=${mode}]`).checked = true;
  form.querySelector('button[type=submit]').click();
  await shown;
  return (""" + READ + """)(box);
}"""


def _built_widget():
    if (DIST / "manifest.json").exists():
        return json.loads((DIST / "manifest.json").read_text())
    reason = "the widget is not built: run `make widget` (make test does)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The one-page site (a box per chapter focus), built with sphinx and served on localhost."""
    _built_widget()
    source = tmp_path_factory.mktemp("widget-site")
    (source / "conf.py").write_text(CONF)
    boxes = "\n".join(f"```{{live-box}} {focus}\n:a: {a}\n:b: {b}\n\nThe {focus} box.\n```\n"
                      for focus, (a, b) in BOXES.items())
    (source / "index.md").write_text(f"# Live widget\n\n{boxes}")
    out = source / "_build"
    subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", str(source), str(out)], check=True)
    with serve(out) as url:
        yield f"{url}/index.html"


@pytest.fixture(scope="module")
def loaded(browser, site):
    """The page in a fresh context: what it fetched before the button, then the model loaded by keyboard."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    fetched: dict[str, int] = {}
    tab.on("requestfinished", lambda r: fetched.__setitem__(r.url, r.sizes()["responseBodySize"]))
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(str(error)))
    tab.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
    tab.goto(site, wait_until="networkidle")
    before = dict(fetched)
    tab.focus(".bfv-load")
    tab.keyboard.press("Enter")  # the button works from the keyboard
    tab.wait_for_function("[...document.querySelectorAll('.bfv-output')].every(o => o.dataset.runs)",
                          timeout=300_000)
    yield tab, before, fetched, problems
    context.close()


def test_model_loads_only_on_the_button(loaded):
    tab, before, fetched, problems = loaded
    manifest = _built_widget()
    early = [url for url in before if any(name in url for name in manifest["bytes"])]
    assert not early, f"fetched before the reader asked: {early}"
    assert any(url.endswith("bert.onnx") for url in fetched), "the model never loaded"
    label = tab.locator(".bfv-load").first.text_content()
    assert f"{sum(manifest['bytes'].values()) / 2**20:.0f} MiB" in label and FORMAT in label
    own = {url.split("/")[-1]: size for url, size in before.items() if "/_static/widget/" in url}
    print(f"a cold visit adds the widget's own script and style, {sum(own.values())} bytes: {own}")
    assert set(own) == {"widget.js", "widget.css"}
    assert not problems, problems


def _type(tab, box, a: str, b: str, mode: str) -> dict:
    runs = box.evaluate(READ)["runs"]
    box.locator("input[name=a]").fill(a)
    box.locator("input[name=b]").fill(b)
    box.locator(f"input[value={mode}]").check()
    box.locator("button[type=submit]").click()
    tab.wait_for_function(f"b => Number(b.querySelector('.bfv-output').dataset.runs) > {runs}",
                          arg=box.element_handle(), timeout=60_000)
    tab.wait_for_function("b => !b.querySelector('.bfv-output').dataset.pending", arg=box.element_handle())
    return box.evaluate(READ)


def test_first_result_within_three_seconds(loaded):
    tab, *_ = loaded
    first = tab.eval_on_selector_all(".bfv-output", "outs => outs.map(o => Number(o.dataset.firstMs))")
    print(f"first results after the model loaded (each box, ms): {first}")
    assert max(first) / 1000 <= FIRST_RESULT_S
    box = tab.locator(".bfv-live").first
    started = time.perf_counter()
    shown = _type(tab, box, "We lived above the clouds", "this is a test sentence", "normal")
    wall = time.perf_counter() - started
    print(f"first result: {wall:.2f} s wall (the page's own count {shown['ms']:.0f} ms)")
    assert shown["ms"] / 1000 <= FIRST_RESULT_S and wall <= FIRST_RESULT_S


def test_page_shows_the_books_numbers(loaded):
    """Every chapter text in every position mode: pieces, ids, segments and positions equal Python's; each norm and
    the cosine within |Python onnxruntime - torch| on the same input (the format's rounding, measured here) plus the
    display's half unit plus float32's reduction over the hidden size (times the depth, for the cosine). The texts
    go in by SUBMIT, which fills and sends the form in the page."""
    import onnxruntime

    from helpers.checkpoint import load_bert

    tab, *_ = loaded
    bert, tokenizer = load_bert()
    blind, hidden, depth = blinded(bert), bert.config.hidden_size, bert.config.num_hidden_layers
    session = onnxruntime.InferenceSession(str(onnx_path(FORMAT)), providers=["CPUExecutionProvider"])
    box, worst, table = tab.locator(".bfv-live").first, {}, []
    for a, b in compare.CHAPTER_TEXTS:
        for mode in compare.MODES:
            shown = box.evaluate(SUBMIT, [a, b, mode])
            ours, theirs = compare.both(session, bert, blind, tokenizer, a, b, mode)
            ids, types = compare.encode(tokenizer, a, b)
            rows = [dict(zip(COLUMNS, row, strict=False)) for row in shown["rows"]]
            assert [r["token"] for r in rows] == tokenizer.convert_ids_to_tokens(ids[0]), a
            assert [int(r["id"]) for r in rows] == ids[0].tolist(), a
            assert [int(r["type"]) for r in rows] == types[0].tolist(), a
            assert [int(r["pos"]) for r in rows] == compare.positions(ids.shape[1], mode), a
            for name in COLUMNS[4:]:
                page = np.array([float(r[name]) for r in rows])
                ref, onnx = (np.linalg.norm(x[name][0].astype(np.float64), axis=-1) for x in (theirs, ours))
                bound = np.abs(onnx - ref) + SHOWN + hidden * 2.0**-24 * np.abs(ref)
                assert (np.abs(page - ref) <= bound).all(), f"{a!r}/{b!r}/{mode}: {name} {page} vs {ref}"
                worst[name] = max(worst.get(name, 0.0), float(np.abs(page - ref).max()))
            if b:
                page = float(shown["cosine"])
                bound = abs(ours["cosine"] - theirs["cosine"]) + SHOWN + depth * hidden * 2.0**-24
                assert abs(page - theirs["cosine"]) <= bound, f"{a!r}/{b!r}/{mode}: cosine"
                worst["cosine"] = max(worst.get("cosine", 0.0), abs(page - theirs["cosine"]))
                table.append(f"{a[:24]:24} | {b[:24]:24} | {mode:8} | {page:.3f} | {theirs['cosine']:.6f}")
    print("\npage vs torch, largest |difference| over every text and mode:", {k: f"{v:.1e}" for k, v in worst.items()})
    print("sentence A | sentence B | positions | cosine shown | torch\n" + "\n".join(table))


def test_axe_finds_no_serious_issue(loaded):
    tab, *_ = loaded
    if not AXE.exists():
        pytest.skip("axe-core is not installed: make .venv/.installed-dev (npm ci --prefix tests/book/axe)")
    tab.add_script_tag(path=str(AXE))
    for width in WIDTHS:
        tab.set_viewport_size({"width": width, "height": 900})
        tab.wait_for_timeout(300)
        # the boxes, with results shown (the theme around them: test_accessibility, on the built book's pages)
        violations = tab.evaluate("() => axe.run({include: [['.bfv-live']]}, {resultTypes: ['violations']})")[
            "violations"]
        bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]])
               for v in violations if v["impact"] in ("serious", "critical")]
        assert not bad, f"{width}px: {bad}"


@pytest.mark.parametrize("chapter", ["token_embeddings", "segment_embeddings", "learned_positions",
                                     "sum_and_layernorm"])
def test_each_chapter_has_its_live_box(chapter):
    page = HTML / "book" / f"{chapter}.html"
    if not page.exists():
        pytest.skip("the book is not built (make book); test_browser checks a built book's pages")
    text = page.read_text()
    assert text.count('class="bfv-live"') == 1, chapter
    if (DIST / "manifest.json").exists() and (HTML / "_static" / "widget" / "bert.onnx").exists():
        assert "data-assets=" in text and "widget/widget.js" in text
    else:
        assert "make widget book" in text
