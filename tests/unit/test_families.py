"""helpers/families.py against transformers' own modules and functions, config arithmetic and closed forms."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import scipy.linalg
import torch
from torch import nn
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
    first_block_input,
    halves_permutation,
    input_layer_summary,
    offset_residual,
    padded_position_ids,
    position_reaches_input,
    rotary_scores,
    rotation_matrix,
    score_heatmaps,
)

# Parameter-name prefixes of each family's input layer, read off the transformers source files.
INPUT_PREFIXES = {
    "BERT": ["embeddings."],
    "RoBERTa": ["embeddings."],
    "DistilBERT": ["embeddings."],
    "ALBERT": ["embeddings.", "encoder.embedding_hidden_mapping_in."],
    "ELECTRA": ["embeddings.", "embeddings_project."],
    "T5": ["shared."],
    "GPT-2": ["wte.", "wpe."],
    "RoFormer": ["embeddings."],
    "Llama": ["embed_tokens."],
}
# Where the papers put position information and the norms.
ENTERS = {"T5": "bias on attention logits", "RoFormer": "rotates queries and keys", "Llama": "rotates queries and keys"}
PRE_NORM = {"T5", "GPT-2", "Llama"}  # Raffel et al. 2020 §2.1; Radford et al. 2019 §2.3; Touvron et al. 2023 §2.2


@pytest.fixture(scope="module")
def tiny_models():
    return {name: build_family(name, tiny=True) for name in FAMILIES}


@pytest.fixture(scope="module")
def released_models():
    return {name: build_family(name) for name in FAMILIES}


def _named_count(model: nn.Module, prefixes: list[str]) -> int:
    return sum(p.numel() for name, p in model.named_parameters() if any(name.startswith(x) for x in prefixes))


def test_bert_summary_matches_modules(any_bert):
    summary = input_layer_summary(any_bert)
    embeddings = any_bert.embeddings
    assert summary.token == tuple(embeddings.word_embeddings.weight.shape)
    assert summary.segment == tuple(embeddings.token_type_embeddings.weight.shape)
    assert summary.position == tuple(embeddings.position_embeddings.weight.shape)
    assert summary.position_enters == "added to the input"
    assert summary.embedding_norm == "LayerNorm" and summary.projection is None
    assert summary.input_parameters == _named_count(any_bert, ["embeddings."])
    assert summary.total_parameters == sum(p.numel() for p in any_bert.parameters())
    assert summary.position_parameters == embeddings.position_embeddings.weight.numel()
    assert sum(summary.parts.values()) == summary.input_parameters


def test_packaged_bert_is_post_norm_and_positions_reach_the_input(packaged):
    model = packaged[0]
    assert block_norm_placement(model) == "post-norm (LayerNorm)"
    assert position_reaches_input(model)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_summary_matches_named_parameters(name, tiny_models, released_models):
    for model in (tiny_models[name], released_models[name]):
        summary = input_layer_summary(model)
        assert summary.input_parameters == _named_count(model, INPUT_PREFIXES[name])
        assert summary.total_parameters == sum(p.numel() for p in model.parameters())
        assert summary.token == tuple(model.get_input_embeddings().weight.shape)
        embeddings = getattr(model, "embeddings", None)
        assert (summary.segment is not None) == hasattr(embeddings, "token_type_embeddings")
        assert summary.position_enters == ENTERS.get(name, "added to the input")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_structure_agrees_with_behaviour(name, tiny_models):
    model = tiny_models[name]
    summary = input_layer_summary(model)
    assert position_reaches_input(model) == (summary.position_enters == "added to the input")
    placement = block_norm_placement(model)
    assert placement.startswith("pre-norm" if name in PRE_NORM else "post-norm")
    assert ("final norm" in placement) == (name in PRE_NORM)


def test_released_input_layers_match_config_arithmetic(released_models):
    def bert_like(c, width):  # token + position + segment tables and LayerNorm (weight, bias) at `width`
        return (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * width + 2 * width

    configs = {name: family_config(name) for name in FAMILIES}
    c = configs["ALBERT"]
    expected = {
        "BERT": bert_like(configs["BERT"], configs["BERT"].hidden_size),
        "RoBERTa": bert_like(configs["RoBERTa"], configs["RoBERTa"].hidden_size),
        "DistilBERT": (configs["DistilBERT"].vocab_size + configs["DistilBERT"].max_position_embeddings + 2)
        * configs["DistilBERT"].dim,
        "ALBERT": bert_like(c, c.embedding_size) + c.embedding_size * c.hidden_size + c.hidden_size,
        "ELECTRA": bert_like(configs["ELECTRA"], configs["ELECTRA"].embedding_size)
        + (configs["ELECTRA"].embedding_size + 1) * configs["ELECTRA"].hidden_size,
        "T5": configs["T5"].vocab_size * configs["T5"].d_model,
        "GPT-2": (configs["GPT-2"].vocab_size + configs["GPT-2"].n_positions) * configs["GPT-2"].n_embd,
        "RoFormer": (configs["RoFormer"].vocab_size + configs["RoFormer"].type_vocab_size + 2)
        * configs["RoFormer"].embedding_size,
        "Llama": configs["Llama"].vocab_size * configs["Llama"].hidden_size,
    }
    for name, count in expected.items():
        assert input_layer_summary(released_models[name]).input_parameters == count, name
    t5 = input_layer_summary(released_models["T5"])
    assert t5.position_parameters == 2 * configs["T5"].relative_attention_num_buckets * configs["T5"].num_heads
    assert all(".block.0." in module for module in t5.position_modules)
    assert input_layer_summary(released_models["RoFormer"]).position_parameters == 0
    assert input_layer_summary(released_models["Llama"]).position_parameters == 0


def test_released_shapes_and_meta_device(released_models):
    roberta = family_config("RoBERTa")
    assert (roberta.max_position_embeddings, roberta.type_vocab_size) == (514, 1)  # roberta-base's config.json
    assert family_config("ALBERT").hidden_size == 768  # albert-base-v2, not AlbertConfig()'s xxlarge
    assert all(next(m.parameters()).is_meta for m in released_models.values())
    with pytest.raises(ValueError, match="meta device"):
        block_norm_placement(released_models["BERT"])


def test_first_block_input_is_embedding_output(tiny_bert, tiny_models):
    ids = torch.tensor([[1, 5, 7, 9, 2]])
    with torch.no_grad():
        torch.testing.assert_close(first_block_input(tiny_bert, ids), tiny_bert.embeddings(ids))
        albert = tiny_models["ALBERT"]
        projected = albert.encoder.embedding_hidden_mapping_in(albert.embeddings(ids))
    torch.testing.assert_close(first_block_input(albert, ids), projected)


def test_electra_projection_only_when_sizes_differ():
    differ = build_family("ELECTRA", tiny=True)
    same = build_family("ELECTRA", tiny=True, embedding_size=32)
    assert isinstance(differ.embeddings_project, nn.Linear) and not hasattr(same, "embeddings_project")
    assert input_layer_summary(differ).projection == (16, 32)
    assert input_layer_summary(same).projection is None


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
        assert torch.equal(by_hand, e(ids))


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


def test_rotary_scores_depend_only_on_offset():
    torch.manual_seed(0)
    d, n = 16, 20
    q, k = torch.randn(d), torch.randn(d)
    perm = halves_permutation(d)  # Llama rotates dimension i with i + d/2: the halves layout
    scores = rotary_scores(q[perm], k[perm], n)
    for m in range(n):
        for p in range(n):
            reference = q.double() @ (rotation_matrix(m - p, d, dtype=torch.float64) @ k.double())
            torch.testing.assert_close(scores[m, p], reference, atol=1e-4, rtol=1e-4)
    for offset in range(-(n - 1), n):
        diagonal = torch.diagonal(scores, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(scores[0, 0], (q @ k).double())


def test_rotary_scores_bad_input():
    with pytest.raises(ValueError, match="even length"):
        rotary_scores(torch.randn(5), torch.randn(5), 4)
    with pytest.raises(ValueError, match="even length"):
        rotary_scores(torch.randn(4), torch.randn(6), 4)


def test_summary_bad_input():
    with pytest.raises(TypeError, match="expected a transformers model"):
        input_layer_summary(nn.Linear(3, 3))
    with pytest.raises(KeyError, match="unknown family"):
        build_family("XLNet")


def test_tables_and_figures(tiny_models):
    rows = {name: ("random", input_layer_summary(m), block_norm_placement(m)) for name, m in tiny_models.items()}
    table = family_table(rows)
    assert table.headers[0] == "model" and len(table.rows) == len(FAMILIES)
    assert family_table(rows, "positions").rows[5][1] == "bias on attention logits"  # T5
    with pytest.raises(ValueError, match="view must be"):
        family_table(rows, "shapes")
    specs = {name: diagram_spec(summary, blocks) for name, (_, summary, blocks) in rows.items()}
    figure = family_input_diagrams(specs)
    assert len(figure.axes) == 9
    bars = family_parameter_bars({n: s.parts for n, (_, s, _) in rows.items()},
                                 {n: s.total_parameters for n, (_, s, _) in rows.items()})
    assert len(bars.axes) == 1


def test_offset_residual_against_toeplitz():
    torch.manual_seed(0)
    column, row = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    row[0] = column[0]
    toeplitz = torch.from_numpy(scipy.linalg.toeplitz(column.numpy(), row.numpy()))  # constant diagonals
    torch.testing.assert_close(offset_residual(toeplitz), torch.zeros(7, 7, dtype=torch.float64))
    a, b = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    plaid = a[:, None] + b[None, :]  # depends on both positions, not only on the offset
    residual = offset_residual(toeplitz + plaid)
    for offset in range(-6, 7):  # every diagonal of the residual has mean 0 ...
        assert abs(float(torch.diagonal(residual, offset).mean())) < 1e-12
    for i, j in ((0, 0), (2, 5), (6, 1)):  # ... and equals the plaid minus its own diagonal mean
        diagonal = torch.diagonal(plaid, j - i)
        torch.testing.assert_close(residual[i, j], plaid[i, j] - diagonal.mean())
    with pytest.raises(ValueError, match="square 2-D tensor"):
        offset_residual(torch.zeros(3, 4))


def test_score_heatmaps_share_a_scale_per_row():
    figure = score_heatmaps({"score": {"a": torch.eye(4), "b": -2 * torch.eye(4)}, "residual": {"a": torch.ones(4, 4)}})
    images = [ax.images[0] for ax in figure.axes if ax.images]
    assert len(images) == 3
    assert images[0].get_clim() == images[1].get_clim() == (-2.0, 2.0)
    own = score_heatmaps({"score": {"a": torch.eye(4), "b": -2 * torch.eye(4)}}, own_scale=("score",))
    assert [ax.images[0].get_clim() for ax in own.axes if ax.images] == [(-1.0, 1.0), (-2.0, 2.0)]
