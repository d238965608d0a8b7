"""helpers/families.py against transformers' own modules and functions, config arithmetic and closed forms.

The fixtures tiny_models and released_models are in conftest.py."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from helpers import (
    FAMILIES,
    block_norm_placement,
    build_family,
    diagram_spec,
    factorised_embedding_parameters,
    family_config,
    family_input_diagrams,
    family_parameter_bars,
    family_table,
    input_layer_summary,
    padded_position_ids,
)


def test_released_shapes_and_meta_device(released_models):
    roberta = family_config("RoBERTa")
    assert (roberta.max_position_embeddings, roberta.type_vocab_size) == (514, 1)  # roberta-base's config.json
    assert family_config("ALBERT").hidden_size == 768  # albert-base-v2, not AlbertConfig()'s xxlarge
    assert all(next(m.parameters()).is_meta for m in released_models.values())
    with pytest.raises(ValueError, match="meta device"):
        block_norm_placement(released_models["BERT"])


@pytest.mark.parametrize("past", [0, 3])
def test_padded_position_ids_match_roberta(past):
    torch.manual_seed(0)
    pad = 1
    ids = torch.randint(3, 50, (4, 9))
    ids[1, 6:] = pad  # right padding
    ids[2, :4] = pad  # left padding
    ids[3, 2] = pad  # a pad in the middle
    expected = RobertaEmbeddings.create_position_ids_from_input_ids(ids, pad, past)
    assert torch.equal(padded_position_ids(ids, pad, past), expected)
    assert torch.equal(padded_position_ids(ids, pad, past)[ids == pad], torch.full(((ids == pad).sum(),), pad))


def test_padded_position_ids_in_the_model():
    model = build_family("RoBERTa", tiny=True)
    pad = model.config.pad_token_id
    ids = torch.tensor([[0, 5, 6, 7, 2], [0, 5, 2, pad, pad]])
    e = model.embeddings
    with torch.no_grad():
        by_hand = e.word_embeddings(ids) + e.token_type_embeddings(torch.zeros_like(ids))
        by_hand = e.LayerNorm(by_hand + e.position_embeddings(padded_position_ids(ids, pad)))
        assert torch.equal(by_hand, e(ids))  # exact: RobertaEmbeddings' own sums, in its own order


def test_padded_position_ids_bad_input():
    with pytest.raises(ValueError, match="integer ids of shape"):
        padded_position_ids(torch.ones(2, 3), 1)
    with pytest.raises(ValueError, match="integer ids of shape"):
        padded_position_ids(torch.ones(3, dtype=torch.long), 1)


@pytest.mark.parametrize("hidden", [768, 4096])
def test_factorised_parameters_match_modules(hidden):
    config = AlbertConfig(hidden_size=hidden, num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
    bert_config = BertConfig(vocab_size=config.vocab_size, hidden_size=hidden, num_attention_heads=hidden // 64,
                             num_hidden_layers=1)
    with torch.device("meta"):
        albert, bert = AlbertModel(config), BertModel(bert_config)
    counts = factorised_embedding_parameters(config.vocab_size, hidden, config.embedding_size)
    assert counts["full"] == bert.embeddings.word_embeddings.weight.numel()
    albert_count = sum(p.numel() for p in albert.embeddings.word_embeddings.parameters())
    albert_count += sum(p.numel() for p in albert.encoder.embedding_hidden_mapping_in.parameters())
    assert counts["factorised"] == albert_count
    assert counts["saving"] == counts["full"] - counts["factorised"] > 0


def test_factorised_parameters_bad_input():
    with pytest.raises(ValueError, match="embedding_size must be a positive integer"):
        factorised_embedding_parameters(100, 32, 0)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        factorised_embedding_parameters(10.5, 32, 8)


def test_tables_and_figures(tiny_models):
    rows = {name: ("random", input_layer_summary(m), block_norm_placement(m)) for name, m in tiny_models.items()}
    table = family_table(rows)
    assert table.headers[0] == "model" and len(table.rows) == len(FAMILIES)
    positions = family_table(rows, "positions")
    assert positions.rows[5][1] == "logits"  # T5: a bias on the attention logits
    assert positions.rows[0][4] == "embedding + post" and positions.rows[5][4] == "pre + final"  # BERT, T5
    assert max(len(line) for line in repr(positions).splitlines()) <= 80
    with pytest.raises(ValueError, match="view must be"):
        family_table(rows, "shapes")
    specs = {name: diagram_spec(summary, blocks) for name, (_, summary, blocks) in rows.items()}
    figure = family_input_diagrams(specs)
    assert len(figure.axes) == 9
    bars = family_parameter_bars({n: s.parts for n, (_, s, _) in rows.items()},
                                 {n: s.total_parameters for n, (_, s, _) in rows.items()})
    assert len(bars.axes) == 1


def test_unknown_family_is_a_key_error():
    with pytest.raises(KeyError, match="unknown family"):
        build_family("XLNet")
