"""Sphinx extension: small fixes to what the theme and extensions write into every page.

- Script tags added twice are dropped (sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on Sphinx 7).
- pydata-sphinx-theme's fontawesome.js (1.5 MB, loaded blocking on every page) is removed: the theme's CSS already
  draws the same icons with Font Awesome's web fonts, which a page fetches only for the icons it shows.
"""

from __future__ import annotations

import re
from pathlib import Path

FONTAWESOME_SCRIPT = re.compile(r'\s*<script src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')


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


def drop_fontawesome_script(app, exception) -> None:
    """After an HTML build: remove the icon script's tag from every page, and the script from _static."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")
    for script in (out / "_static" / "scripts").glob("fontawesome.js*"):
        script.unlink()


def setup(app) -> dict:
    """Register the hooks."""
    app.connect("html-page-context", drop_duplicate_scripts)
    app.connect("build-finished", drop_fontawesome_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
