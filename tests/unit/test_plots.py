"""helpers/plots.py: the figure primitives more than one chapter draws, read back from matplotlib's artists."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from helpers import grouped_token_bars, similarity_side_by_side, vector_strips


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
    from helpers.plots import PART_COLOURS

    matrix = np.eye(3) if deficiency is None else DEFICIENCIES[deficiency]
    seen = [_lab_as_seen(PART_COLOURS[part], matrix) for part in ("token", "segment", "position")]
    distances = [np.linalg.norm(a - b) for k, a in enumerate(seen) for b in seen[k + 1:]]
    assert min(distances) >= 20, (deficiency, distances)  # CIE76 ΔE; tab10's orange and green gave 5 under protanopia


def test_the_simulation_collapses_a_pair_known_to_collapse():
    """The check can fail: tab10's orange and green are near-identical under protanopia (ΔE ≈ 5)."""
    orange, green = (_lab_as_seen(c, DEFICIENCIES["protanopia"]) for c in ("#ff7f0e", "#2ca02c"))
    assert np.linalg.norm(orange - green) < 10
