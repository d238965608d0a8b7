"""Sphinx extension: every figure a notebook cell draws links to its full-size image, so a phone reader can tap to zoom.

A figure 800 px wide shrinks to the 360 px of a phone's column, and its 10-pt text with it (about 6 px); the linked
image opens at its natural size, where that text is about 14 px and the browser zooms further.
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
    app.connect("doctree-resolved", link_output_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
