"""Segment (token-type) embeddings: sentence A and sentence B."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from helpers import validation
from helpers.anatomy import check_embedding_inputs, embedding_parts

__all__ = ["segment_pattern", "segment_rows", "segment_table_rows", "part_norms",
           "swap_segments", "segment_swap_change", "layernorm_shift_survival", "one_step_row_changes"]


PIECES_HINT = " (a number of word pieces, e.g. len(tokenizer.tokenize(text_a)))"


def segment_pattern(len_a: int, len_b: int | None = None) -> list[int]:
    """BERT's token types for [CLS] A [SEP] (all 0) followed by B [SEP] (all 1), from the lengths of A and B.

    Taught in segment embeddings, "Pairs"."""
    len_a = validation.integer("len_a", len_a, minimum=0, hint=PIECES_HINT)
    if len_b is not None:
        len_b = validation.integer("len_b", len_b, minimum=0, hint=PIECES_HINT)
    validation.check_allocation("segment_pattern", (2 + len_a + (len_b or 0) + 1,), 64)  # a list of Python ints
    pattern = [0] * (1 + len_a + 1)  # [CLS] A [SEP]
    if len_b is not None:
        pattern += [1] * (len_b + 1)  # B [SEP]
    return pattern


def segment_table_rows(embeddings: nn.Module) -> int:
    """How many rows the layer's token-type (segment) table has; 0 when it has none (e.g. DistilBERT).

    Taught in segment embeddings, "Limits and relatives"."""
    table = getattr(validation.embedding_layer(embeddings, "segment_table_rows"), "token_type_embeddings", None)
    return 0 if table is None else table.num_embeddings


def segment_rows(embeddings: nn.Module) -> torch.Tensor:
    """A detached copy of the token-type table, (types, hidden); a clear error when the layer has none.

    Taught in segment embeddings, "The table"."""
    validation.embedding_layer(embeddings, "segment_rows")
    if segment_table_rows(embeddings) == 0:
        raise ValueError(f"{type(embeddings).__name__} has no token_type_embeddings: this model does not mark "
                         "sentence A and B with a learned row (DistilBERT, for one, dropped the table).")
    return embeddings.token_type_embeddings.weight.detach().clone()  # (types, hidden)


def part_norms(embeddings: nn.Module, input_ids, token_type_ids=None) -> dict[str, torch.Tensor]:
    """Per-token L2 norms of the token, segment and position parts of one sequence, each (seq,).

    Taught in segment embeddings, "How much it matters"."""
    input_ids, token_type_ids, _ = check_embedding_inputs(embeddings, input_ids, token_type_ids)
    if input_ids.shape[0] != 1:
        raise ValueError(f"part_norms takes one sequence, got a batch of {input_ids.shape[0]}: pass input_ids[i].")
    with torch.no_grad():
        parts = embedding_parts(embeddings, input_ids, token_type_ids)
    return {name: getattr(parts, name)[0].norm(dim=-1) for name in ("token", "segment", "position")}


def swap_segments(token_type_ids, attention_mask=None) -> torch.Tensor:
    """Swap sentence A (0) and sentence B (1); padding (attention_mask 0) keeps its type.

    Taught in segment embeddings, "How much it matters"."""
    ids = validation.ids_tensor("token_type_ids", token_type_ids)  # (batch, seq)
    bad = (ids != 0) & (ids != 1)
    if bad.any():
        raise ValueError(f"swap_segments swaps sentence A (0) and B (1); token_type_ids holds {int(ids[bad][0])}.")
    swapped = 1 - ids
    if attention_mask is not None:
        if isinstance(attention_mask, torch.Tensor) and attention_mask.dtype == torch.bool:
            attention_mask = attention_mask.long()
        mask = validation.ids_tensor("attention_mask", attention_mask)
        if mask.shape != ids.shape:
            raise ValueError(f"attention_mask has shape {tuple(mask.shape)} but token_type_ids has {tuple(ids.shape)}.")
        if ((mask != 0) & (mask != 1)).any():
            raise ValueError(f"attention_mask holds {int(mask[(mask != 0) & (mask != 1)][0])}: it marks tokens (1) "
                             "and padding (0) only; pass the tokenizer's encoded['attention_mask'].")
        swapped = torch.where(mask.bool(), swapped, ids)
    return swapped if np.ndim(token_type_ids) == 2 else swapped[0]  # the shape it was given


def segment_swap_change(embeddings: nn.Module, input_ids, token_type_ids) -> torch.Tensor:
    """Per-token relative change ||LN(swapped) - LN(original)|| / ||LN(original)|| of the layer's output, (batch, seq).

    Uses the output before dropout, so the answer is the same in train and eval mode.

    Taught in segment embeddings, "How much it matters".
    """
    input_ids, token_type_ids, _ = check_embedding_inputs(embeddings, input_ids, token_type_ids)
    with torch.no_grad():
        original = embedding_parts(embeddings, input_ids, token_type_ids).normalized  # (batch, seq, hidden)
        swapped = embedding_parts(embeddings, input_ids, swap_segments(token_type_ids)).normalized
    return (swapped - original).norm(dim=-1) / original.norm(dim=-1)


@dataclass
class ShiftSurvival:
    """How much of one shift, added to every token, is left after LayerNorm's normalisation step."""

    before: torch.Tensor  # (tokens,) ||shift|| / ||x - mean(x)||: the shift's size relative to what LayerNorm sees
    after: torch.Tensor  # (tokens,) ||N(x + shift) - N(x)|| / ||N(x)||: the same ratio after normalisation
    survival: torch.Tensor  # (tokens,) after / before: 1 = kept in full (relative to the token), 0 = removed
    mean_share: float  # share of ||shift||^2 in its mean over dimensions: the part centring removes exactly
    common_share: float  # ||mean_i delta_i||^2 / mean_i ||delta_i||^2 of the changes delta_i: 1 = still one shift


