"""The pre-training chapter's figures: the band against offset over training, and the measures, their gap and the
held-out loss against training steps.

Taught in "Pre-train a tiny BERT" (book/pretrain_positions.ipynb); the numbers come from helpers.pretraining.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from helpers.plots import LINE_STYLES, MARKERS, OKABE_ITO
from helpers.pretraining_stats import seed_values

__all__ = ["band_over_training", "table_over_training", "loss_over_training"]

GREY = "#6b6b6b"


def _profiles(results: dict, condition: str, step: int) -> np.ndarray:
    """b(k) for every seed at one step: (seeds, offsets)."""
    runs = results["runs"][condition]
    return np.array([next(r["profile"] for r in runs[s] if r["step"] == step) for s in sorted(runs, key=int)])


def band_over_training(results: dict, steps: list[int], packaged: np.ndarray, null: float, title: str = ""):
    """Mean centred cosine of rows x and x + k against k: ordered runs at `steps`, the shuffled control, the packaged
    table, and `null`, the value for rows in no order."""
    fig, ax = plt.subplots(figsize=(8.0, 3.4), layout="constrained")
    last = max(steps)
    for i, step in enumerate(steps):
        values = _profiles(results, "ordered", step)  # (seeds, K + 1)
        offsets = np.arange(1, values.shape[1])
        mean, sd = values[:, 1:].mean(axis=0), values[:, 1:].std(axis=0, ddof=1)
        ax.plot(offsets, mean, color=OKABE_ITO[i], linestyle=LINE_STYLES[i % 4], marker=MARKERS[i],
                markevery=4, markersize=4, label=f"ordered, step {step}")
        ax.fill_between(offsets, mean - sd, mean + sd, color=OKABE_ITO[i], alpha=0.2, linewidth=0)
    control = _profiles(results, "shuffled", last)[:, 1:]
    ax.plot(offsets, control.mean(axis=0), color=GREY, linestyle="--", linewidth=2,
            label=f"shuffled, step {last}")
    ax.plot(offsets, np.asarray(packaged)[1:len(offsets) + 1], color="black", linestyle=":", linewidth=2,
            label="packaged checkpoint")
    ax.axhline(null, color=GREY, linewidth=0.8, label="rows in no order")
    ax.set(xlabel="offset k (positions)", ylabel="mean centred cosine", title=title)
    fig.legend(loc="outside right center", fontsize=8, frameon=False)
    return fig


def _steps(results: dict) -> list[int]:
    return [r["step"] for r in next(iter(results["runs"]["ordered"].values()))]


def _by_condition(ax, results: dict, measure: str) -> None:
    """Ordered and shuffled runs: mean over seeds, band: one seed sd."""
    steps = _steps(results)
    for i, condition in enumerate(("ordered", "shuffled")):
        values = np.array([seed_values(results, condition, measure, s) for s in steps])  # (steps, seeds)
        mean, sd = values.mean(axis=1), values.std(axis=1, ddof=1)
        ax.plot(steps, mean, color=OKABE_ITO[i], marker=MARKERS[i], linestyle=LINE_STYLES[i], label=condition)
        ax.fill_between(steps, mean - sd, mean + sd, color=OKABE_ITO[i], alpha=0.2, linewidth=0)


def _gap_band(ax, results: dict, measure: str, color: str, marker: str, label: str) -> None:
    """Per-seed ordered - shuffled (thin lines), their mean and 95 % t-interval (band) against the step."""
    steps = _steps(results)
    gaps = np.array([seed_values(results, "ordered", measure, s) - seed_values(results, "shuffled", measure, s)
                     for s in steps])  # (steps, seeds)
    n = gaps.shape[1]
    half = stats.t.ppf(0.975, n - 1) * gaps.std(axis=1, ddof=1) / np.sqrt(n)
    ax.plot(steps, gaps, color=color, linewidth=0.6, alpha=0.45)
    ax.plot(steps, gaps.mean(axis=1), color=color, marker=marker, linewidth=2, label=label)
    ax.fill_between(steps, gaps.mean(axis=1) - half, gaps.mean(axis=1) + half, color=color, alpha=0.25, linewidth=0)
    ax.axhline(0, color="black", linewidth=0.8)


def table_over_training(results: dict, labels: dict[str, str], nulls: dict[str, float], title: str = ""):
    """Two table measures in both conditions against the step (with the null's 95 % quantile), and their ordered -
    shuffled gaps (per seed, mean, 95 % t-interval)."""
    if len(labels) != 2:
        raise ValueError(f"labels must name the two measures to draw, got {list(labels)}.")
    fig, axes = plt.subplots(1, 3, figsize=(8.0, 3.3), layout="constrained")
    for ax, measure in zip(axes[:2], labels, strict=True):
        _by_condition(ax, results, measure)
        ax.axhline(nulls[measure], color=GREY, linewidth=0.8, linestyle="-.", label="random tables, 95 %")
        ax.set(xlabel="training step", ylabel=labels[measure])
    for i, measure in enumerate(labels):
        _gap_band(axes[2], results, measure, OKABE_ITO[2 + i], MARKERS[2 + i], f"gap: {labels[measure]}")
    axes[2].set(xlabel="training step", ylabel="ordered − shuffled")
    handles = [h for ax in axes[::2] for h in ax.get_legend_handles_labels()[0]]
    names = [n for ax in axes[::2] for n in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, names, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def loss_over_training(results: dict, unigram: dict[str, float], title: str = ""):
    """The [MASK]-input held-out loss of both conditions beside the ordered runs' training loss and held-out loss on
    all scored tokens, and the unigram baselines (`unigram`: legend name -> nats, [MASK] inputs first); order
    use in both conditions; its ordered - shuffled gap (per seed, mean, 95 % t-interval)."""
    fig, axes = plt.subplots(1, 3, figsize=(8.0, 3.3), layout="constrained")
    _by_condition(axes[0], results, "held_out_loss_mask")
    steps = _steps(results)[1:]  # no training loss before the first step
    train = np.array([seed_values(results, "ordered", "train_loss", s) for s in steps]).mean(axis=1)
    axes[0].plot(steps, train, color=OKABE_ITO[0], linewidth=0.8, linestyle=":", label="ordered, training batches")
    every = np.array([seed_values(results, "ordered", "held_out_loss", s) for s in _steps(results)]).mean(axis=1)
    axes[0].plot(_steps(results), every, color=OKABE_ITO[0], linewidth=0.8, linestyle="--",
                 label="ordered, all scored tokens")
    for (name, value), style in zip(unigram.items(), ("-.", (0, (1, 3))), strict=False):
        axes[0].axhline(value, color=GREY, linewidth=1.2, linestyle=style, label=name)
    axes[0].set(xlabel="training step", ylabel="loss (nats)")
    _by_condition(axes[1], results, "order_use")
    axes[1].axhline(0, color="black", linewidth=0.8)
    axes[1].set(xlabel="training step", ylabel="order use (nats)")
    _gap_band(axes[2], results, "order_use", OKABE_ITO[2], MARKERS[2], "gap: order use")
    axes[2].set(xlabel="training step", ylabel="ordered − shuffled (nats)")
    handles, names = axes[0].get_legend_handles_labels()
    handles2, names2 = axes[2].get_legend_handles_labels()
    fig.legend(handles + handles2, names + names2, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig
