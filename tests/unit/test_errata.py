"""The errata page's claims that code can check (book/errata.md links here), run against transformers and torch."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel
from transformers.models.bert.modeling_bert import BertEmbeddings

ROWS = 16  # a small position table: the errors do not depend on its size


@pytest.fixture(scope="module")
def layer() -> BertEmbeddings:
    """An untrained BertEmbeddings with a 16-row position table, in eval mode."""
    torch.manual_seed(0)
    return BertEmbeddings(BertConfig(vocab_size=50, hidden_size=8, max_position_embeddings=ROWS)).eval()


def test_position_id_past_the_table_with_token_types_is_an_index_error(layer):
    ids = torch.ones(1, 4, dtype=torch.long)
    with pytest.raises(IndexError, match="index out of range in self"):
        layer(ids, token_type_ids=torch.zeros_like(ids), position_ids=torch.tensor([[0, 1, 2, ROWS]]))


def test_position_id_past_the_table_without_token_types_is_a_runtime_error(layer):
    ids = torch.ones(1, 4, dtype=torch.long)
    with pytest.raises(RuntimeError, match=f"index {ROWS} is out of bounds") as caught:
        layer(ids, position_ids=torch.tensor([[0, 1, 2, ROWS]]))
    assert not isinstance(caught.value, IndexError)  # the default token types fail first


@pytest.mark.parametrize("with_token_types", [True, False])
def test_a_sequence_longer_than_the_table_is_a_size_mismatch(layer, with_token_types):
    ids = torch.ones(1, ROWS + 4, dtype=torch.long)
    types = {"token_type_ids": torch.zeros_like(ids)} if with_token_types else {}
    with pytest.raises(RuntimeError, match=rf"size .*\({ROWS + 4}\) must match .*\({ROWS}\)") as caught:
        layer(ids, **types)
    assert "position" not in str(caught.value)  # the message never names positions


def test_segment_table_has_two_rows_not_eight():
    """Seed 004's "0/1*8=768": bert-base's segment table is 2 x 768, one row per segment."""
    model = BertModel(BertConfig(hidden_size=768, num_hidden_layers=1, num_attention_heads=12,
                                 intermediate_size=64, vocab_size=10))
    assert tuple(model.embeddings.token_type_embeddings.weight.shape) == (2, 768)


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_adamw_leaves_a_row_without_gradient_unchanged_only_without_decay(decay):
    """A row no input selects: unchanged by AdamW without weight decay (this checkpoint), shrunk with decay."""
    torch.manual_seed(0)
    table = torch.nn.Embedding(4, 3)
    before = table.weight.detach().clone()
    optimiser = torch.optim.AdamW(table.parameters(), lr=0.1, weight_decay=decay)
    for _ in range(3):
        optimiser.zero_grad()
        table(torch.tensor([0, 1])).pow(2).sum().backward()  # rows 2 and 3 get a zero gradient
        optimiser.step()
    unused = table.weight.detach()[2:]
    if decay == 0.0:
        assert torch.equal(unused, before[2:])
    else:  # decoupled decay multiplies by (1 - lr * decay) each step (Loshchilov & Hutter 2019)
        torch.testing.assert_close(unused, before[2:] * (1 - 0.1 * decay) ** 3, rtol=1e-6, atol=0)
    assert not torch.equal(table.weight.detach()[:2], before[:2])  # the selected rows moved
