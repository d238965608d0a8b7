"""Sphinx extension: every figure a notebook cell draws keeps its shape and links to its full-size image.

myst-nb writes a 2x PNG's display size as an inline `width` and `height`; the theme narrows the width to the column
and the fixed height stays, so a narrow column squashed every figure. The height is dropped (the width stays: the
size the figure was drawn for) and book.css gives images `max-width: 100%; height: auto`.

A figure 800 px wide shrinks to the 360 px of a phone's column, and its 10-pt text with it (about 6 px); the linked
image opens at its natural size, where that text is about 14 px and the browser zooms further.

Sphinx numbers the figures of every page outside a numbered part with one counter shared by all of them, so the
appendix's third page opened with "Fig. 3": figure numbers restart at 1 on each unnumbered page.
"""

from __future__ import annotations

import posixpath

from docutils import nodes
from sphinx.util.osutil import relative_uri


def _in_cell_output(node: nodes.Node) -> bool:
    """True inside myst-nb's output container of a code cell."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.container) and "cell_output" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def drop_fixed_heights(app, doctree: nodes.document, docname: str) -> None:
    """Drop the inline height of every image that also has a width: the browser derives it from the PNG's shape."""
    for image in doctree.findall(nodes.image):
        if "width" in image and "height" in image:
            del image["height"]


def restart_unnumbered_figures(app, env) -> list[str]:
    """Number each unnumbered page's figures (tables, code blocks) from 1; return the pages whose numbers changed."""
    changed = []
    for docname, by_type in env.toc_fignumbers.items():
        if env.toc_secnumbers.get(docname):
            continue  # a page in a numbered part: Fig. <chapter>.<n> already restarts per chapter
        for numbers in by_type.values():
            restarted = {figure_id: (position,) for position, figure_id in enumerate(numbers, start=1)}
            if restarted != numbers:
                numbers.update(restarted)
                changed.append(docname)
    return sorted(set(changed))


def link_output_images(app, doctree: nodes.document, docname: str) -> None:
    """Wrap each cell-output image not already in a link in a reference to the copy Sphinx writes to _images/."""
    if app.builder.format != "html":
        return
    images_dir = relative_uri(app.builder.get_target_uri(docname), app.builder.imagedir)
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.reference) or not _in_cell_output(image):
            continue
        source = image.get("candidates", {}).get("*", image["uri"])
        if source not in app.env.images:  # a remote or unknown image: nothing local to link to
            continue
        link = nodes.reference("", "", internal=True, classes=["image-reference", "figure-zoom"],
                               refuri=posixpath.join(images_dir, app.env.images[source][1]))
        image.replace_self(link)
        link.append(image)


def setup(app) -> dict:
    """Register the hook: after references resolve, before the HTML writer (and Sphinx's own scaled-image links)."""
    app.connect("env-get-updated", restart_unnumbered_figures, priority=900)  # after Sphinx numbers them (500)
    app.connect("doctree-resolved", drop_fixed_heights)
    app.connect("doctree-resolved", link_output_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
