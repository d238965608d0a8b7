"""The end of the embedding layer in detail: LayerNorm by hand, what dropout does, each part's share of the sum,
and what float16, bfloat16 and another device change."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from helpers.anatomy import EmbeddingParts, check_embedding_inputs
from helpers.plots import LINE_STYLES, MARKERS, OKABE_ITO, PART_COLOURS, _numpy, grouped_token_bars

__all__ = ["layer_norm_by_hand", "dropout_statistics", "part_shares", "precision_tolerance", "compare_on_device",
           "layer_norm_steps", "dropout_scatter", "part_share_bars", "precision_error_plot"]


def layer_norm_by_hand(x, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last axis: (x - mean) / sqrt(biased variance + eps), then * weight + bias if given.

    Taught in the sum and LayerNorm, "LayerNorm by hand"."""
    x = torch.as_tensor(x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}.")
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: LayerNorm needs at least one feature in the last axis.")
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}.")
    hidden = x.shape[-1]
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and tuple(value.shape) != (hidden,):
            raise ValueError(f"{name} has shape {tuple(value.shape)} but x has {hidden} features in its last axis: "
                             "gamma and beta hold one value per feature.")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1) biased: divide by hidden, not hidden - 1
    eps_here = torch.tensor(eps, dtype=x.dtype, device=x.device)  # eps as x's dtype stores it (1e-12 -> 0 in fp16)
    x_hat = (x - mean) / torch.sqrt(variance + eps_here)  # (..., hidden) mean 0, variance 1 per token
    if weight is not None:
        x_hat = x_hat * weight  # gamma
    if bias is not None:
        x_hat = x_hat + bias  # beta
    return x_hat


@dataclass(frozen=True)
class DropoutStatistics:
    """What dropout did to a tensor: how many entries it zeroed and how it scaled the survivors."""

    p: float
    elements: int  # entries that were non-zero before dropout (a zero stays zero either way)
    dropped: int
    zero_fraction: float  # dropped / elements: close to p
    standard_error: float  # sqrt(p (1 - p) / elements): the spread of zero_fraction around p by chance
    expected_scale: float  # 1 / (1 - p)
    max_scale_error: float  # max over survivors of |after / before - 1/(1-p)|, relative to 1/(1-p)


def dropout_statistics(before, after, p: float) -> DropoutStatistics:
    """Compare a tensor before and after dropout: fraction of zeros and scale of the survivors.

    Taught in the sum and LayerNorm, "Dropout: off in evaluation, on in training"."""
    before, after = torch.as_tensor(before), torch.as_tensor(after)
    if before.shape != after.shape:
        raise ValueError(f"before has shape {tuple(before.shape)} but after has {tuple(after.shape)}: "
                         "pass the same tensor before and after dropout.")
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1) (the probability of zeroing an entry), got {p}.")
    nonzero = before != 0
    if not nonzero.any():
        raise ValueError("before holds no non-zero entry: there is nothing dropout could drop.")
    if ((after != 0) & ~nonzero).any():
        raise ValueError("after is non-zero where before is zero: it is not dropout applied to before.")
    dropped = (after == 0) & nonzero
    kept = (after != 0) & nonzero
    elements, n_dropped = int(nonzero.sum()), int(dropped.sum())
    scale = 1.0 / (1.0 - p)
    ratio = after[kept].double() / before[kept].double()
    error = float(((ratio - scale).abs() / scale).max()) if kept.any() else 0.0
    return DropoutStatistics(p=p, elements=elements, dropped=n_dropped, zero_fraction=n_dropped / elements,
                             standard_error=math.sqrt(p * (1 - p) / elements), expected_scale=scale,
                             max_scale_error=error)


def part_shares(parts: EmbeddingParts) -> dict[str, torch.Tensor]:
    """Each part's share of the sum per token, <part, summed> / |summed|^2, each (batch, seq); they add up to 1.

    Taught in the sum and LayerNorm, "Who contributes what"."""
    summed = parts.summed  # (batch, seq, hidden)
    squared_norm = (summed * summed).sum(dim=-1)  # (batch, seq)
    if (squared_norm == 0).any():
        raise ValueError("A token's summed vector is exactly zero: its shares are undefined.")
    names = ("token", "segment", "position")
    return {name: (getattr(parts, name) * summed).sum(dim=-1) / squared_norm for name in names}


def precision_tolerance(dtype: torch.dtype, scale: float, ulps: float = 8.0) -> float:
    """A tolerance of `ulps` units of the dtype's machine epsilon at magnitude `scale`: ulps * eps * scale.

    Taught in the sum and LayerNorm, "bfloat16 and float16 on the CPU"."""
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}.")
    if not (math.isfinite(scale) and scale >= 0) or not ulps > 0:
        raise ValueError(f"scale must be finite and >= 0 and ulps > 0, got scale={scale}, ulps={ulps}.")
    return ulps * torch.finfo(dtype).eps * scale


