"""Sphinx extension: drop script tags added twice (sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on Sphinx 7)."""

from __future__ import annotations


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


def setup(app) -> dict:
    """Register the html-page-context hook."""
    app.connect("html-page-context", drop_duplicate_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
