"""The figures of "Train it": accuracy at each position for every scheme, and the learned rows' norms."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from helpers.plots import OKABE_ITO
from helpers.position_stats import cell_key

__all__ = ["accuracy_by_position", "position_accuracy", "row_norms_figure", "SCHEME_NAMES"]

SCHEME_NAMES = {"none": "No positions", "learned": "Learned", "sinusoid": "Sinusoid", "t5": "T5 bias",
                "alibi": "ALiBi", "rope": "RoPE"}


def position_accuracy(results: dict, key: str) -> np.ndarray:
    """Mean over seeds of the share of test rows answered right at each position of the longest test length;
    NaN where no position is scored (before the shift)."""
    per_seed = np.array([scores["by_position"] for scores in results["cells"][key]["plain"]], dtype=float)
    accuracy = per_seed.mean(axis=0) / results["config"]["test_rows"]
    accuracy[: results["config"]["shift"]] = np.nan
    return accuracy


def accuracy_by_position(results: dict, tasks=("copy-back", "position-3"),
                         masks=("bidirectional", "causal")):
    """One heat map per mask x task: a row per scheme, a column per position, colour = accuracy; L marked below."""
    schemes = list(SCHEME_NAMES)
    L = results["config"]["train_length"]
    fig, axes = plt.subplots(len(masks), len(tasks), figsize=(8.0, 4.6), sharex=True, sharey=True,
                             layout="constrained")
    for row, mask in enumerate(masks):
        for column, task in enumerate(tasks):
            ax = axes[row, column]
            grid = np.stack([position_accuracy(results, cell_key(s, mask, task)) for s in schemes])
            image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap="cividis", vmin=0, vmax=1,
                              interpolation="nearest")
            ax.axvline(L - 0.5, color=OKABE_ITO[1], linewidth=2)  # the first untrained position, between cells
            ax.set_title(f"{'encoder' if mask == 'bidirectional' else 'decoder'}, {task}", fontsize=9)
            ax.set_yticks(range(len(schemes)), [SCHEME_NAMES[s] for s in schemes], fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("query position (test length 4L)")
    fig.colorbar(image, ax=axes, label="accuracy (mean of seeds)", shrink=0.8)
    fig.legend([Line2D([], [], color=OKABE_ITO[1], linewidth=2)], ["training length L: positions to its right "
               "were never trained"], loc="outside lower center", frameon=False, fontsize=8)
    return fig


def row_norms_figure(norms, initial_norms, train_length: int):
    """Norm of each learned position row after training and at initialisation; a line at L, named in the legend."""
    fig, ax = plt.subplots(figsize=(8.0, 3.0), layout="constrained")
    positions = range(len(norms))
    ax.plot(positions, norms, color=OKABE_ITO[0], marker="o", markersize=3, label="after training")
    ax.plot(positions, initial_norms, color=OKABE_ITO[1], linestyle="none", marker="s", markersize=7,
            fillstyle="none", label="at initialisation")  # hollow and on top: visible where the two coincide
    ax.axvline(train_length - 0.5, color="#6b6b6b", linestyle=":", label="training length L")
    ax.set(xlabel="position", ylabel="norm of the row", title="Learned position rows, trained and untrained")
    fig.legend(frameon=False, fontsize=8, loc="outside right center")
    return fig
