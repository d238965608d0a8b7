"""Sphinx extension: a phone gets each figure's phone layout, a desktop never fetches it.

helpers.plots draws, beside each figure's desktop PNG, a phone layout (panels in one column, 330 px wide)
into the output's metadata, with the smallest text of each in CSS px. Here each cell-output image whose PNG is one
of those outputs (matched by content) becomes `<picture>`: a `<source>` for screens up to PHONE_MAX_PX wide with the
phone PNG (written to _images/), then the same `<img>` as before, so the alt text, the zoom link to the full-size
desktop image and print (the PDF) are unchanged. Both text sizes go on the <picture> as data attributes, which the
browser test (tests/book/test_figures.py) scales by the width the figure is shown at.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from pathlib import Path

from docutils import nodes
from sphinx.util.osutil import relative_uri

PHONE_MAX_PX = 767  # widths that get the phone layout: below 768 px a desktop PNG showed text under 9 px (7.5 at 601)
MEDIA = f"screen and (max-width: {PHONE_MAX_PX}px)"  # print and the PDF keep the desktop image


def visit_image(self, node: nodes.image) -> None:
    """Open a <picture> (with the phone <source> where there is one) around a recorded figure, then write the <img>
    as Sphinx does; the image stays the only child of its zoom link, as Sphinx requires."""
    if "text_px" in node:
        attributes = {"class": "phone-figure", "data-text-px": node["text_px"]}
        if node.get("phone_uri"):
            attributes |= {"class": "phone-figure with-phone", "data-phone-text-px": node["phone_text_px"],
                           "data-phone-width": node["phone_width"]}
        self.body.append(self.starttag(nodes.Element(), "picture", "", **attributes))
        if node.get("phone_uri"):
            self.body.append(f'<source media="{MEDIA}" srcset="{node["phone_uri"]} 2x" '
                             f'width="{node["phone_width"]}" height="{node["phone_height"]}">')
    type(self).visit_image(self, node)


def depart_image(self, node: nodes.image) -> None:
    type(self).depart_image(self, node)
    if "text_px" in node:
        self.body.append("</picture>")


def figure_records(notebook: dict) -> dict[str, dict]:
    """sha256 of each desktop PNG output of an executed notebook (its JSON) -> its metadata (sizes, text, phone PNG)."""
    records = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            png, metadata = output.get("data", {}).get("image/png"), output.get("metadata", {}).get("image/png", {})
            if png and "smallest_text_px" in metadata:
                records[hashlib.sha256(base64.b64decode(png)).hexdigest()] = metadata
    return records


def executed_records(app) -> dict[str, dict]:
    """The records of every notebook the build rendered, read once per build: myst-nb renders a cached execution
    from jupyter-cache (the executed copy it writes to jupyter_execute/ is then the stored notebook), and a forced
    or automatic execution from the copy it writes."""
    if not hasattr(app, "phone_figure_records"):
        from jupyter_cache import get_cache

        config = app.env.mystnb_config
        records = {}
        for path in sorted(Path(config.output_folder).rglob("*.ipynb")):
            records |= figure_records(json.loads(path.read_text()))
        if config.execution_cache_path and Path(config.execution_cache_path).exists():
            cache = get_cache(config.execution_cache_path)
            for record in cache.list_cache_records():
                records |= figure_records(cache.get_cache_bundle(record.pk).nb)
        app.phone_figure_records = records
    return app.phone_figure_records


def serve_phone_figures(app, doctree: nodes.document, docname: str) -> None:
    """Mark each cell-output image that has a record with its text size and phone PNG (written to _images/)."""
    if app.builder.format != "html":
        return
    records = executed_records(app)
    images_dir = relative_uri(app.builder.get_target_uri(docname), app.builder.imagedir)
    for image in list(doctree.findall(nodes.image)):
        source = image.get("candidates", {}).get("*", image["uri"])
        if source not in app.env.images:
            continue
        record = records.get(hashlib.sha256((Path(app.srcdir) / source).read_bytes()).hexdigest())
        if record is None:
            continue
        image["text_px"] = record["smallest_text_px"]
        if "phone" in record:
            phone = base64.b64decode(record["phone"]["png"])
            name = f"phone-{hashlib.sha256(phone).hexdigest()[:32]}.png"
            target = Path(app.builder.outdir) / app.builder.imagedir / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(phone)
            image["phone_uri"] = posixpath.join(images_dir, name)
            image["phone_text_px"] = record["phone"]["smallest_text_px"]
            image["phone_width"], image["phone_height"] = record["phone"]["width"], record["phone"]["height"]


def setup(app) -> dict:
    """Write images with their <picture>; mark them after sphinx_figures has linked each to its full size (500)."""
    app.add_node(nodes.image, override=True, html=(visit_image, depart_image))
    app.connect("doctree-resolved", serve_phone_figures, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
