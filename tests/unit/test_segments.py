"""Tests of helpers.segments (and the plot it uses) against transformers, torch and closed-form LayerNorm facts."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import DistilBertConfig, RobertaConfig
from transformers.models.distilbert.modeling_distilbert import Embeddings as DistilBertEmbeddings
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from helpers import (
    check_embedding_inputs,
    layernorm_shift_survival,
    one_step_row_changes,
    part_norms,
    segment_pattern,
    segment_rows,
    segment_swap_change,
    segment_table_rows,
    swap_segments,
)

PAIRS = [
    ("Where do penguins live?", "Most penguins live in the Southern Hemisphere."),
    ("the man went to the store", "he bought a gallon of milk"),
    ("I am Sinan", "She is Zoe"),
    ("", "We lived above the clouds"),
]


def _random_inputs(model, seq=9, seed=1):
    """Random (1, seq) input ids and token types that use every type row of the model."""
    generator = torch.Generator().manual_seed(seed)
    config = model.config
    ids = torch.randint(0, config.vocab_size, (1, seq), generator=generator)
    types = torch.arange(seq).remainder(config.type_vocab_size).unsqueeze(0)  # 0, 1, (2,) 0, 1, ...
    return ids, types


# --- segment_pattern: BERT's [CLS] A [SEP] B [SEP] layout, checked against the tokenizer ------------------------

@pytest.mark.parametrize(("text_a", "text_b"), PAIRS)
def test_segment_pattern_matches_tokenizer_for_pairs(packaged, text_a, text_b):
    tokenizer = packaged[1]
    expected = tokenizer(text_a, text_b)["token_type_ids"]
    assert segment_pattern(len(tokenizer.tokenize(text_a)), len(tokenizer.tokenize(text_b))) == expected


@pytest.mark.parametrize("text", ["I am Sinan", "this is a test sentence", ""])
def test_segment_pattern_matches_tokenizer_for_single_texts(packaged, text):
    tokenizer = packaged[1]
    assert segment_pattern(len(tokenizer.tokenize(text))) == tokenizer(text)["token_type_ids"]


@pytest.mark.parametrize("bad", [-1, 2.0, "3"])
def test_segment_pattern_rejects_bad_lengths(bad):
    with pytest.raises(ValueError, match="number of word pieces"):
        segment_pattern(bad, 1)
    with pytest.raises(ValueError, match="len_b must be"):
        segment_pattern(1, bad)


# --- the table: rows, relatives without one --------------------------------------------------------------------

def test_segment_rows_is_a_detached_copy_of_the_table(any_bert):
    table = any_bert.embeddings.token_type_embeddings.weight
    rows = segment_rows(any_bert.embeddings)
    assert rows.shape == (any_bert.config.type_vocab_size, any_bert.config.hidden_size)
    assert torch.equal(rows, table.detach()) and not rows.requires_grad
    assert rows.data_ptr() != table.data_ptr()  # editing the copy cannot touch the model


def test_segment_table_rows_for_bert_roberta_distilbert(any_bert):
    assert segment_table_rows(any_bert.embeddings) == any_bert.config.type_vocab_size
    small = dict(vocab_size=20, hidden_size=8, max_position_embeddings=16)
    assert segment_table_rows(RobertaEmbeddings(RobertaConfig(type_vocab_size=1, **small))) == 1
    distil = DistilBertEmbeddings(DistilBertConfig(vocab_size=20, dim=8, n_heads=2, hidden_dim=16,
                                                   max_position_embeddings=16))
    assert not hasattr(distil, "token_type_embeddings")
    assert segment_table_rows(distil) == 0
    with pytest.raises(ValueError, match="has no token_type_embeddings"):
        segment_rows(distil)


def test_roberta_config_default_differs_from_released_checkpoint():
    # The chapter says RobertaConfig() keeps BERT's two types while roberta-base's config.json sets 1.
    assert RobertaConfig().type_vocab_size == 2
    assert not hasattr(DistilBertConfig(), "type_vocab_size")


# --- per-token norms of the three parts --------------------------------------------------------------------------

def test_part_norms_against_the_three_tables(any_bert):
    embeddings = any_bert.embeddings
    ids, types = _random_inputs(any_bert)
    positions = torch.arange(ids.shape[1])
    norms = part_norms(embeddings, ids, types)
    with torch.no_grad():
        torch.testing.assert_close(norms["token"], embeddings.word_embeddings(ids[0]).norm(dim=-1))
        torch.testing.assert_close(norms["segment"], embeddings.token_type_embeddings(types[0]).norm(dim=-1))
        torch.testing.assert_close(norms["position"], embeddings.position_embeddings(positions).norm(dim=-1))


def test_part_norms_default_types_are_row_zero(tiny_bert):
    ids, _ = _random_inputs(tiny_bert)
    row_zero = tiny_bert.embeddings.token_type_embeddings.weight[0].detach().norm()
    assert torch.allclose(part_norms(tiny_bert.embeddings, ids)["segment"], row_zero.expand(ids.shape[1]))


def test_part_norms_rejects_batches_and_bad_types(tiny_bert):
    ids, types = _random_inputs(tiny_bert)
    with pytest.raises(ValueError, match="takes one sequence"):
        part_norms(tiny_bert.embeddings, ids.repeat(2, 1), types.repeat(2, 1))
    with pytest.raises(ValueError, match="outside the token-type"):
        part_norms(tiny_bert.embeddings, ids, torch.full_like(ids, tiny_bert.config.type_vocab_size))


# --- swapping sentence A and B ------------------------------------------------------------------------------------

def test_swap_segments_swaps_a_and_b_and_keeps_padding(packaged):
    tokenizer = packaged[1]
    batch = tokenizer(["the man went to the store", "penguins"], ["he bought a gallon of milk", "fly"],
                      padding=True, return_tensors="pt")
    types, mask = batch["token_type_ids"], batch["attention_mask"]
    swapped = swap_segments(types, mask)
    assert torch.equal(swapped[mask == 1], 1 - types[mask == 1])
    assert torch.equal(swapped[mask == 0], types[mask == 0])
    assert torch.equal(swap_segments(types[:1]), 1 - types[:1])
    assert swap_segments([0, 0, 1]).tolist() == [1, 1, 0]


def test_swap_segments_rejects_bad_input():
    with pytest.raises(ValueError, match="holds 2"):
        swap_segments([0, 1, 2])
    with pytest.raises(TypeError, match="integer ids"):
        swap_segments([0.0, 1.0])
    with pytest.raises(ValueError, match="attention_mask has shape"):
        swap_segments([[0, 1]], [[1, 1, 1]])


def test_segment_swap_change_against_the_model_layer(any_bert):
    embeddings = any_bert.embeddings  # eval mode: the layer's output is LayerNorm's output
    ids, types = _random_inputs(any_bert)
    types = types.clamp(max=1)  # swapping needs a two-sentence pattern
    with torch.no_grad():
        original = embeddings(ids, token_type_ids=types)
        swapped = embeddings(ids, token_type_ids=1 - types)
    expected = (swapped - original).norm(dim=-1) / original.norm(dim=-1)
    torch.testing.assert_close(segment_swap_change(embeddings, ids, types), expected)


def test_segment_swap_change_ignores_dropout(tiny_bert):
    training = copy.deepcopy(tiny_bert).train()
    ids, types = _random_inputs(tiny_bert)
    types = types.clamp(max=1)
    torch.testing.assert_close(segment_swap_change(training.embeddings, ids, types),
                               segment_swap_change(tiny_bert.embeddings, ids, types))


def test_segment_swap_change_is_zero_when_rows_are_equal(tiny_bert):
    same = copy.deepcopy(tiny_bert)
    with torch.no_grad():
        same.embeddings.token_type_embeddings.weight[1] = same.embeddings.token_type_embeddings.weight[0]
    ids, types = _random_inputs(tiny_bert)
    change = segment_swap_change(same.embeddings, ids, types.clamp(max=1))
    assert torch.equal(change, torch.zeros(ids.shape))


# --- what survives LayerNorm ---------------------------------------------------------------------------------------

def _numpy_normalise(v: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm without gamma and beta, by hand in float64: (v - mean) / sqrt(biased variance + eps)."""
    centred = v - v.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)


