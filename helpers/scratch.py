"""BERT's embedding layer built from nn.Embedding, nn.LayerNorm and nn.Dropout (build it yourself; train it).

The chapter "Build the layer yourself" writes this class cell by cell and asserts that its own version, this one
and transformers' BertEmbeddings agree bit for bit; the chapter "Train it" imports it.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.sinusoids import sinusoidal_table
from helpers.validation import check_allocation, integer, real

__all__ = ["ScratchEmbeddings", "POSITION_KINDS"]

POSITION_KINDS = ("learned", "sinusoid", "none")


class ScratchEmbeddings(nn.Module):
    """Token + segment (+ position) lookups, summed, through LayerNorm and dropout; BERT's parameter names."""

    def __init__(self, vocab_size: int, hidden_size: int, max_positions: int = 512, type_vocab_size: int = 2,
                 positions: str = "learned", eps: float = 1e-12, dropout: float = 0.1, pad_id: int | None = 0):
        super().__init__()
        vocab_size = integer("vocab_size", vocab_size, minimum=1)
        hidden_size = integer("hidden_size", hidden_size, minimum=1)
        max_positions = integer("max_positions", max_positions, minimum=1)
        type_vocab_size = integer("type_vocab_size", type_vocab_size, minimum=1)
        if not isinstance(positions, str):
            raise TypeError(f"positions must be one of {POSITION_KINDS} (a string), got {type(positions).__name__}")
        if positions not in POSITION_KINDS:
            raise ValueError(f"positions must be one of {POSITION_KINDS}, got {positions!r}")
        if positions == "sinusoid" and hidden_size % 2:
            raise ValueError(f"a sinusoidal table pairs sin and cos columns: hidden_size must be even, "
                             f"got {hidden_size}")
        eps = real("eps", eps, above=0.0)
        dropout = real("dropout", dropout, minimum=0.0)
        if dropout >= 1:
            raise ValueError(f"dropout is a probability below 1, got {dropout}")
        if pad_id is not None:
            pad_id = integer("pad_id", pad_id, minimum=0)
            if pad_id >= vocab_size:
                raise ValueError(f"pad_id must be a row of the word table (0 to {vocab_size - 1}), got {pad_id}")
        for name, rows in (("word table", vocab_size), ("position table", max_positions)):
            check_allocation(f"the {name}", (rows, hidden_size), 4)  # float32 before nn allocates it
        self.positions = positions
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)  # (vocab, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)  # (types, hidden)
        if positions == "learned":
            self.position_embeddings = nn.Embedding(max_positions, hidden_size)  # (max_positions, hidden)
        elif positions == "sinusoid":  # fixed, not trained, not saved: rebuilt from its formula
            table = sinusoidal_table(max_positions, hidden_size).to(torch.float32)  # (max_positions, hidden)
            self.register_buffer("position_table", table, persistent=False)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    @property
    def max_positions(self) -> int | None:
        """Rows of the absolute position table; None without one."""
        if self.positions == "learned":
            return self.position_embeddings.num_embeddings
        return self.position_table.shape[0] if self.positions == "sinusoid" else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, length) ids -> (batch, length, hidden) vectors."""
        self._check(input_ids, token_type_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # (batch, length): segment A
        summed = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)  # BERT's order
        length = input_ids.shape[-1]
        if self.positions == "learned":
            summed = summed + self.position_embeddings(torch.arange(length, device=input_ids.device))
        elif self.positions == "sinusoid":
            summed = summed + self.position_table[:length]  # (length, hidden), broadcast over the batch
        return self.dropout(self.LayerNorm(summed))  # (batch, length, hidden)

    def _check(self, input_ids, token_type_ids) -> None:
        """Clear errors for inputs nn.Embedding would refuse with an index error or a shape mismatch."""
        for name, ids, rows in (("input_ids", input_ids, self.word_embeddings.num_embeddings),
                                ("token_type_ids", token_type_ids, self.token_type_embeddings.num_embeddings)):
            if ids is None and name == "token_type_ids":
                continue
            if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
                raise TypeError(f"{name} must be a tensor of integer ids (torch.long), got "
                                f"{type(ids).__name__} {getattr(ids, 'dtype', '')}".rstrip())
            if ids.dim() != 2:
                raise ValueError(f"{name} must have shape (batch, length), got {tuple(ids.shape)}")
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows):
                raise ValueError(f"{name} must lie in 0..{rows - 1} (rows of its table), got values from "
                                 f"{int(ids.min())} to {int(ids.max())}")
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise ValueError(f"token_type_ids must have the shape of input_ids {tuple(input_ids.shape)}, got "
                             f"{tuple(token_type_ids.shape)}")
        limit = self.max_positions
        if limit is not None and input_ids.shape[-1] > limit:
            raise ValueError(f"input of length {input_ids.shape[-1]} is longer than the {limit} rows of the "
                             f"position table: split it into windows or give the layer a longer table")
