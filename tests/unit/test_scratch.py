"""helpers.scratch: the hand-built layer equals transformers' BertEmbeddings, bit for bit, in eval mode."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertEmbeddings

from helpers.scratch import ScratchEmbeddings


def test_the_scratch_layer_is_bert_embeddings_with_the_same_weights():
    config = BertConfig(vocab_size=50, hidden_size=16, max_position_embeddings=12, type_vocab_size=2)
    reference = BertEmbeddings(config).eval()
    mine = ScratchEmbeddings(50, 16, 12, 2, eps=config.layer_norm_eps).eval()
    mine.load_state_dict(reference.state_dict(), strict=False)
    ids = torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(0))
    types = torch.tensor([[0] * 4 + [1] * 3] * 3)
    assert torch.equal(mine(ids, types), reference(input_ids=ids, token_type_ids=types))


def test_an_unknown_position_kind_is_refused():
    with pytest.raises(ValueError, match="positions must be one of"):
        ScratchEmbeddings(10, 4, positions="rope")