def test_shift_survival_against_a_float64_hand_computation(packaged):
    model, tokenizer = packaged
    embeddings = model.embeddings
    ids = tokenizer("We lived above the clouds", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        x = (embeddings.word_embeddings(ids) + embeddings.position_embeddings(torch.arange(ids.shape[1])))[0]
    shift = embeddings.token_type_embeddings.weight[0].detach()
    eps = embeddings.LayerNorm.eps
    result = layernorm_shift_survival(x, shift, eps=eps)
    xn, sn = x.double().numpy(), shift.double().numpy()
    delta = _numpy_normalise(xn + sn, eps) - _numpy_normalise(xn, eps)
    before = np.linalg.norm(sn) / np.linalg.norm(xn - xn.mean(axis=-1, keepdims=True), axis=-1)
    after = np.linalg.norm(delta, axis=-1) / np.sqrt(xn.shape[-1])  # ||N(x)|| = sqrt(hidden) when eps is tiny
    np.testing.assert_allclose(result.before.numpy(), before, rtol=1e-5)
    np.testing.assert_allclose(result.after.numpy(), after, rtol=1e-3)
    np.testing.assert_allclose(result.survival.numpy(), after / before, rtol=1e-3)
    np.testing.assert_allclose(result.mean_share, sn.mean() ** 2 * sn.size / (sn**2).sum(), rtol=1e-4)
    common = (delta.mean(axis=0) ** 2).sum() / (delta**2).sum(axis=-1).mean()
    np.testing.assert_allclose(result.common_share, common, rtol=1e-3)


def test_a_constant_shift_is_removed_entirely():
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(0))
    result = layernorm_shift_survival(x, torch.full((32,), 0.7))
    assert result.mean_share == pytest.approx(1.0)
    torch.testing.assert_close(result.survival, torch.zeros(5), atol=1e-5, rtol=0)


