"""Sphinx extension: small fixes to what the theme and extensions write into every page.

- Script tags added twice are dropped (sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on Sphinx 7).
- The References page's list gets valid ARIA roles (docutils' citation list holds doc-biblioentry items, which a
  role="list" may not: axe-core's one critical finding).
- pydata-sphinx-theme's fontawesome.js (1.5 MB, loaded blocking on every page) is removed: the theme's CSS already
  draws the same icons with Font Awesome's web fonts, which a page fetches only for the icons it shows.
- The primary sidebar (the book's title and its chapters) becomes a named landmark, so no content is outside one.
- MathJax loads only on a page whose own text has math (Sphinx also counts the pages a toctree lists), and only
  the components `mathjax3_config` loads are copied from sphinx-mathjax-offline's package (24 MB in all).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

from docutils import nodes

FONTAWESOME_SCRIPT = re.compile(r'\s*<script src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')
MARKUP_FIXES = [('class="citation" id=', 'role="listitem" class="citation" id='),
                  # the search button's visible text ("Search Ctrl+K") must be part of its accessible name
                  ('title="Search" aria-label="Search" data-bs-placement', 'title="Search" data-bs-placement'),
                  (' role="doc-biblioentry"', ''),
                  ('<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">',
                   '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="complementary" '
                   'aria-label="Chapters">')]
MATHJAX_FONTS = "output/chtml/fonts/woff-v2"  # the CommonHTML output's web fonts, fetched per glyph style used


def script_key(script) -> tuple:
    """What makes two script entries the same tag: source (None and '' alike) and attributes."""
    return (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of identical script entries on every page."""
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def is_mathjax(script, mathjax_path: str) -> bool:
    """True for the MathJax script or its configuration."""
    body = getattr(script, "attributes", {}).get("body", "")
    return getattr(script, "filename", None) == f"_static/{mathjax_path}" or body.startswith("window.MathJax")


def drop_mathjax_without_math(app, pagename, templatename, context, doctree) -> None:
    """No MathJax on a page whose own doctree has no math."""
    if doctree is None or next(doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))), None):
        return
    context["script_files"] = [s for s in context.get("script_files", []) if not is_mathjax(s, app.config.mathjax_path)]


def mathjax_components(config: dict) -> set[str]:
    """The files (under mathjax/) MathJax's loader fetches for `config`: startup, core, the loaded components."""
    names = ["startup", "core", "output/chtml/fonts/tex"] + config["loader"]["load"]
    return {name.replace("[tex]/", "input/tex/extensions/") + ".js" for name in names}


def copy_mathjax(app, exception) -> None:
    """Copy the MathJax components the pages load, and the output's fonts, from sphinx-mathjax-offline's package."""
    if exception is not None or app.builder.format != "html":
        return
    source = Path(importlib.util.find_spec("sphinx-mathjax-offline").origin).parent / "static" / "mathjax"
    target = Path(app.outdir) / "_static" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source / MATHJAX_FONTS, target / MATHJAX_FONTS)
    for name in mathjax_components(app.config.mathjax3_config):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target / name)


def fix_pages(app, exception) -> None:
    """After an HTML build: drop the icon script (tag and file), give the citation list and the sidebar valid roles."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        for old, new in MARKUP_FIXES:
            lighter = lighter.replace(old, new)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")
    for script in (out / "_static" / "scripts").glob("fontawesome.js*"):
        script.unlink()


def setup(app) -> dict:
    """Register the hooks."""
    app.connect("html-page-context", drop_duplicate_scripts)
    app.connect("html-page-context", drop_mathjax_without_math, priority=900)  # after sphinx.ext.mathjax adds it
    app.connect("build-finished", fix_pages)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
