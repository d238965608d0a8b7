"""tools/book/sphinx_phone_figures.py: which executed outputs it knows by content, and the <picture> it writes."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import matplotlib.pyplot as plt
import pytest
from docutils import nodes
from IPython.core.interactiveshell import InteractiveShell

from helpers import setup
from tools.book.sphinx_phone_figures import MEDIA, depart_image, figure_records, visit_image


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    """An executed notebook's JSON holding one wide figure's output as a chapter's cell makes it, and a text output."""
    shell = InteractiveShell.instance()
    setup()
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    data, metadata = shell.display_formatter.format(fig)
    plt.close(fig)
    outputs = [{"output_type": "display_data", "data": data, "metadata": metadata},
               {"output_type": "stream", "name": "stdout", "text": "hello"}]
    path = tmp_path_factory.mktemp("nb") / "chapter.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": outputs}]}))
    return path, data["image/png"], metadata["image/png"]


def test_records_are_keyed_by_the_sha256_of_the_desktop_png(notebook):
    path, png, metadata = notebook
    records = figure_records(json.loads(path.read_text()))
    assert list(records) == [hashlib.sha256(base64.b64decode(png)).hexdigest()]
    assert records[next(iter(records))] == metadata
    assert figure_records({"cells": [{"cell_type": "markdown"}]}) == {}


class Writer:
    """What the hooks need of Sphinx's HTML5 translator: its body, starttag and its own image methods."""

    def __init__(self):
        self.body = []

    def starttag(self, node, tagname, suffix="\n", **attributes):
        written = " ".join(f'{key}="{value}"' for key, value in sorted(attributes.items()))
        return f"<{tagname} {written}>{suffix}"

    def visit_image(self, node):
        self.body.append(f'<img src="{node["uri"]}">')

    def depart_image(self, node):
        pass


def written(**marks) -> str:
    writer = Writer()
    image = nodes.image(uri="../_images/desktop.png", **marks)
    visit_image(writer, image)
    depart_image(writer, image)
    return "".join(writer.body)


def test_the_picture_offers_the_phone_png_to_narrow_screens_only():
    html = written(text_px=11.11, phone_uri="../_images/phone-x.png", phone_text_px=13.89, phone_width=341,
                   phone_height=266)
    assert html.startswith("<picture ") and html.endswith('<img src="../_images/desktop.png"></picture>')
    assert 'class="phone-figure with-phone"' in html and 'data-text-px="11.11"' in html
    source = re.search(r"<source [^>]+>", html).group()
    assert f'media="{MEDIA}"' in source and 'srcset="../_images/phone-x.png 2x"' in source
    assert 'width="341"' in source and 'height="266"' in source
    assert MEDIA.startswith("screen and (max-width:")  # print (the PDF) keeps the desktop image
    html = written(text_px=12.0)
    assert "<source" not in html and 'class="phone-figure"' in html
    assert written() == '<img src="../_images/desktop.png">'  # any other image: as Sphinx writes it
