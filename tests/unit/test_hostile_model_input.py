"""Ids a model cannot run, given to the helpers that run a model: a clear ValueError/TypeError before any forward
pass, never torch's IndexError from inside an embedding lookup or a shape error from inside transformers.

The references are the models' configs (vocab_size, max_position_embeddings; RoBERTa's positions count from
pad_token_id + 1, as transformers' create_position_ids_from_input_ids does) and, for ids that fit, the
embedding layer's own output.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.families import build_family
from helpers.input_layers import attention_terms, first_block_input, position_reaches_input
from helpers.relative_positions import bias_each_block_receives


@pytest.fixture(scope="module")
def models():
    """Tiny random BERT, RoBERTa and T5 (seed 0), in eval mode."""
    return {name: build_family(name, tiny=True).eval() for name in ("BERT", "RoBERTa", "T5")}


def positions_of(model) -> int:
    """The longest input a model's position table takes, from its config alone."""
    config = model.config
    if config.model_type == "roberta":
        return config.max_position_embeddings - config.pad_token_id - 1
    return config.max_position_embeddings


@pytest.fixture
def no_forward(models):
    """Every model's forward pass raises: a check that passes this ran before the model did."""
    def refuse(module, args, kwargs):
        raise AssertionError(f"{type(module).__name__} ran before its input was checked")

    handles = [model.register_forward_pre_hook(refuse, with_kwargs=True) for model in models.values()]
    handles += [models["T5"].encoder.register_forward_pre_hook(refuse, with_kwargs=True)]
    yield
    for handle in handles:
        handle.remove()


def too_long(model) -> torch.Tensor:
    return torch.ones(1, positions_of(model) + 1, dtype=torch.long)


CASES = {  # label: (call, error, words the message must hold)
    "first_block_input, id = vocab_size": (
        lambda m: first_block_input(m["BERT"], torch.tensor([[2, m["BERT"].config.vocab_size]])),
        ValueError, ["input_ids holds 99", "0..98", "tokenizer"]),
    "first_block_input, negative id": (
        lambda m: first_block_input(m["BERT"], torch.tensor([[-1, 2]])), ValueError, ["input_ids holds -1"]),
    "first_block_input, longer than the position table": (
        lambda m: first_block_input(m["BERT"], too_long(m["BERT"])), ValueError, ["65 tokens", "64 rows",
                                                                                   "max_length=64"]),
    "first_block_input, RoBERTa one past its padding offset": (
        lambda m: first_block_input(m["RoBERTa"], too_long(m["RoBERTa"])), ValueError, ["64 rows"]),
    "first_block_input, text": (lambda m: first_block_input(m["BERT"], "hello"), TypeError, ["tokenizer"]),
    "first_block_input, tokenizer output": (
        lambda m: first_block_input(m["BERT"], {"input_ids": [1, 2]}), TypeError, ["encoded['input_ids']"]),
    "first_block_input, float ids": (
        lambda m: first_block_input(m["BERT"], torch.ones(1, 3)), TypeError, ["integer ids", "float32"]),
    "first_block_input, 3-D ids": (
        lambda m: first_block_input(m["BERT"], torch.ones(1, 1, 3, dtype=torch.long)), ValueError, ["(batch, seq)"]),
    "first_block_input, not a model": (
        lambda m: first_block_input(m["BERT"].embeddings, [1, 2]), TypeError, ["transformers model"]),
    "first_block_input, T5 too long for memory": (
        lambda m: first_block_input(m["T5"], torch.zeros(1, 10**5, dtype=torch.long)), ValueError, ["memory"]),
    "position_reaches_input, token_id = vocab_size": (
        lambda m: position_reaches_input(m["BERT"], token_id=99), ValueError, ["token_id=99", "0..98"]),
    "position_reaches_input, length past the table": (
        lambda m: position_reaches_input(m["BERT"], length=65), ValueError, ["length=65", "64 rows"]),
    "position_reaches_input, T5 length 10**9": (
        lambda m: position_reaches_input(m["T5"], length=10**9), ValueError, ["memory"]),
    "position_reaches_input, float length": (
        lambda m: position_reaches_input(m["BERT"], length=6.0), TypeError, ["length must be"]),
    "position_reaches_input, one token": (
        lambda m: position_reaches_input(m["BERT"], length=1), ValueError, ["length must be", ">= 2"]),
    "attention_terms, id = vocab_size": (
        lambda m: attention_terms(m["BERT"], torch.tensor([[3, 99]])), ValueError, ["input_ids holds 99"]),
    "attention_terms, longer than the table": (
        lambda m: attention_terms(m["BERT"], too_long(m["BERT"])), ValueError, ["64 rows"]),
    "attention_terms, a batch of two": (
        lambda m: attention_terms(m["BERT"], torch.ones(2, 3, dtype=torch.long)), ValueError, ["(1, tokens)"]),
    "attention_terms, position id past the table": (
        lambda m: attention_terms(m["BERT"], torch.ones(1, 3, dtype=torch.long), torch.tensor([0, 1, 64])),
        ValueError, ["position_ids", "0..63"]),
    "attention_terms, one position too few": (
        lambda m: attention_terms(m["BERT"], torch.ones(1, 3, dtype=torch.long), torch.tensor([0, 1])),
        ValueError, ["one position per token"]),
    "attention_terms, the embedding layer": (
        lambda m: attention_terms(m["BERT"].embeddings, [1, 2]), TypeError, ["whole model"]),
    "bias_each_block_receives, id = vocab_size": (
        lambda m: bias_each_block_receives(m["T5"].encoder, torch.tensor([[1, 99]])), ValueError,
        ["input_ids holds 99"]),
    "bias_each_block_receives, the whole T5Model": (
        lambda m: bias_each_block_receives(m["T5"], torch.tensor([[1, 2]])), TypeError, ["model.encoder"]),
}


