"""helpers/plots.py: the figure primitives more than one chapter draws, read back from matplotlib's artists."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgb

from helpers import (
    OKABE_ITO,
    PART_COLOURS,
    embedding_pipeline_diagram,
    family_input_diagrams,
    grouped_token_bars,
    similarity_side_by_side,
    vector_strips,
)
from helpers.plots import PART_HATCHES, contrast_ratio, text_colour_on


def test_grouped_token_bars_draws_one_bar_per_token_and_series():
    tokens = ["[CLS]", "a", "[SEP]", "b", "[SEP]"]
    values = {"token": torch.rand(5), "segment": np.ones(5), "position": [1, 2, 3, 4, 5]}
    fig = grouped_token_bars(tokens, values, title="t", split_at=3)
    ax = fig.axes[0]
    assert len(ax.patches) == 15
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(values)
    plt.close(fig)
    with pytest.raises(ValueError, match="4 values for 5 tokens"):
        grouped_token_bars(tokens, {"token": torch.rand(4)})


def test_vector_strips_share_one_symmetric_scale():
    vectors = {"a": torch.tensor([1.0, -3.0, 2.0]), "b": np.array([0.5, 0.0, -0.5])}
    fig = vector_strips(vectors, title="t")
    strips = [ax for ax in fig.axes if ax.images]
    assert len(strips) == 2
    for ax, row in zip(strips, vectors.values(), strict=True):
        np.testing.assert_array_equal(ax.images[0].get_array()[0], np.asarray(row, dtype=float))
        assert ax.images[0].get_clim() == (-3.0, 3.0)  # the largest |value| of all vectors, both signs
    assert vector_strips(vectors, vmax=10.0).axes[0].images[0].get_clim() == (-10.0, 10.0)
    plt.close("all")


def test_similarity_side_by_side_draws_each_matrix_on_minus_one_to_one():
    a, b = torch.eye(3), -torch.ones(3, 3)
    fig = similarity_side_by_side({"a": a, "b": b}, title="t")
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    for ax, matrix in zip(panels, (a, b), strict=True):
        np.testing.assert_array_equal(ax.images[0].get_array(), matrix.numpy())
        assert ax.images[0].get_clim() == (-1.0, 1.0)
    plt.close("all")


# Machado, Oliveira & Fernandes (2009), full-severity simulation matrices on linear sRGB.
DEFICIENCIES = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}


def _lab_as_seen(colour: str, matrix) -> np.ndarray:
    """CIELAB (D65) of a hex colour after a colour-vision-deficiency simulation; sRGB and Lab formulas from CIE."""
    srgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    linear = np.clip(np.asarray(matrix) @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("deficiency", [None, *DEFICIENCIES])
def test_the_three_part_colours_stay_apart_for_colour_blind_readers(deficiency):
    matrix = np.eye(3) if deficiency is None else DEFICIENCIES[deficiency]
    seen = [_lab_as_seen(PART_COLOURS[part], matrix) for part in ("token", "segment", "position")]
    distances = [np.linalg.norm(a - b) for k, a in enumerate(seen) for b in seen[k + 1:]]
    assert min(distances) >= 20, (deficiency, distances)  # CIE76 ΔE; tab10's orange and green gave 5 under protanopia


def test_the_simulation_collapses_a_pair_known_to_collapse():
    """The check can fail: tab10's orange and green are near-identical under protanopia (ΔE ≈ 5)."""
    orange, green = (_lab_as_seen(c, DEFICIENCIES["protanopia"]) for c in ("#ff7f0e", "#2ca02c"))
    assert np.linalg.norm(orange - green) < 10