def layernorm_shift_survival(x: torch.Tensor, shift: torch.Tensor, eps: float = 1e-12) -> ShiftSurvival:
    """Measure what LayerNorm's normalisation N (no gamma, beta) keeps of a shift added to every token of x.

    x: (tokens, hidden) the vectors before LayerNorm without the shift; shift: (hidden,).

    Taught in segment embeddings, "How much it matters".
    """
    x = validation.numbers_tensor("x", x, "vectors (tokens, hidden)").float()
    shift = validation.numbers_tensor("shift", shift, "numbers (hidden,)").float()
    eps = validation.real("eps", eps, minimum=0.0, hint=" (LayerNorm's epsilon, e.g. model.config.layer_norm_eps)")
    if x.dim() != 2 or shift.dim() != 1 or x.shape[-1] != shift.shape[0]:
        raise ValueError(f"x must be (tokens, hidden) and shift (hidden,) with the same hidden size; "
                         f"got x {tuple(x.shape)} and shift {tuple(shift.shape)}.")
    if x.shape[0] == 0 or not bool(shift.norm() > 0):
        raise ValueError("Need at least one token and a shift that is not all zeros.")
    if not (torch.isfinite(x).all() and torch.isfinite(shift).all()):
        raise ValueError("x or shift holds NaN or infinite values: pass finite vectors.")
    hidden = x.shape[-1]

    def normalise(v: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(v, (hidden,), eps=eps)  # (v - mean) / sqrt(var + eps), no gamma, no beta

    centred = x - x.mean(dim=-1, keepdim=True)  # (tokens, hidden)
    before = shift.norm() / centred.norm(dim=-1)
    delta = normalise(x + shift) - normalise(x)  # (tokens, hidden)
    after = delta.norm(dim=-1) / normalise(x).norm(dim=-1)
    mean_share = float(hidden * shift.mean() ** 2 / shift.pow(2).sum())
    common_share = float(delta.mean(dim=0).pow(2).sum() / delta.pow(2).sum(dim=-1).mean())
    return ShiftSurvival(before, after, after / before, mean_share, common_share)


def one_step_row_changes(model: nn.Module, input_ids, token_type_ids=None, lr: float = 0.1) -> torch.Tensor:
    """Norm of each token-type row's change after one SGD step on a toy loss, on a deep copy; (types,).

    The toy loss is the mean square of the last hidden state. The copy stays in the model's mode (eval: no
    dropout), so the result is deterministic; the model passed in is never touched.

    Taught in segment embeddings, "It is learned".
    """
    validation.whole_model(model, "one_step_row_changes")
    lr = validation.real("lr", lr, above=0.0, hint=" (a learning rate such as 0.1)")
    input_ids, token_type_ids, _ = check_embedding_inputs(model.embeddings, input_ids, token_type_ids)
    trainee = copy.deepcopy(model)
    before = segment_rows(trainee.embeddings)  # (types, hidden)
    optimiser = torch.optim.SGD(trainee.parameters(), lr=lr)
    optimiser.zero_grad()
    loss = trainee(input_ids=input_ids, token_type_ids=token_type_ids).last_hidden_state.pow(2).mean()
    loss.backward()
    optimiser.step()
    return (segment_rows(trainee.embeddings) - before).norm(dim=-1)


# ------------------------------------------------------------- second edition: row B's history, scales

__all__ += ["dimension_shares", "random_shift_change", "random_shift_survival", "contrastive_step_gradients"]


def dimension_shares(table: torch.Tensor) -> torch.Tensor:
    """Each dimension's share of a table's total squared norm, (hidden,); a uniform table gives 1 / hidden each.

    Taught in segment embeddings, "The table"."""
    table = validation.numbers_tensor("table", table, "rows (rows, hidden) or one row (hidden,)").double()
    if table.dim() == 1:
        table = table.unsqueeze(0)
    if table.dim() != 2 or table.numel() == 0:
        raise ValueError(f"table must be (rows, hidden) or one row (hidden,), got shape {tuple(table.shape)}"
                         f"{' (empty)' if table.numel() == 0 else ''}: pass e.g. embeddings.word_embeddings.weight.")
    if not bool(table.abs().sum() > 0) or not bool(torch.isfinite(table).all()):
        raise ValueError("table is all zeros or holds NaN or infinite values: no dimension has a share of its norm.")
    column = table.pow(2).sum(dim=0)  # (hidden,)
    return column / column.sum()


def random_shift_survival(x: torch.Tensor, norm: float, eps: float = 1e-12, seed: int = 0,
                          draws: int = 20) -> torch.Tensor:
    """Mean survival (see `layernorm_shift_survival`) of random shifts of length `norm`, one per draw: (draws,).

    The reference for the segment row's survival. Taught in segment embeddings, "How much it matters"."""
    norm = validation.real("norm", norm, above=0.0, hint=" (the length of the random shift)")
    seed = validation.integer("seed", seed, minimum=0)
    draws = validation.integer("draws", draws, minimum=1)
    x = validation.numbers_tensor("x", x, "vectors (tokens, hidden)").float()
    if x.dim() != 2:
        raise ValueError(f"x must be (tokens, hidden), got shape {tuple(x.shape)}.")
    generator = torch.Generator().manual_seed(seed)
    directions = torch.randn(draws, x.shape[-1], generator=generator)  # (draws, hidden)
    shifts = norm * directions / directions.norm(dim=-1, keepdim=True)
    return torch.stack([layernorm_shift_survival(x, s, eps=eps).survival.mean() for s in shifts])


def random_shift_change(embeddings: nn.Module, input_ids, token_type_ids, norm: float, mask=None,
                        seed: int = 0, draws: int = 20) -> torch.Tensor:
    """Relative change of the normalised output when a random vector of length `norm` is added to the tokens in
    `mask` (default: all): one mean per draw, (draws,). The reference scale for the segment swap.

    Taught in segment embeddings, "How much it matters"."""
    input_ids, token_type_ids, _ = check_embedding_inputs(embeddings, input_ids, token_type_ids)
    norm = validation.real("norm", norm, minimum=0.0, hint=" (the length of the random shift)")
    seed = validation.integer("seed", seed, minimum=0)
    draws = validation.integer("draws", draws, minimum=1)
    if mask is None:
        mask = torch.ones_like(input_ids, dtype=torch.bool)
    else:
        mask = validation.ids_tensor("mask", mask.long() if torch.is_tensor(mask) else mask).bool()
        if mask.shape != input_ids.shape:
            raise ValueError(f"mask has shape {tuple(mask.shape)} but input_ids has {tuple(input_ids.shape)}: "
                             "one entry per token (True: shift it).")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        parts = embedding_parts(embeddings, input_ids, token_type_ids)
        hidden = parts.summed.shape[-1]
        means = []
        for _ in range(draws):
            direction = torch.randn(hidden, generator=generator)
            shifted = parts.summed + mask.unsqueeze(-1) * (norm * direction / direction.norm())
            change = (embeddings.LayerNorm(shifted) - parts.normalized).norm(dim=-1)
            means.append((change / parts.normalized.norm(dim=-1)).mean())
    return torch.stack(means)


def contrastive_step_gradients(model: nn.Module, tokenizer, anchors: list[str], positives: list[str]) -> torch.Tensor:
    """Gradient of the segment table after one fine-tuning-like step, (types, hidden): each text encoded on its
    own (as sentence-transformers does), mean pooling, in-batch contrastive loss; on a deep copy.

    Taught in segment embeddings, "Row B's history"."""
    validation.whole_model(model, "contrastive_step_gradients")
    validation.check_tokenizer(tokenizer, "contrastive_step_gradients")
    anchors = validation.strings("anchors", anchors, "texts")
    positives = validation.strings("positives", positives, "texts")
    if len(anchors) != len(positives):
        raise ValueError(f"anchors has {len(anchors)} texts and positives {len(positives)}: pass the same number, "
                         "the i-th positive matching the i-th anchor.")
    trainee = copy.deepcopy(model)

    def embed(texts):
        batch = tokenizer(texts, padding=True, return_tensors="pt")  # token types: all 0
        hidden = trainee(**batch).last_hidden_state  # (batch, seq, hidden)
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return F.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)  # (batch, hidden)

    scores = embed(anchors) @ embed(positives).T * 20.0  # (batch, batch), scale 20 as in MNRL
    F.cross_entropy(scores, torch.arange(len(anchors))).backward()
    return trainee.embeddings.token_type_embeddings.weight.grad.detach().clone()