def compare_on_device(embeddings: nn.Module, input_ids, token_type_ids=None, device="cpu",
                      dtype: torch.dtype = torch.float32) -> float:
    """Max |difference| between the layer run on (device, dtype) and the same layer in float32 on the CPU.

    Taught in the sum and LayerNorm, "bfloat16 and float16 on the CPU"."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}.") from None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype such as torch.float16, got {dtype}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but torch sees no CUDA device here: use device='cpu', "
                           "or run this on a machine with a GPU.")
    input_ids, token_type_ids, _ = check_embedding_inputs(embeddings, input_ids, token_type_ids)
    # Copies: .to() and .eval() act in place, and the caller's layer must stay as it is.
    reference_layer = copy.deepcopy(embeddings).to(device="cpu", dtype=torch.float32).eval()
    layer = copy.deepcopy(embeddings).to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        reference = reference_layer(input_ids.cpu(), token_type_ids.cpu())  # (batch, seq, hidden) float32
        output = layer(input_ids.to(device), token_type_ids.to(device))  # (batch, seq, hidden) in dtype
    return float((output.float().cpu() - reference).abs().max())


def layer_norm_steps(steps: dict[str, object], title: str = ""):
    """One row per LayerNorm step: a token's values per dimension on a shared y scale, with mean and +-1 std.

    Taught in the sum and LayerNorm, "Mean 0 and variance 1, but only before γ and β"."""
    rows = {name: _numpy(v).reshape(-1) for name, v in steps.items()}  # name -> (hidden,)
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.0, 1.35 * len(rows) + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    colours = [PART_COLOURS["other"], PART_COLOURS["token"], PART_COLOURS["position"], PART_COLOURS["segment"]]
    for i, (ax, (name, row)) in enumerate(zip(axes[:, 0], rows.items(), strict=True)):
        mean, std = float(row.mean()), float(row.std())  # biased std, as LayerNorm uses
        ax.bar(np.arange(row.size), row, width=1.0, color=colours[i % len(colours)], linewidth=0)
        ax.axhspan(mean - std, mean + std, color="black", alpha=0.08, linewidth=0)
        ax.axhline(mean, color="black", linewidth=0.8, linestyle="--")
        ax.set_ylabel(name, rotation=0, ha="right", va="center")
        ax.text(1.01, 0.5, f"mean {mean:+.3f}\nstd  {std:.3f}", transform=ax.transAxes, ha="left", va="center",
                family="monospace", fontsize=8)
    axes[-1, 0].set_xlabel("dimension")
    axes[-1, 0].set_xlim(-0.5, max(r.size for r in rows.values()) - 0.5)
    if title:
        axes[0, 0].set_title(title)
    return fig


def dropout_scatter(before, after, p: float, title: str = ""):
    """Each entry after dropout against before it: dropped entries sit on 0, kept ones on the line x / (1 - p).

    Taught in the sum and LayerNorm, "Dropout: off in evaluation, on in training"."""
    x, y = _numpy(before).reshape(-1), _numpy(after).reshape(-1)
    dropped = (y == 0) & (x != 0)
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    ax.scatter(x[~dropped], y[~dropped], s=4, color=PART_COLOURS["token"], alpha=0.5,
               label=f"kept ({int((~dropped).sum())}): scaled by 1/(1-p) = {1 / (1 - p):.3f}")
    ax.scatter(x[dropped], y[dropped], s=14, marker="x", linewidths=0.8, color=PART_COLOURS["segment"],
               label=f"dropped ({int(dropped.sum())}): set to 0")
    line = np.array([x.min(), x.max()])
    ax.plot(line, line, color="black", linewidth=0.8, linestyle=":", label="unchanged (y = x)")
    ax.plot(line, line / (1 - p), color=PART_COLOURS["token"], linewidth=0.8)
    ax.set(xlabel="value before dropout", ylabel="value after dropout", title=title or f"dropout, p = {p}")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return fig


def part_share_bars(shares: dict[str, object], tokens: list[str], title: str = "", split_at: int | None = None):
    """Each part's share of the summed vector per token (grouped_token_bars with a zero line and legend room).

    Taught in the sum and LayerNorm, "Who contributes what"."""
    fig = grouped_token_bars(tokens, shares, title=title, ylabel="share of the sum", split_at=split_at)
    ax = fig.axes[0]
    ax.axhline(0, color="black", linewidth=0.6)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.15 * (high - low))  # headroom for the legend
    return fig


def precision_error_plot(errors: dict[str, object], x=None, tolerance: float | None = None, title: str = "",
                         xlabel: str = ""):
    """Errors in units of eps(dtype) x scale: bars per dtype (x None) or one line per dtype against x (log axes).

    A dotted line marks half a unit (the output's final rounding), a dashed one the tolerance if given.
    Taught in the appendix "Precision and devices"."""
    fig, ax = plt.subplots(figsize=(5.6, 3.0))
    if x is None:
        ax.bar(list(errors), [float(v) for v in errors.values()], color=OKABE_ITO[:len(errors)])
        ax.set_yscale("log")
    else:
        for i, (name, values) in enumerate(errors.items()):  # colour, marker and dash pattern per dtype
            ax.plot(x, _numpy(values), LINE_STYLES[i % len(LINE_STYLES)], marker=MARKERS[i % len(MARKERS)],
                    color=OKABE_ITO[i % len(OKABE_ITO)], label=name)
        ax.set(xscale="log", xticks=list(x), xticklabels=[str(v) for v in x], xlabel=xlabel)
        ax.legend(frameon=False, fontsize=8)
    ax.axhline(0.5, color="black", lw=0.8, ls=":")
    if tolerance is not None:
        ax.axhline(tolerance, color="black", lw=0.8, ls="--")
    ax.set(ylabel="max |difference| / (eps x scale)", title=title)
    return fig
