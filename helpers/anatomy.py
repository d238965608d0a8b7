"""BERT's embedding layer taken apart: inputs checked, three lookups, their sum, LayerNorm, dropout.

LayerNorm, dropout and precision in detail: layernorm.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import nn

from helpers import validation
from helpers.plots import DIVERGING, PART_COLOURS, text_colour_on
from helpers.tables import ResultTable

__all__ = ["check_embedding_inputs", "embedding_parts", "embedding_parameter_table", "embedding_pipeline_diagram"]

DIAGRAM_TEXT = 10  # points: a diagram about 4.5 inches wide shows it at 10 CSS px or more in a phone's column


@dataclass
class EmbeddingParts:
    """The named intermediate tensors of BertEmbeddings.forward, each (batch, seq, hidden)."""

    token: torch.Tensor
    segment: torch.Tensor
    position: torch.Tensor
    summed: torch.Tensor
    normalized: torch.Tensor
    output: torch.Tensor


def _as_ids(name: str, ids) -> torch.Tensor:
    return validation.ids_tensor(name, ids)  # (batch, seq) long; refuses BatchEncodings, strings, ragged lists


def _check_range(name: str, ids: torch.Tensor, rows: int, table: str, advice: str) -> None:
    bad = (ids < 0) | (ids >= rows)
    if bad.any():
        value = int(ids[bad][0])
        raise ValueError(f"{name} holds {value}, outside the {table} of {rows} rows (0..{rows - 1}). {advice}")


def check_embedding_inputs(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None):
    """Validate ids against the layer's tables; return (input_ids, token_type_ids, position_ids), each (batch, seq).

    Taught in segment embeddings, "Limits and relatives"."""
    validation.check_embeddings(embeddings, "check_embedding_inputs")
    vocab_rows = embeddings.word_embeddings.num_embeddings
    type_rows = embeddings.token_type_embeddings.num_embeddings
    limit = embeddings.position_embeddings.num_embeddings
    input_ids = _as_ids("input_ids", input_ids)
    batch, seq = input_ids.shape
    if seq > limit and position_ids is None:
        raise ValueError(
            f"The sequence has {seq} tokens but the position table has {limit} rows. "
            f"Truncate it (tokenizer(..., truncation=True, max_length={limit})) or split it into windows."
        )
    _check_range("input_ids", input_ids, vocab_rows, "token table",
                 "Use the tokenizer that belongs to this checkpoint.")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # BertEmbeddings' zeros buffer does the same
    token_type_ids = _as_ids("token_type_ids", token_type_ids)
    if token_type_ids.shape != input_ids.shape:
        raise ValueError(
            f"token_type_ids has shape {tuple(token_type_ids.shape)} but input_ids has {tuple(input_ids.shape)}: "
            "give one token type per token (tokenizer(text_a, text_b) returns both, aligned)."
        )
    _check_range("token_type_ids", token_type_ids, type_rows, "token-type (segment) table",
                 "BERT knows sentence A (0) and sentence B (1) only.")
    if position_ids is None:
        position_ids = torch.arange(seq, device=input_ids.device).expand(batch, seq)  # on the ids' device
    position_ids = _as_ids("position_ids", position_ids)
    if position_ids.shape[-1] != seq:
        raise ValueError(f"position_ids has {position_ids.shape[-1]} positions but the sequence has {seq} tokens.")
    if position_ids.shape[0] not in (1, batch):
        raise ValueError(f"position_ids has batch size {position_ids.shape[0]} but input_ids has {batch}: "
                         "give one row of positions for the whole batch, or one per sequence.")
    _check_range("position_ids", position_ids, limit, "position table",
                 "Positions count from 0 and stop at the table's last row.")
    return input_ids, token_type_ids, position_ids.expand(batch, seq)


def embedding_parts(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None) -> EmbeddingParts:
    """Rebuild BertEmbeddings.forward step by step, summing in the model's own order.

    Taught in the layer at a glance, "What the layer holds"."""
    if validation.check_embeddings(embeddings, "embedding_parts") == "RobertaEmbeddings" and position_ids is None:
        position_ids = embeddings.create_position_ids_from_input_ids(  # RoBERTa counts from padding_idx + 1
            _as_ids("input_ids", input_ids), embeddings.padding_idx)
    input_ids, token_type_ids, position_ids = check_embedding_inputs(embeddings, input_ids, token_type_ids,
                                                                     position_ids)
    token = embeddings.word_embeddings(input_ids)  # (batch, seq, hidden)
    segment = embeddings.token_type_embeddings(token_type_ids)  # (batch, seq, hidden)
    position = embeddings.position_embeddings(position_ids)  # (batch, seq, hidden)
    summed = (token + segment) + position  # the model's order: (word + type) + position
    normalized = embeddings.LayerNorm(summed)
    output = embeddings.dropout(normalized)
    return EmbeddingParts(token, segment, position, summed, normalized, output)


def embedding_parameter_table(model: nn.Module) -> list[dict]:
    """Rows (part, shape, parameters, share of the whole model) for the embedding layer's parameters.

    Taught in the layer at a glance, "Where the parameters are"."""
    total = sum(p.numel() for p in model.parameters())
    rows = []
    for name, parameter in model.embeddings.named_parameters():
        rows.append({"part": name, "shape": tuple(parameter.shape), "parameters": parameter.numel(),
                     "share": parameter.numel() / total})
    return rows


def embedding_pipeline_diagram(hidden_size: int, vocab_size: int, max_positions: int, type_vocab_size: int):
    """Draw the embedding layer's four steps, top to bottom: three lookups, their sum, LayerNorm, dropout.

    Tall and narrow, with 10-pt labels, so that the text stays legible in a phone's column.
    Taught in the layer at a glance, "What the layer holds"."""
    fig, ax = plt.subplots(figsize=(4.4, 5.8))
    ax.set(xlim=(0, 6), ylim=(0.5, 8.45), aspect="equal")  # equal units: the sum's circle stays round
    ax.axis("off")

    def box(x, y, w, text, colour, h=1.1):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05", fc=colour, ec="black"))
        ax.text(x, y, text, ha="center", va="center", fontsize=DIAGRAM_TEXT, color=text_colour_on(colour))

    def arrow(start, end):
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="black"))

    lookups = [
        ("input_ids", f"token table\n{vocab_size} x {hidden_size}", PART_COLOURS["token"], 1.0),
        ("token_type_ids", f"segment table\n{type_vocab_size} x {hidden_size}", PART_COLOURS["segment"], 3.0),
        ("position_ids", f"position table\n{max_positions} x {hidden_size}", PART_COLOURS["position"], 5.0),
    ]
    for ids, table, colour, x in lookups:
        ax.text(x, 8.1, ids, ha="center", va="center", family="monospace", fontsize=DIAGRAM_TEXT)
        arrow((x, 7.85), (x, 7.3))
        box(x, 6.7, 1.8, table, colour)
        arrow((x, 6.1), (3.0 + (x - 3.0) * 0.12, 5.3))
    ax.add_patch(plt.Circle((3.0, 5.0), 0.28, fc="white", ec="black"))
    ax.text(3.0, 5.0, "+", ha="center", va="center", fontsize=14)
    arrow((3.0, 4.7), (3.0, 4.25))
    box(3.0, 3.65, 2.4, "LayerNorm\n(gamma, beta)", PART_COLOURS["other"])
    arrow((3.0, 3.05), (3.0, 2.6))
    box(3.0, 2.1, 2.4, "Dropout", PART_COLOURS["other"], h=0.85)
    arrow((3.0, 1.6), (3.0, 1.15))
    ax.text(3.0, 0.85, f"(batch, seq, {hidden_size})", ha="center", va="center", family="monospace",
            fontsize=DIAGRAM_TEXT)
    ax.set_title("BertEmbeddings: three lookups,\none sum, LayerNorm, dropout")
    return fig


# ------------------------------------------------------------- the layer at a glance, second edition

__all__ += ["top_directions", "energy_share", "parameter_share_table", "per_token_sum_figure"]


def top_directions(rows: torch.Tensor, k: int) -> torch.Tensor:
    """The k leading right singular vectors of a table (uncentred, as the sum sees it): (k, hidden), orthonormal.

    Taught in the layer at a glance, "Why add, not concatenate?"."""
    rows = torch.as_tensor(rows, dtype=torch.float64)
    if rows.dim() != 2 or not 1 <= k <= min(rows.shape):
        raise ValueError(f"need a (rows, hidden) table and 1 <= k <= {min(rows.shape)}, got {tuple(rows.shape)}, k={k}")
    return torch.linalg.svd(rows, full_matrices=False).Vh[:k]  # (k, hidden)


def energy_share(rows: torch.Tensor, directions: torch.Tensor) -> float:
    """Share of the rows' total squared norm that lies in the span of orthonormal `directions` (k, hidden).

    A random k-dimensional span holds k / hidden of it on average: the reference scale.

    Taught in the layer at a glance, "Why add, not concatenate?"."""
    rows = torch.as_tensor(rows, dtype=torch.float64)
    return float((rows @ directions.T).pow(2).sum() / rows.pow(2).sum())


def parameter_share_table(models: dict) -> ResultTable:
    """The book's one parameter-share table: each embedding part's parameters and share, per model.

    Taught in the layer at a glance, "Where the parameters are"."""
    parts = {"token table": "word_embeddings", "position table": "position_embeddings",
             "segment table": "token_type_embeddings", "LayerNorm": "LayerNorm"}
    headers, columns = ["part"], []
    for name, model in models.items():
        total = sum(p.numel() for p in model.parameters())
        counts = [sum(p.numel() for p in getattr(model.embeddings, attr).parameters()) for attr in parts.values()]
        counts += [sum(counts), total]
        columns.append([f"{c:,} ({100 * c / total:.3g}%)" for c in counts])
        headers.append(name)
    labels = list(parts) + ["embedding layer", "whole model"]
    return ResultTable(headers, [[label] + [col[i] for col in columns] for i, label in enumerate(labels)])


def _grid(vector: torch.Tensor) -> np.ndarray:
    """A (hidden,) vector folded into the most nearly square (r, hidden / r) grid."""
    hidden = vector.numel()
    r = max(d for d in range(1, int(hidden ** 0.5) + 1) if hidden % d == 0)
    return vector.detach().float().reshape(r, hidden // r).numpy()


def per_token_sum_figure(tokens: list[str], parts: EmbeddingParts, token_type_ids, title: str = ""):
    """The BERT paper's Figure 2 from the weights: E_token, E_A/B, E_position per token, plus E_A/B - E_A.

    One row per token, one column per part: narrow enough for 10-pt labels to stay legible in a phone's column.
    fig.axes runs part by part (the token column first), token by token within a part.
    Taught in the layer at a glance, "One sentence pair, token by token"."""
    types = token_type_ids[0]  # (seq,)
    segment = parts.segment[0].detach()  # (seq, hidden)
    first_a = int((types == 0).nonzero()[0])
    columns = [("token", parts.token[0], lambda i: f"E_{tokens[i]}"),
               ("segment", segment, lambda i: f"E_{'AB'[int(types[i])]}"),
               ("position", parts.position[0], lambda i: f"E_{i}")]
    values = torch.cat([p.detach().abs().flatten() for _, p, _ in columns])
    limit = float(values.quantile(0.99))  # a few outliers saturate instead of washing out the rest
    difference = segment - segment[first_a]  # (seq, hidden): 0 for A, B - A for B
    diff_limit = float(difference.abs().max()) or 1.0  # its own scale: B - A is small
    columns.append(("segment", difference, lambda i: "B - A" if types[i] else "0"))
    fig = plt.figure(figsize=(4.6, 0.8 * len(tokens) + 0.9))
    grid = fig.add_gridspec(len(tokens), len(columns))
    for c, (name, values, label) in enumerate(columns):
        scale = diff_limit if c == 3 else limit
        for i in range(len(tokens)):
            ax = fig.add_subplot(grid[i, c])
            ax.imshow(_grid(values[i].detach()), cmap=DIVERGING, vmin=-scale, vmax=scale, aspect="auto")
            ax.set_xticks([]), ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set(visible=True, color=PART_COLOURS[name], linewidth=2.5, linestyle="--" if c == 3 else "-")
            ax.set_xlabel(label(i), fontsize=DIAGRAM_TEXT, labelpad=2)
            if c == 0:  # black text; the frame's colour repeats the part
                ax.set_ylabel(tokens[i], fontsize=DIAGRAM_TEXT, fontweight="bold", rotation=0, ha="right",
                              va="center")
            if i == 0:
                ax.set_title(["token", "segment", "position", "segment\nminus A"][c], fontsize=DIAGRAM_TEXT)
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig
