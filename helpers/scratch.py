"""BERT's embedding layer built from nn.Embedding, nn.LayerNorm and nn.Dropout (build it yourself; train it)."""

from __future__ import annotations

import torch
from torch import nn

from helpers.sinusoids import sinusoidal_table

__all__ = ["ScratchEmbeddings", "POSITION_KINDS"]

POSITION_KINDS = ("learned", "sinusoid", "none")


class ScratchEmbeddings(nn.Module):
    """Token + segment (+ position) lookups, summed, through LayerNorm and dropout; BERT's parameter names."""

    def __init__(self, vocab_size: int, hidden_size: int, max_positions: int = 512, type_vocab_size: int = 2,
                 positions: str = "learned", eps: float = 1e-12, dropout: float = 0.1, pad_id: int = 0):
        super().__init__()
        if positions not in POSITION_KINDS:
            raise ValueError(f"positions must be one of {POSITION_KINDS}, got {positions!r}")
        self.positions = positions
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        if positions == "learned":
            self.position_embeddings = nn.Embedding(max_positions, hidden_size)
        elif positions == "sinusoid":  # fixed, not trained, not saved: rebuilt from its formula
            table = sinusoidal_table(max_positions, hidden_size).to(torch.float32)
            self.register_buffer("position_table", table, persistent=False)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, length) ids -> (batch, length, hidden) vectors."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        summed = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        length = input_ids.shape[-1]
        if self.positions == "learned":
            summed = summed + self.position_embeddings(torch.arange(length, device=input_ids.device))
        elif self.positions == "sinusoid":
            summed = summed + self.position_table[:length]
        return self.dropout(self.LayerNorm(summed))
