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