def test_a_shift_along_the_token_itself_is_removed():
    x = torch.randn(1, 32, generator=torch.Generator().manual_seed(0))
    centred = x[0] - x[0].mean()
    torch.testing.assert_close(layernorm_shift_survival(x, 0.5 * centred).survival, torch.zeros(1), atol=1e-5, rtol=0)


def test_small_shift_survival_matches_the_first_order_projection():
    # To first order N(x + s) - N(x) = sqrt(H) / ||x_c|| * P s, P projecting out the all-ones vector and x_c,
    # so survival = ||P s|| / ||s||.
    generator = torch.Generator().manual_seed(3)
    hidden = 64
    x = torch.randn(4, hidden, generator=generator, dtype=torch.float64)
    shift = 1e-3 * torch.randn(hidden, generator=generator, dtype=torch.float64)
    result = layernorm_shift_survival(x, shift)
    ones = torch.ones(hidden, dtype=torch.float64) / hidden**0.5
    for i in range(x.shape[0]):
        centred = x[i] - x[i].mean()
        basis = torch.stack([ones, centred / centred.norm()], dim=1)  # orthonormal: ones and x_c are orthogonal
        projected = shift - basis @ (basis.T @ shift)
        assert float(result.survival[i]) == pytest.approx(float(projected.norm() / shift.norm()), rel=1e-2)


