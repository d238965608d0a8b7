"""Sphinx extension: the `live-box` directive, a box where the reader runs the packaged checkpoint on their own text.

A chapter's markdown cell says ```{live-box} token``` (or segment, position, sum) with `:a:` and `:b:` sentences and
a few lines of text. When `make widget` has built the browser assets (_build/widget/dist), they are copied into the
site's _static/widget and the box gets a "Load model" button; when not, the box shows the one command that adds them.
Without JavaScript the box is text: the chapter's printed results around it are the same computation.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.util.osutil import relative_uri

from tools.environment import ROOT

DIST = ROOT / "_build" / "widget" / "dist"
SOURCE = ROOT / "tools" / "widget"
STATIC = "_static/widget/"
FOCUS = ("token", "segment", "position", "sum")
ADD_COMMAND = "make widget book"


class live_box(nodes.General, nodes.Element):  # noqa: N801 (docutils names nodes in lower case)
    """A live box: its text as children, its focus and sentences as attributes."""


def manifest() -> dict | None:
    """The built assets' manifest (weight format, bytes per file), or None when `make widget` has not run."""
    path = DIST / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


class LiveBox(Directive):
    """```{live-box} FOCUS``` with options :a: and :b: (the sentences the box starts with) and a short text."""

    required_arguments = 1
    has_content = True
    option_spec = {"a": directives.unchanged_required, "b": directives.unchanged}

    def run(self):
        focus = self.arguments[0]
        if focus not in FOCUS:
            raise self.error(f"live-box: focus {focus!r} is not one of {FOCUS}")
        node = live_box(focus=focus, a=self.options.get("a", ""), b=self.options.get("b", ""))
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


def _controls(node: live_box, found: dict, assets: str) -> str:
    """The form, the button and the output area; hidden until the script shows them."""
    total = sum(size for name, size in found["bytes"].items() if name != "manifest.json")
    a, b = html.escape(node["a"], quote=True), html.escape(node["b"], quote=True)
    return f"""<p class="bfv-nojs">This box runs the model in your browser and needs JavaScript; the results printed
in the chapter are the same computation.</p>
<div class="bfv-controls" hidden>
<p><button type="button" class="bfv-load">Load model ({total / 2**20:.0f} MiB, {found["format"]} weights)</button>
<progress hidden aria-label="Model download"></progress> <span class="bfv-status" role="status"></span></p>
<form><fieldset class="bfv-inputs" disabled><legend>Your text</legend>
<label>Sentence A <input name="a" value="{a}" autocomplete="off"></label>
<label>Sentence B (optional) <input name="b" value="{b}" autocomplete="off"></label>
<fieldset class="bfv-positions"><legend>Positions</legend>
<label><input type="radio" name="positions" value="normal" checked> normal</label>
<label><input type="radio" name="positions" value="shuffled"> shuffled</label>
<label><input type="radio" name="positions" value="removed"> removed</label></fieldset>
<button type="submit">Run</button></fieldset></form>
<div class="bfv-output" aria-live="polite" tabindex="0" role="region" aria-label="Live results"></div>
<p class="bfv-limits">{_limits(found)}</p></div>"""


def _limits(found: dict) -> str:
    """What runs live and what does not, and the rounding the reader sees."""
    worst = found["largest_difference"]
    return (f"Runs in your browser: the packaged checkpoint's forward pass (onnxruntime-web, WebAssembly), its "
            f"weights stored as {found['format']}. On the chapters' sentences its largest difference from torch is "
            f"{worst['word']:.0e} in a word row, {worst['normed']:.0e} in the LayerNorm output and "
            f"{worst['cosine']:.0e} in the cosine, so the numbers here agree with the chapter's to about three "
            "decimals. Training, gradients and the GPU appendix do not run here.")


def visit_html(self, node: live_box) -> None:
    found = manifest()
    assets = relative_uri(self.builder.get_target_uri(self.builder.current_docname), STATIC)
    data = ""
    if found:
        sizes = html.escape(json.dumps(found["bytes"]), quote=True)
        data = (f' data-assets="{assets}" data-sizes="{sizes}" data-format="{found["format"]}"'
                f' data-max-positions="{found["max_positions"]}"')
    self.body.append(f'<section class="bfv-live" data-focus="{node["focus"]}"{data} aria-label="Live: run the model '
                     'on your own text">\n<p class="bfv-title"><strong>Live: your own text</strong></p>\n')
    node["controls"] = _controls(node, found, assets) if found else (
        '<p class="bfv-missing">The live model is not in this build of the book. '
        f"Add it from a checkout with <code>{ADD_COMMAND}</code>.</p>")


def depart_html(self, node: live_box) -> None:
    self.body.append(node["controls"] + "\n</section>\n")


def skip(self, node: live_box) -> None:
    raise nodes.SkipNode


def add_page_assets(app, pagename, templatename, context, doctree) -> None:
    """The box's style on every page with a box; its script too where the model's assets were built."""
    if doctree is not None and any(doctree.findall(live_box)):
        app.add_css_file("widget/widget.css")
        if manifest():
            app.add_js_file("widget/widget.js", type="module")


def copy_assets(app, exception) -> None:
    """Copy the widget's script and style, and the built model assets when there are any, into _static/widget."""
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / STATIC
    target.mkdir(parents=True, exist_ok=True)
    for name in ("widget.js", "widget.css"):
        shutil.copyfile(SOURCE / name, target / name)
    if manifest():
        shutil.copytree(DIST, target, dirs_exist_ok=True)


def record_assets(app, config) -> None:
    """Note which assets there are as a config value: when `make widget` adds or changes them, Sphinx sees the
    value change and rewrites every page, so each box switches between its button and the command."""
    found = manifest()
    config.live_widget_assets = json.dumps(found, sort_keys=True) if found else "absent"


def setup(app) -> dict:
    """Register the directive, its node and the asset hooks."""
    app.add_config_value("live_widget_assets", "absent", "html")
    app.connect("config-inited", record_assets)
    # singlehtml is the PDF's build (tools/book/pdf.py): a printed page has no button to press
    app.add_node(live_box, html=(visit_html, depart_html), singlehtml=(skip, None), latex=(skip, None),
                 text=(skip, None), man=(skip, None), texinfo=(skip, None))
    app.add_directive("live-box", LiveBox)
    # before other handlers (sphinx_fixes rebuilds the page's script list): a file added later would not show
    app.connect("html-page-context", add_page_assets, priority=400)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
