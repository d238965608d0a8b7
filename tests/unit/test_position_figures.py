"""helpers/position_figures.py: the learned-position chapter's figures, read back from matplotlib's artists."""

from __future__ import annotations

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure

from helpers import (
    absolute_position_predictions,
    cosine_similarity_matrix,
    diagonal_profile,
    offset_profiles,
    pca_trajectory,
    position_band_profile,
    probe_scatter,
    sinusoidal_table,
)

matplotlib.use("Agg")


def test_plots_return_figures():
    rows = sinusoidal_table(64, 32)
    norms = torch.linalg.norm(rows, dim=1)
    neighbour = torch.diagonal(cosine_similarity_matrix(rows), 1)
    figures = [
        position_band_profile(norms, neighbour, edges=(16, 32)),
        offset_profiles({"sinusoid": diagonal_profile(cosine_similarity_matrix(rows), 10)}),
        pca_trajectory(rows[:, :2], [0.5, 0.4], window=12),
        probe_scatter({"sinusoid": absolute_position_predictions(rows)}),
    ]
    assert all(isinstance(figure, Figure) for figure in figures)
    assert [len(f.axes) for f in figures] == [2, 1, 3, 1]  # pca_trajectory: two panels and a colour bar
    matplotlib.pyplot.close("all")


def test_offset_profiles_tell_lines_apart_without_colour():
    """Each profile has its own dash pattern and marker, so a reader who cannot see the colours can still follow it."""
    similarity = cosine_similarity_matrix(sinusoidal_table(64, 32))
    profiles = {f"rows {a}..{a + 15}": diagonal_profile(similarity, 8, a, a + 16) for a in (0, 16, 32)}
    profiles["all"] = diagonal_profile(similarity, 8)
    lines = offset_profiles(profiles).axes[0].get_lines()[:len(profiles)]
    assert [line.get_label() for line in lines] == list(profiles)
    cues = [(line.get_linestyle(), line.get_marker()) for line in lines]
    assert len({style for style, _ in cues}) == len(profiles) and len({m for _, m in cues}) == len(profiles)
    for line, profile in zip(lines, profiles.values(), strict=True):
        np.testing.assert_array_equal(line.get_ydata(), profile.float().numpy())  # drawn in float32
    matplotlib.pyplot.close("all")
