"""The packaged checkpoint as the live widget runs it: one module whose outputs are the embedding layer's parts,
their sum, the LayerNorm output and the last hidden state, with position ids and a position switch as inputs."""

from __future__ import annotations

import copy

import torch
from torch import nn

INPUTS = ("input_ids", "token_type_ids", "position_ids", "position_scale")
OUTPUTS = ("word", "segment", "position", "summed", "normed", "hidden")


class WidgetModel(nn.Module):
    """BertModel's forward pass for one unpadded text or pair, every step of the embedding layer exposed.

    position_scale (shape (1,)) multiplies the position rows: 1 adds them as BERT does, 0 removes them.
    """

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert.eval()

    def forward(self, input_ids, token_type_ids, position_ids, position_scale):
        embeddings = self.bert.embeddings
        word = embeddings.word_embeddings(input_ids)  # (1, seq, hidden)
        segment = embeddings.token_type_embeddings(token_type_ids)
        position = embeddings.position_embeddings(position_ids) * position_scale
        summed = (word + segment) + position  # transformers' order: words + types, then positions
        normed = embeddings.LayerNorm(summed)  # dropout is off in eval mode
        hidden = self.bert.encoder(normed)[0]  # one text, no padding: no attention mask
        return word, segment, position, summed, normed, hidden


def example_inputs(seq: int = 7) -> tuple[torch.Tensor, ...]:
    """Inputs of the graph's shapes and dtypes: a batch of one text of `seq` tokens."""
    ids = torch.full((1, seq), 1000, dtype=torch.int64)
    return ids, torch.zeros_like(ids), torch.arange(seq).unsqueeze(0), torch.ones(1)


def blinded(bert: nn.Module) -> nn.Module:
    """A copy of `bert` with its position table zeroed, the way the learned-positions chapter blinds a model."""
    blind = copy.deepcopy(bert)
    with torch.no_grad():
        blind.embeddings.position_embeddings.weight.zero_()
    return blind


def reference(bert: nn.Module, input_ids, token_type_ids, position_ids):
    """What transformers itself computes for these inputs: the embedding layer's output and the last hidden state.

    The independent reference for the exported graph: `model.embeddings` and the full `BertModel`, not WidgetModel.
    """
    with torch.no_grad():
        normed = bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
        hidden = bert(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)[0]
    return normed, hidden