@pytest.mark.parametrize("label", CASES)
def test_bad_model_input_is_refused_before_the_model_runs(label, models, no_forward, big_allocations):
    call, error, words = CASES[label]
    with pytest.raises(error) as raised:
        call(models)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert big_allocations == []


def test_one_dimensional_ids_are_one_sequence(models):
    ids = torch.tensor([5, 6, 7])
    bert = models["BERT"]
    assert torch.equal(first_block_input(bert, ids), bert.embeddings(ids[None]))  # BERT's block 0 gets this
    t5_received = bias_each_block_receives(models["T5"].encoder, ids)
    assert len(t5_received) == models["T5"].config.num_layers
    terms = attention_terms(bert, ids)
    assert terms["all"].shape == (bert.config.num_attention_heads, 3, 3)


def test_the_longest_input_each_table_takes_still_runs(models):
    for name in ("BERT", "RoBERTa"):
        model = models[name]
        ids = torch.full((1, positions_of(model)), 5)
        assert first_block_input(model, ids).shape == (1, positions_of(model), model.config.hidden_size)


@settings(max_examples=30, deadline=None, database=None)
@given(seq=st.integers(1, 70), low=st.integers(-3, 98), span=st.integers(0, 6), batched=st.booleans())
def test_random_ids_match_the_layer_or_get_a_value_error(models, seq, low, span, batched):
    bert = models["BERT"]
    ids = (low + torch.arange(seq) % (span + 1))[None] if batched else low + torch.arange(seq) % (span + 1)
    fits = low >= 0 and low + min(span, seq - 1) < bert.config.vocab_size and seq <= positions_of(bert)
    if not fits:
        with pytest.raises(ValueError):
            first_block_input(bert, ids)
        return
    assert torch.equal(first_block_input(bert, ids), bert.embeddings(ids.reshape(1, -1)))


SCORES = {  # what position_score_properties got wrong before it checked: torch's IndexError / AttributeError
    "a 0-d tensor": (torch.tensor(1.0), ValueError, ["square", "()"]),
    "a nested list": ([[1.0, 2.0], [3.0, 4.0]], ValueError, ["more than 21 positions"]),
    "text": ("scores", TypeError, ["scores must be a tensor"]),
    "NaN scores": (torch.full((30, 30), float("nan")), ValueError, ["NaN"]),
    "a float max_offset": (torch.zeros(30, 30), TypeError, ["max_offset must be"]),
}


@pytest.mark.parametrize("label", SCORES)
def test_position_score_properties_refuses_what_is_not_a_score_matrix(label):
    from helpers.input_layers import position_score_properties

    scores, error, words = SCORES[label]
    max_offset = 2.0 if label == "a float max_offset" else 20
    with pytest.raises(error) as raised:
        position_score_properties(scores, max_offset)
    assert all(word in str(raised.value) for word in words), str(raised.value)
