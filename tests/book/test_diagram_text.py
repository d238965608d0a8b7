"""The diagrams the helpers draw stay legible on a phone: at 390 px, each one's smallest label is 9 CSS px or more.

The helper draws the diagram again as SVG with its text kept as text: the smallest font size and the figure's
width, both in points, say what share of the figure's width a label's size takes. The browser says how wide the
chapter shows the PNG (found by its figure name), so the smallest label is font size x shown width / figure width
CSS px. The redrawn figure must have the PNG's shape (within 2%): the same drawing, cropped the same way."""

from __future__ import annotations

import io
import re

import matplotlib
import pytest
import torch

from tests.book.conftest import require_built_book
from tests.book.phone_visit import phone_visit

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SMALLEST_CSS_PX = 9
SHAPE_TOLERANCE = 0.02
PAIR = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "playing", "[SEP]"]  # the chapter's pair


def pipeline():
    from helpers.anatomy import embedding_pipeline_diagram

    return embedding_pipeline_diagram(384, 30522, 512, 2)  # the packaged checkpoint's config


def per_token_sum():
    from helpers.anatomy import EmbeddingParts, per_token_sum_figure

    types = torch.tensor([[0] * 6 + [1] * 4])  # (1, seq)
    parts = EmbeddingParts(*torch.randn(6, 1, len(PAIR), 384, generator=torch.Generator().manual_seed(0)))
    return per_token_sum_figure(PAIR, parts, types, title="Figure 2 of the BERT paper, from the weights")


def families():
    from helpers.families import FAMILIES, build_family, diagram_spec, family_input_diagrams
    from helpers.input_layers import block_norm_placement, input_layer_summary

    specs = {f"{name} ({f.released})": diagram_spec(input_layer_summary(build_family(name)),
                                                    block_norm_placement(build_family(name, tiny=True)))
             for name, f in FAMILIES.items()}
    return family_input_diagrams(specs)


DIAGRAMS = {  # figure name in the chapter -> (page, the helper's drawing)
    "fig-ata-pipeline": ("book/embedding_layer_at_a_glance", pipeline),
    "fig-ata-per-token-sum": ("book/embedding_layer_at_a_glance", per_token_sum),
    "fig-family-diagrams": ("book/one_layer_many_families", families),
}


def smallest_font_and_size(draw) -> tuple[float, float, float]:
    """(smallest font size, width, height), all in points, of the figure `draw` returns, as SVG with real text."""
    from helpers.plots import apply_house_style

    with matplotlib.rc_context():  # the rcParams come back afterwards
        apply_house_style()  # as the notebooks' setup() does
        matplotlib.rcParams["svg.fonttype"] = "none"
        fig = draw()
        svg = io.StringIO()
        fig.savefig(svg, format="svg", bbox_inches="tight")  # as the inline backend crops the PNG
        plt.close(fig)
    text = svg.getvalue()
    sizes = [float(size) for size in re.findall(r"font-size: ([\d.]+)px", text)]
    width, height = (float(v) for v in re.search(r'<svg[^>]* width="([\d.]+)pt" height="([\d.]+)pt"', text).groups())
    assert sizes, "no text found in the SVG"
    return min(sizes), width, height


def test_the_svg_reading_finds_the_font_size_matplotlib_was_given():
    fig = plt.figure(figsize=(2, 1))
    fig.text(0.5, 0.5, "label", fontsize=7.5)
    fig.text(0.2, 0.2, "bigger", fontsize=12)
    assert smallest_font_and_size(lambda: fig)[0] == pytest.approx(7.5)


@pytest.fixture(scope="module")
def shown(browser, book_url):
    """{figure name: (shown width, natural width, natural height)} of each diagram's PNG at a phone's width (each page
    loaded once, in the phone visit tests/book/phone_visit.py shares with test_phone_width and test_figures)."""
    require_built_book()
    pages = phone_visit(browser, book_url)[0]
    return {name: pages[stem].named.get(name) for name, (stem, _) in DIAGRAMS.items()}


@pytest.mark.parametrize("name", DIAGRAMS)
def test_the_smallest_diagram_label_is_at_least_9_css_px_on_a_phone(shown, name):
    assert shown[name], f"{name}: no such figure in {DIAGRAMS[name][0]}"
    shown_width, natural_width, natural_height = shown[name]
    font, width, height = smallest_font_and_size(DIAGRAMS[name][1])
    assert abs((width / height) / (natural_width / natural_height) - 1) < SHAPE_TOLERANCE, "not the same drawing"
    assert font * shown_width / width >= SMALLEST_CSS_PX, f"{name}: {font * shown_width / width:.1f} CSS px"