def test_shift_survival_is_scale_invariant_and_common_when_tokens_agree():
    generator = torch.Generator().manual_seed(4)
    x, shift = torch.randn(6, 16, generator=generator), torch.randn(16, generator=generator)
    torch.testing.assert_close(layernorm_shift_survival(3 * x, 3 * shift, eps=0.0).survival,
                               layernorm_shift_survival(x, shift, eps=0.0).survival)
    same_tokens = x[:1].expand(6, 16)
    assert layernorm_shift_survival(same_tokens, shift).common_share == pytest.approx(1.0, rel=1e-5)


def test_shift_survival_rejects_bad_input():
    with pytest.raises(ValueError, match="same hidden size"):
        layernorm_shift_survival(torch.randn(3, 8), torch.randn(7))
    with pytest.raises(ValueError, match="same hidden size"):
        layernorm_shift_survival(torch.randn(8), torch.randn(8))
    with pytest.raises(ValueError, match="not all zeros"):
        layernorm_shift_survival(torch.randn(3, 8), torch.zeros(8))


# --- one SGD step moves the rows that are used ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["packaged", "tiny_bert"])
def test_one_step_row_changes_equals_lr_times_gradient(request, name):
    model = request.getfixturevalue(name)
    model = model[0] if isinstance(model, tuple) else model
    ids, types = _random_inputs(model, seq=6)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    changes = one_step_row_changes(model, ids, types, lr=0.5)
    # reference: the gradient of the same toy loss, from autograd on an untouched copy
    reference = copy.deepcopy(model)
    loss = reference(input_ids=ids, token_type_ids=types).last_hidden_state.pow(2).mean()
    (gradient,) = torch.autograd.grad(loss, reference.embeddings.token_type_embeddings.weight)
    torch.testing.assert_close(changes, 0.5 * gradient.norm(dim=-1), rtol=1e-3, atol=1e-9)
    assert (changes > 0).all()  # every type is used, so every row moves
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())  # the model passed in is untouched


def test_one_step_row_changes_leaves_unused_rows_alone(tiny_bert):
    ids, _ = _random_inputs(tiny_bert)
    types = torch.zeros_like(ids)
    types[0, -2:] = 2  # type 1 is never used
    changes = one_step_row_changes(tiny_bert, ids, types)
    assert changes[0] > 0 and changes[2] > 0 and changes[1] == 0
    assert torch.equal(one_step_row_changes(tiny_bert, ids)[1:], torch.zeros(2))  # single text: only row 0 moves


# --- the clear errors the chapter relies on, next to the raw behaviour it shows -------------------------------------

def test_raw_layer_errors_and_silent_broadcast_that_the_chapter_shows(any_bert):
    embeddings = any_bert.embeddings
    ids, types = _random_inputs(any_bert)
    with torch.no_grad():
        with pytest.raises(IndexError, match="index out of range"):
            embeddings(ids, token_type_ids=torch.full_like(ids, any_bert.config.type_vocab_size))
        with pytest.raises(RuntimeError, match="must match the size"):
            embeddings(ids, token_type_ids=types[:, :-1])
        assert torch.equal(embeddings(ids, token_type_ids=torch.tensor([[1]])),
                           embeddings(ids, token_type_ids=torch.ones_like(ids)))  # silently all sentence B


def test_check_embedding_inputs_gives_the_clear_errors(any_bert):
    embeddings = any_bert.embeddings
    ids, types = _random_inputs(any_bert)
    rows = any_bert.config.type_vocab_size
    with pytest.raises(ValueError, match=rf"holds {rows}, outside the token-type \(segment\) table of {rows} rows"):
        check_embedding_inputs(embeddings, ids, torch.full_like(ids, rows))
    with pytest.raises(ValueError, match=r"token_type_ids has shape \(1, 1\) but input_ids has"):
        check_embedding_inputs(embeddings, ids, torch.tensor([[1]]))
    with pytest.raises(ValueError, match="one token type per token"):
        check_embedding_inputs(embeddings, ids, types[:, :-1])
    with pytest.raises(ValueError, match="holds -1"):
        check_embedding_inputs(embeddings, ids, torch.full_like(ids, -1))
