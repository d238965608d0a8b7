"""BERT's embedding layer taken apart: inputs checked, three lookups, sum, LayerNorm, dropout."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["EmbeddingParts", "check_embedding_inputs", "embedding_parts", "embedding_parameter_table"]


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
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must hold integer ids, not text: run tokenizer(text, return_tensors='pt') first.")
    ids = torch.as_tensor(ids)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be integer ids, got dtype {ids.dtype}.")
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)  # (seq,) -> (1, seq)
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, seq) or (seq,), got {tuple(ids.shape)}.")
    return ids.long()


def _check_range(name: str, ids: torch.Tensor, rows: int, table: str, advice: str) -> None:
    bad = (ids < 0) | (ids >= rows)
    if bad.any():
        value = int(ids[bad][0])
        raise ValueError(f"{name} holds {value}, outside the {table} of {rows} rows (0..{rows - 1}). {advice}")


def check_embedding_inputs(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None):
    """Validate ids against the layer's tables; return (input_ids, token_type_ids, position_ids), each (batch, seq)."""
    vocab_rows = embeddings.word_embeddings.num_embeddings
    type_rows = embeddings.token_type_embeddings.num_embeddings
    limit = embeddings.position_embeddings.num_embeddings
    input_ids = _as_ids("input_ids", input_ids)
    batch, seq = input_ids.shape
    if batch == 0 or seq == 0:
        raise ValueError(
            f"input_ids has shape {(batch, seq)}: there is nothing to embed. "
            "Even an empty string tokenises to [CLS] [SEP]; pass at least one token."
        )
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
        position_ids = torch.arange(seq).expand(batch, seq)
    position_ids = _as_ids("position_ids", position_ids)
    if position_ids.shape[-1] != seq:
        raise ValueError(f"position_ids has {position_ids.shape[-1]} positions but the sequence has {seq} tokens.")
    _check_range("position_ids", position_ids, limit, "position table",
                 "Positions count from 0 and stop at the table's last row.")
    return input_ids, token_type_ids, position_ids.expand(batch, seq)


def embedding_parts(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None) -> EmbeddingParts:
    """Rebuild BertEmbeddings.forward step by step, summing in the model's own order."""
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
    """Rows (part, shape, parameters, share of the whole model) for the embedding layer's parameters."""
    total = sum(p.numel() for p in model.parameters())
    rows = []
    for name, parameter in model.embeddings.named_parameters():
        rows.append({"part": name, "shape": tuple(parameter.shape), "parameters": parameter.numel(),
                     "share": parameter.numel() / total})
    return rows