def _wcag_luminance(rgb) -> float:
    """WCAG 2.2 relative luminance (https://www.w3.org/TR/WCAG22/#dfn-relative-luminance) of sRGB in [0, 1]."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _wcag_contrast(a, b) -> float:
    """WCAG contrast ratio (L1 + 0.05) / (L2 + 0.05), L1 the lighter (https://www.w3.org/TR/WCAG22/#dfn-contrast-ratio)."""
    high, low = sorted((_wcag_luminance(a), _wcag_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _over_white(rgba) -> tuple:
    """The colour a reader sees: an RGBA fill composited over the white page."""
    r, g, b, alpha = rgba
    return tuple(alpha * c + (1 - alpha) for c in (r, g, b))


def _label_contrasts(fig) -> dict[str, float]:
    """Each text drawn on an axes -> its WCAG contrast with the patch it sits on (the smallest patch under it, else
    the white axes)."""
    fig.canvas.draw()
    contrasts = {}
    for ax in fig.axes:
        for text in ax.texts:
            if not text.get_text().strip():
                continue
            anchor = text.get_transform().transform(text.get_position())
            under = [p for p in ax.patches if p.get_visible() and p.contains_point(anchor)]
            fill = (1.0, 1.0, 1.0)
            if under:
                smallest = min(under, key=lambda p: p.get_window_extent().width * p.get_window_extent().height)
                fill = _over_white(smallest.get_facecolor())
            contrasts[text.get_text()] = _wcag_contrast(to_rgb(text.get_color()), fill)
    return contrasts


def test_the_wcag_formula_reproduces_known_ratios():
    """Reference values: black on white is 21:1; #777777 on white is 4.48:1 (WebAIM's contrast checker)."""
    assert _wcag_contrast((0, 0, 0), (1, 1, 1)) == pytest.approx(21.0)
    assert _wcag_contrast(to_rgb("#777777"), (1, 1, 1)) == pytest.approx(4.48, abs=0.005)


@pytest.mark.parametrize("fill", [*OKABE_ITO, *PART_COLOURS.values()])
def test_text_colour_on_every_house_colour_reaches_4_5_to_1(fill):
    chosen = text_colour_on(fill)
    assert _wcag_contrast(to_rgb(chosen), to_rgb(fill)) >= 4.5, (fill, chosen)
    assert contrast_ratio(chosen, fill) == pytest.approx(_wcag_contrast(to_rgb(chosen), to_rgb(fill)))


def test_white_labels_on_the_part_colours_fail_the_check():
    """The check can fail: the diagrams' old white labels on vermillion and reddish purple were below 4.5:1."""
    assert _wcag_contrast((1, 1, 1), to_rgb(PART_COLOURS["segment"])) < 4.5
    assert _wcag_contrast((1, 1, 1), to_rgb(PART_COLOURS["position"])) < 4.5


def test_every_label_on_the_diagrams_reaches_4_5_to_1():
    specs = {
        "all three tables": {"token": "30522 x 768", "segment": "2 x 768", "position": "512 x 768",
                             "norm": "LayerNorm", "position_enters": "added to the input", "blocks": "post-norm"},
        "rotary, projected": {"token": "50 x 16", "segment": None, "position": None, "norm": "RMSNorm",
                              "projection": "16 -> 32", "position_enters": "rotates queries and keys",
                              "position_note": "no position table", "blocks": "pre-norm"},
        "bias": {"token": "32128 x 512", "segment": None, "position": None, "position_enters":
                 "bias on attention logits", "blocks": "pre-norm (RMS)"},
    }
    figures = {"pipeline": embedding_pipeline_diagram(768, 30522, 512, 2), "families": family_input_diagrams(specs)}
    for name, fig in figures.items():
        contrasts = _label_contrasts(fig)
        assert len(contrasts) >= 8, name
        low = {text: round(ratio, 2) for text, ratio in contrasts.items() if ratio < 4.5}
        assert not low, (name, low)
    plt.close("all")


def test_grouped_bars_tell_series_apart_by_hatching_as_well_as_colour():
    tokens = ["a", "b"]
    values = {"token": [1, 2], "segment": [2, 1], "position": [1, 1], "extra": [0.5, 0.5]}
    ax = grouped_token_bars(tokens, values).axes[0]
    hatches = [ax.patches[2 * k].get_hatch() or "" for k in range(len(values))]
    assert len(set(hatches)) == len(values)
    assert hatches[:3] == [PART_HATCHES["token"], PART_HATCHES["segment"], PART_HATCHES["position"]]
    plt.close("all")
