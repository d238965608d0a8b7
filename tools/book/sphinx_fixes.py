"""Sphinx extension: small fixes to what the theme and extensions write into every page.

- Script tags added twice are dropped (sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on Sphinx 7).
- The References page's list gets valid ARIA roles (docutils' citation list holds doc-biblioentry items, which a
  role="list" may not: axe-core's one critical finding).
- pydata-sphinx-theme's fontawesome.js (1.5 MB, loaded blocking on every page) is removed: the theme's CSS already
  draws the same icons with Font Awesome's web fonts, which a page fetches only for the icons it shows.
- The primary sidebar (the book's title and its chapters) becomes a named landmark, so no content is outside one.
"""

from __future__ import annotations

import re
from pathlib import Path

FONTAWESOME_SCRIPT = re.compile(r'\s*<script src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')
# (pattern, replacement); each applies once: a page an incremental build did not rewrite is read again, fixed.
MARKUP_FIXES = [(re.compile(pattern), new) for pattern, new in [
    ('(?<!role="listitem" )class="citation" id=', 'role="listitem" class="citation" id='),
    # the search button's visible text ("Search Ctrl+K") must be part of its accessible name
    ('title="Search" aria-label="Search" data-bs-placement', 'title="Search" data-bs-placement'),
    (' role="doc-biblioentry"', ''),
    ('<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">',
     '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="complementary" '
     'aria-label="Chapters">')]]


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


def fix_pages(app, exception) -> None:
    """After an HTML build: drop the icon script (tag and file), give the citation list and the sidebar valid roles."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        for old, new in MARKUP_FIXES:
            lighter = old.sub(new, lighter)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")
    for script in (out / "_static" / "scripts").glob("fontawesome.js*"):
        script.unlink()


def setup(app) -> dict:
    """Register the hooks."""
    app.connect("html-page-context", drop_duplicate_scripts)
    app.connect("build-finished", fix_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
