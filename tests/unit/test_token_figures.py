"""helpers/token_figures.py: the token chapter's figures, read back from matplotlib's artists."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_hex

from helpers import norm_histogram, token_scatter

matplotlib.use("Agg")


def test_token_scatter_marks_each_group_by_colour_and_shape_and_labels_every_word():
    coords = np.array([[0.0, 0.0], [1.0, 0.1], [0.2, 1.0], [1.1, 1.2], [2.0, 0.5]])
    words, groups = ["one", "two", "red", "blue", "dog"], ["numbers", "numbers", "colours", "colours", "animals"]
    ax = token_scatter(coords, words, groups, explained=[0.3, 0.2]).axes[0]
    points = ax.collections
    assert len(points) == 3
    colours = {to_hex(c.get_facecolor()[0]) for c in points}
    shapes = {tuple(map(tuple, c.get_paths()[0].vertices.round(3))) for c in points}
    assert len(colours) == 3 and len(shapes) == 3  # a second cue: the marker shape
    for collection, group in zip(points, ["numbers", "colours", "animals"], strict=True):
        expected = coords[[g == group for g in groups]]
        np.testing.assert_array_equal(collection.get_offsets(), expected)
    labels = {t.get_text(): t for t in ax.texts}
    assert set(labels) == set(words)
    assert all(to_hex(t.get_color()) == "#000000" for t in labels.values())  # 21:1 on the white axes
    assert ax.get_xlabel() == "component 1 (30% of the variance)"
    plt.close("all")


def test_norm_histogram_counts_every_row_and_marks_each_value():
    norms = np.array([0.5, 0.6, 0.7, 1.5, 1.6])
    ax = norm_histogram(norms, {"[PAD]": 0.1, "[CLS]": 1.55}, bins=4).axes[0]
    assert sum(patch.get_height() for patch in ax.patches) == len(norms)
    marks = [line.get_xdata()[0] for line in ax.get_lines()]
    assert marks == [0.1, 1.55]  # sorted by value, one dashed line each
    assert [t.get_text().strip() for t in ax.texts] == ["[PAD]", "[CLS]"]
    plt.close("all")
