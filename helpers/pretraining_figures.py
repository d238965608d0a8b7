"""The pre-training chapter's figures: the band against offset over training, and both measures against steps.

Taught in "Watch order emerge" (book/pretrain_positions.ipynb); the numbers come from helpers.pretraining.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.plots import LINE_STYLES, MARKERS, OKABE_ITO

__all__ = ["band_over_training", "emergence_curves"]

GREY = "#6b6b6b"


def _profiles(results: dict, condition: str, step: int) -> np.ndarray:
    """b(k) for every seed at one step: (seeds, offsets)."""
    runs = results["runs"][condition]
    return np.array([next(r["profile"] for r in runs[s] if r["step"] == step) for s in sorted(runs, key=int)])


def band_over_training(results: dict, steps: list[int], packaged: np.ndarray, title: str = ""):
    """Mean cosine of rows x and x + k against k: ordered runs at `steps`, the shuffled control, the packaged table."""
    fig, ax = plt.subplots(figsize=(8.0, 3.4))
    last = max(steps)
    for i, step in enumerate(steps):
        values = _profiles(results, "ordered", step)  # (seeds, K + 1)
        offsets = np.arange(1, values.shape[1])
        mean, sd = values[:, 1:].mean(axis=0), values[:, 1:].std(axis=0, ddof=1)
        ax.plot(offsets, mean, color=OKABE_ITO[i], linestyle=LINE_STYLES[i % 4], marker=MARKERS[i],
                markevery=4, markersize=4, label=f"step {step}")
        ax.fill_between(offsets, mean - sd, mean + sd, color=OKABE_ITO[i], alpha=0.2, linewidth=0)
    control = _profiles(results, "shuffled", last)[:, 1:]
    ax.plot(offsets, control.mean(axis=0), color=GREY, linestyle="--", linewidth=2,
            label=f"shuffled order, step {last}")
    ax.plot(offsets, np.asarray(packaged)[1:len(offsets) + 1], color="black", linestyle=":", linewidth=2,
            label="packaged checkpoint")
    ax.axhline(0, color=GREY, linewidth=0.6)
    ax.set(xlabel="offset k (positions)", ylabel="mean cos(row x, row x + k)", title=title)
    fig.legend(loc="outside right center", fontsize=8, frameon=False)
    return fig


def emergence_curves(results: dict, summaries: dict[str, dict], packaged: dict[str, float],
                     labels: dict[str, str], title: str = ""):
    """One panel per measure: ordered and shuffled runs against training steps (mean, band: seed sd)."""
    fig, axes = plt.subplots(1, len(summaries), figsize=(8.0, 3.2), squeeze=False)
    for ax, (measure, summary) in zip(axes[0], summaries.items(), strict=True):
        for i, condition in enumerate(("ordered", "shuffled")):
            steps = sorted(summary[condition])
            mean = np.array([summary[condition][s][0] for s in steps])
            sd = np.array([summary[condition][s][1] for s in steps])
            ax.plot(steps, mean, color=OKABE_ITO[i], marker=MARKERS[i], linestyle=LINE_STYLES[i], label=condition)
            ax.fill_between(steps, mean - sd, mean + sd, color=OKABE_ITO[i], alpha=0.2, linewidth=0)
        ax.axhline(packaged[measure], color="black", linestyle=":", linewidth=2, label="packaged checkpoint")
        ax.set(xlabel="training step", ylabel=labels[measure])
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8,
               frameon=False)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig
