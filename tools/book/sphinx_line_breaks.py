"""Sphinx extension: a punctuation mark never starts a line after inline code, math or a link.

The browser may break a line after inline math (an atomic inline box, so that a long formula can scroll) and, when
a code word is wider than what is left of the line, right before the "." or ":" that follows it (book.css lets long
code wrap so that nothing widens a phone's page), also inside a link. Either way the mark began the next line alone.
Each inline code, math or link node followed by punctuation is wrapped with that mark in a `span.no-break-before`
(book.css: no break between them, while the code or link inside still wraps), so the mark stays on its line. A
code word longer than LONG_CODE characters (a path: transformers/models/bert/modeling_bert.py) is marked `long-code`
and wraps at any character (book.css), so the browser never needs the emergency break it placed before the mark.
"""

from __future__ import annotations

import re

from docutils import nodes

INLINE = (nodes.literal, nodes.math, nodes.reference)
PUNCTUATION = re.compile(r"^[.,:;!?)]+")
LONG_CODE = 30  # characters: about two thirds of a phone's line of inline code


def glue_punctuation(app, doctree: nodes.document, docname: str) -> None:
    """Wrap each inline literal, math or reference node and the punctuation right after it in one inline node."""
    for node in list(doctree.findall(lambda n: isinstance(n, INLINE))):
        parent = node.parent
        if parent is None or isinstance(parent, nodes.literal_block):
            continue
        if isinstance(node, nodes.literal) and len(node.astext()) > LONG_CODE:
            node["classes"].append("long-code")
        index = parent.index(node)
        if index + 1 >= len(parent) or not isinstance(parent[index + 1], nodes.Text):
            continue
        text = parent[index + 1]
        mark = PUNCTUATION.match(str(text))
        if not mark:
            continue
        wrapper = nodes.inline("", "", classes=["no-break-before"])
        parent.replace(node, wrapper)
        wrapper += [node, nodes.Text(mark.group())]
        rest = str(text)[mark.end():]
        if rest:
            parent.replace(text, nodes.Text(rest))
        else:
            parent.remove(text)


def setup(app) -> dict:
    """Register the transform on every resolved page (HTML and the PDF's single page)."""
    app.connect("doctree-resolved", glue_punctuation)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
