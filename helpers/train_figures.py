"""The figures of "Train it": accuracy by scheme with intervals, accuracy at each position, the learned rows' norms."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from helpers.plots import OKABE_ITO
from helpers.position_stats import cell_key

__all__ = ["accuracy_by_position", "accuracy_summary", "position_accuracy", "row_norms_figure", "SCHEME_NAMES"]

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


def accuracy_summary(table: dict, chance: float, ceiling: float, tasks=("copy-back", "position-3"),
                     masks=("bidirectional", "causal")):
    """Before L at L (hollow circles) and past L at 4L (filled squares) with their intervals, a row per scheme, a
    panel per mask x task; chance dotted; symmetric ALiBi's ceiling dashed across its row in the encoder panels.

    table: {(scheme, mask, task, length, part): (mean, low, high)}, lengths 16 and 64 as the chapter computes."""
    schemes = list(SCHEME_NAMES)
    parts = [((16, "in"), "before L, at L", "o", "none", OKABE_ITO[0], -0.17),
             ((64, "past"), "past L, at 4L", "s", "full", OKABE_ITO[1], 0.17)]
    fig, axes = plt.subplots(len(masks), len(tasks), figsize=(8.0, 5.2), sharex=True, sharey=True,
                             layout="constrained")
    for row, mask in enumerate(masks):
        for column, task in enumerate(tasks):
            ax = axes[row, column]
            ax.axvline(chance, color="#6b6b6b", linestyle=":", linewidth=1.2)
            if mask == "bidirectional":  # only the symmetric encoder ALiBi has a ceiling
                y = schemes.index("alibi")
                ax.plot([ceiling, ceiling], [y - 0.45, y + 0.45], color="black", linestyle="--", linewidth=1.5)
            for part, _, marker, fill, colour, shift in parts:
                for y, scheme in enumerate(schemes):
                    mean, low, high = table[(scheme, mask, task, *part)]
                    ax.errorbar(mean, y + shift, xerr=[[mean - low], [high - mean]], marker=marker,
                                fillstyle=fill, color=colour, markersize=6, capsize=2, linewidth=1.2)
            ax.set_title(f"{'encoder' if mask == 'bidirectional' else 'decoder'}, {task}", fontsize=9)
            ax.set_yticks(range(len(schemes)), [SCHEME_NAMES[s] for s in schemes], fontsize=8)
            ax.set_xlim(-0.03, 1.05)
            ax.set_ylim(len(schemes) - 0.5, -0.5)
    fig.supxlabel("accuracy (mean over seeds and test rows; bars: 95% intervals)", fontsize=9)
    handles = [Line2D([], [], marker=m, fillstyle=f, color=c, linestyle="none") for _, _, m, f, c, _ in parts]
    handles += [Line2D([], [], color="#6b6b6b", linestyle=":"), Line2D([], [], color="black", linestyle="--")]
    labels = [name for _, name, *_ in parts] + ["chance", "ceiling of symmetric ALiBi (encoder)"]
    fig.legend(handles, labels, loc="outside upper center", ncols=4, frameon=False, fontsize=8)
    return fig
