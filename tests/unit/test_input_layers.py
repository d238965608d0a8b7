"""helpers/input_layers.py against each family's named parameters, config arithmetic and the papers.

The fixtures tiny_models and released_models are in conftest.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import (
    FAMILIES,
    block_norm_placement,
    build_family,
    family_config,
    first_block_input,
    input_layer_summary,
    position_reaches_input,
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


def test_first_block_input_is_embedding_output(tiny_bert, tiny_models):
    ids = torch.tensor([[1, 5, 7, 9, 2]])
    with torch.no_grad():
        # exact: the hook captures what the same modules compute from the same ids, in the same order
        assert torch.equal(first_block_input(tiny_bert, ids), tiny_bert.embeddings(ids))
        albert = tiny_models["ALBERT"]
        projected = albert.encoder.embedding_hidden_mapping_in(albert.embeddings(ids))
    assert torch.equal(first_block_input(albert, ids), projected)


def test_electra_projection_only_when_sizes_differ():
    differ = build_family("ELECTRA", tiny=True)
    same = build_family("ELECTRA", tiny=True, embedding_size=32)
    assert isinstance(differ.embeddings_project, nn.Linear) and not hasattr(same, "embeddings_project")
    assert input_layer_summary(differ).projection == (16, 32)
    assert input_layer_summary(same).projection is None


def test_summary_bad_input():
    with pytest.raises(TypeError, match="expected a transformers model"):
        input_layer_summary(nn.Linear(3, 3))


# --------------------------------------------------------------------------------------------------------------
# TUPE's four terms (Ke et al. 2021, section 3) and Wang et al. 2021's properties at the attention level


def _bert(hidden=48, heads=4, seed=0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=60, hidden_size=hidden, num_hidden_layers=1, num_attention_heads=heads,
                        intermediate_size=32, max_position_embeddings=40, attn_implementation="eager")
    return BertModel(config).eval()


@pytest.mark.parametrize(("hidden", "heads"), [(48, 4), (64, 2)])
def test_attention_terms_add_up_to_the_models_own_attention(hidden, heads):
    from helpers import attention_terms

    model = _bert(hidden, heads)
    ids = torch.tensor([[2, 17, 5, 33, 9, 3]])
    terms = attention_terms(model, ids)
    parts = sum(terms[name] for name in terms if name != "all")
    # float32 sums of a handful of (heads, n, n) terms: a few ulps of the largest logit
    scale = float(terms["all"].abs().max())
    torch.testing.assert_close(parts, terms["all"], rtol=0, atol=1e-5 * scale)
    with torch.no_grad():
        probabilities = model(ids, output_attentions=True).attentions[0][0]  # (heads, n, n), transformers' softmax
    # two float32 routes through sums of `hidden` products, then a softmax: 1e-5
    torch.testing.assert_close(terms["all"].softmax(-1), probabilities, rtol=0, atol=1e-5)
    assert set(terms) == {"word-word", "word-position", "position-word", "position-position", "rest", "all"}


def test_attention_terms_need_one_sentence():
    from helpers import attention_terms

    with pytest.raises(ValueError, match="shape"):
        attention_terms(_bert(), torch.zeros(2, 5, dtype=torch.long))


def test_properties_of_a_decreasing_symmetric_toeplitz_matrix_are_all_one():
    from helpers import position_score_properties

    n = torch.arange(40)
    scores = -(n[None, :] - n[:, None]).abs().double()  # phi = -|y - x|: offset-only, monotone, symmetric
    assert position_score_properties(scores) == pytest.approx(
        {"translation": 1.0, "monotonicity": 1.0, "symmetry": 1.0}, abs=1e-12)  # float64, exact by construction


def test_properties_of_noise_and_of_an_antisymmetric_matrix():
    from helpers import position_score_properties

    noise = torch.randn(60, 60, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    props = position_score_properties(noise)
    # independent Gaussians: offsets explain about (2n - 1) / n^2 of the variance, half the steps fall
    assert props["translation"] < 0.1 and abs(props["monotonicity"] - 0.5) < 0.1 and abs(props["symmetry"]) < 0.1
    assert position_score_properties(noise - noise.T)["symmetry"] == pytest.approx(-1.0, abs=1e-12)
    with pytest.raises(ValueError, match="square"):
        position_score_properties(noise[:10, :10])
