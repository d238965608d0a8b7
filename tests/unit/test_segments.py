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
from tests.unit.conftest import EPS32, rounding_tolerance

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


@pytest.mark.parametrize(("bad", "error"), [(-1, ValueError), (2.0, TypeError), ("3", TypeError)])
def test_segment_pattern_rejects_bad_lengths(bad, error):
    with pytest.raises(error, match="len_a must be a non-negative integer, got .*number of word pieces"):
        segment_pattern(bad, 1)
    with pytest.raises(error, match="len_b must be a non-negative integer"):
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
    rtol = rounding_tolerance(torch.float32, terms=any_bert.config.hidden_size)  # float32 norms of `hidden` squares
    with torch.no_grad():
        torch.testing.assert_close(norms["token"], embeddings.word_embeddings(ids[0]).norm(dim=-1), rtol=rtol, atol=0)
        torch.testing.assert_close(norms["segment"], embeddings.token_type_embeddings(types[0]).norm(dim=-1),
                                   rtol=rtol, atol=0)
        torch.testing.assert_close(norms["position"], embeddings.position_embeddings(positions).norm(dim=-1),
                                   rtol=rtol, atol=0)


def test_part_norms_default_types_are_row_zero(tiny_bert):
    ids, _ = _random_inputs(tiny_bert)
    row_zero = tiny_bert.embeddings.token_type_embeddings.weight[0].detach().norm()
    rtol = rounding_tolerance(torch.float32, terms=tiny_bert.config.hidden_size)  # float32 norms of `hidden` squares
    assert torch.allclose(part_norms(tiny_bert.embeddings, ids)["segment"], row_zero.expand(ids.shape[1]), rtol=rtol,
                          atol=0)


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
    # float32 relative changes (~1) through LayerNorm and two norms of `hidden` terms, by the helper's route and
    # the layer's -> rounding_tolerance(float32, hidden)
    rtol = rounding_tolerance(torch.float32, terms=any_bert.config.hidden_size)
    torch.testing.assert_close(segment_swap_change(embeddings, ids, types), expected, rtol=rtol, atol=rtol)


def test_segment_swap_change_ignores_dropout(tiny_bert):
    training = copy.deepcopy(tiny_bert).train()
    ids, types = _random_inputs(tiny_bert)
    types = types.clamp(max=1)
    # exact: the same weights, the same operations in the same order; only the unused dropout differs
    assert torch.equal(segment_swap_change(training.embeddings, ids, types),
                       segment_swap_change(tiny_bert.embeddings, ids, types))


def test_segment_swap_change_is_zero_when_rows_are_equal(tiny_bert):
    same = copy.deepcopy(tiny_bert)
    with torch.no_grad():
        same.embeddings.token_type_embeddings.weight[1] = same.embeddings.token_type_embeddings.weight[0]
    ids, types = _random_inputs(tiny_bert)
    change = segment_swap_change(same.embeddings, ids, types.clamp(max=1))
    assert torch.equal(change, torch.zeros(ids.shape))  # exact: equal rows give bit-equal sums, and x - x = 0


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
    hidden = xn.shape[-1]
    # The helper works in float32, the reference in float64: float32 tolerances throughout.
    # before: a ratio of two float32 norms of `hidden` terms -> rounding_tolerance(float32, hidden) = 2.3e-5
    np.testing.assert_allclose(result.before.numpy(), before, rtol=rounding_tolerance(torch.float32, terms=hidden))
    # after = ||N(x + s) - N(x)|| / sqrt(hidden): a difference of float32 LayerNorm outputs of size ~1 whose entries
    # are off by ~eps32 x sqrt(hidden) -> atol rounding_tolerance(float32, hidden); relative to after >= 0.14 here
    after_atol = rounding_tolerance(torch.float32, terms=hidden)
    np.testing.assert_allclose(result.after.numpy(), after, rtol=0, atol=after_atol)
    # survival = after / before: the two relative errors add
    survival_rtol = after_atol / after.min() + rounding_tolerance(torch.float32, terms=hidden)
    np.testing.assert_allclose(result.survival.numpy(), after / before, rtol=survival_rtol)
    # the float32 mean of the shift cancels: |mean| is ~1/14 of mean |s|, so its rounding grows by that ratio,
    # and squaring doubles it -> 2 x rounding_tolerance(float32, hidden, mean |s| / |mean s|)
    cancel = float(np.abs(sn).mean() / abs(sn.mean()))
    np.testing.assert_allclose(result.mean_share, sn.mean() ** 2 * sn.size / (sn**2).sum(),
                               rtol=2 * rounding_tolerance(torch.float32, terms=hidden, scale=cancel))
    common = (delta.mean(axis=0) ** 2).sum() / (delta**2).sum(axis=-1).mean()
    # a ratio of squared norms of the deltas: twice the deltas' relative error, after_atol / after
    np.testing.assert_allclose(result.common_share, common, rtol=2 * after_atol / after.min())


def test_a_constant_shift_is_removed_entirely():
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(0))
    result = layernorm_shift_survival(x, torch.full((32,), 0.7))
    # float32: a mean and a sum of squares over 32 entries -> rounding_tolerance(float32, 32) = 6.7e-6, not
    # approx's float64-sized default 1e-6
    assert result.mean_share == pytest.approx(1.0, rel=rounding_tolerance(torch.float32, terms=32))
    # N(x + c) and N(x) differ only by float32 rounding of sums of 32 terms of size ~1, divided by before
    survival = rounding_tolerance(torch.float32, terms=32, scale=1 / float(result.before.min()))
    torch.testing.assert_close(result.survival, torch.zeros(5), atol=survival, rtol=0)


def test_a_shift_along_the_token_itself_is_removed():
    x = torch.randn(1, 32, generator=torch.Generator().manual_seed(0))
    centred = x[0] - x[0].mean()
    result = layernorm_shift_survival(x, 0.5 * centred)
    # N(x + x_c / 2) = N(x) up to float32 rounding of sums of 32 terms of size ~1, divided by before
    survival = rounding_tolerance(torch.float32, terms=32, scale=1 / float(result.before.min()))
    torch.testing.assert_close(result.survival, torch.zeros(1), atol=survival, rtol=0)


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
        # not rounding but truncation: second-order terms are O(|s| / |x_c|) ~ 1e-3, and the float32 difference
        # N(x + s) - N(x) loses eps32 x sqrt(64) / 1e-3 ~ 1e-3 -> rel 1e-2
        assert float(result.survival[i]) == pytest.approx(float(projected.norm() / shift.norm()), rel=1e-2)


def test_shift_survival_is_scale_invariant_and_common_when_tokens_agree():
    generator = torch.Generator().manual_seed(4)
    x, shift = torch.randn(6, 16, generator=generator), torch.randn(16, generator=generator)
    # float32: 3x rounds each entry, then sums of 16 terms; survival ~1 -> rounding_tolerance(float32, 16) = 4.8e-6
    torch.testing.assert_close(layernorm_shift_survival(3 * x, 3 * shift, eps=0.0).survival,
                               layernorm_shift_survival(x, shift, eps=0.0).survival, rtol=0,
                               atol=rounding_tolerance(torch.float32, terms=16))
    same_tokens = x[:1].expand(6, 16)
    # float32 sums of 16 squares and a mean of 6 equal rows -> rounding_tolerance(float32, 16) = 4.8e-6
    assert layernorm_shift_survival(same_tokens, shift).common_share == pytest.approx(
        1.0, rel=rounding_tolerance(torch.float32, terms=16))


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
    # The same gradient, bit for bit (the same ops on equal copies); but SGD stores w - lr * g in float32, each entry
    # off by <= eps32 / 2 x |w_i|, so a row's change by <= eps32 / 2 x ||w_row|| (subtracting w back is exact):
    # atol eps32 x max ||w_row||. (tiny_bert's changes are ~5e-8 on rows of norm ~0.1: only ~20 ulps.) The norms
    # themselves sum `hidden` squares -> rtol rounding_tolerance(float32, hidden).
    weight = model.embeddings.token_type_embeddings.weight.detach()
    torch.testing.assert_close(changes, 0.5 * gradient.norm(dim=-1),
                               rtol=rounding_tolerance(torch.float32, terms=weight.shape[1]),
                               atol=EPS32 * float(weight.norm(dim=-1).max()))
    assert (changes > 0).all()  # every type is used, so every row moves
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())  # the model passed in is untouched


def test_one_step_row_changes_leaves_unused_rows_alone(tiny_bert):
    ids, _ = _random_inputs(tiny_bert)
    types = torch.zeros_like(ids)
    types[0, -2:] = 2  # type 1 is never used
    changes = one_step_row_changes(tiny_bert, ids, types)
    assert changes[0] > 0 and changes[2] > 0 and changes[1] == 0
    # exact: an unused row's gradient is exactly 0, so SGD leaves it bit for bit; single text: only row 0 moves
    assert torch.equal(one_step_row_changes(tiny_bert, ids)[1:], torch.zeros(2))


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


# ------------------------------------------------------------------ second edition: shares, scales, row B


def test_dimension_shares_against_numpy(any_bert):
    from helpers import dimension_shares

    table = any_bert.embeddings.token_type_embeddings.weight.detach()
    reference = np.square(table.double().numpy()).sum(axis=0)
    reference /= reference.sum()
    np.testing.assert_allclose(dimension_shares(table).numpy(), reference, rtol=1e-12)  # float64 both sides
    assert abs(float(dimension_shares(table[0]).sum()) - 1) < 1e-12


def test_random_shift_change_against_a_hand_computation(tiny_bert):
    from helpers import random_shift_change

    embeddings = tiny_bert.embeddings
    ids = torch.tensor([[2, 5, 7, 9]])
    types = torch.tensor([[0, 0, 1, 1]])
    assert torch.equal(random_shift_change(embeddings, ids, types, 0.0, draws=3), torch.zeros(3))
    got = random_shift_change(embeddings, ids, types, 0.5, seed=1, draws=1)
    direction = torch.randn(embeddings.LayerNorm.normalized_shape[0], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        base = embeddings(ids, types)
        summed = (embeddings.word_embeddings(ids) + embeddings.token_type_embeddings(types)) \
            + embeddings.position_embeddings(torch.arange(4))[None]
        moved = embeddings.LayerNorm(summed + 0.5 * direction / direction.norm())
    expected = ((moved - base).norm(dim=-1) / base.norm(dim=-1)).mean()
    hidden = direction.numel()
    assert abs(float(got[0]) - float(expected)) < 10 * EPS32 * hidden ** 0.5  # float32, same ops


def test_contrastive_step_never_reaches_row_b(packaged):
    from helpers import contrastive_step_gradients

    model, tokenizer = packaged
    before = model.embeddings.token_type_embeddings.weight.detach().clone()
    grad = contrastive_step_gradients(model, tokenizer, ["a dog runs", "the sky is blue"],
                                      ["a puppy is running", "blue sky today"])
    assert grad.shape == before.shape
    assert torch.equal(grad[1], torch.zeros_like(grad[1]))  # no token has type 1: exactly zero
    assert grad[0].abs().sum() > 0
    assert torch.equal(model.embeddings.token_type_embeddings.weight, before)  # the model is untouched


def test_random_shift_survival_is_the_survival_of_each_random_shift():
    from helpers.segments import layernorm_shift_survival, random_shift_survival

    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
    got = random_shift_survival(x, 0.7, eps=1e-12, seed=3, draws=4)
    directions = torch.randn(4, 16, generator=torch.Generator().manual_seed(3))
    for value, d in zip(got, directions, strict=True):
        shift = 0.7 * d / d.norm()
        delta = torch.nn.functional.layer_norm(x + shift, (16,)) - torch.nn.functional.layer_norm(x, (16,))
        before = shift.norm() / (x - x.mean(-1, keepdim=True)).norm(dim=-1)
        after = delta.norm(dim=-1) / torch.nn.functional.layer_norm(x, (16,)).norm(dim=-1)
        torch.testing.assert_close(value, (after / before).mean(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(value, layernorm_shift_survival(x, shift).survival.mean())
    with pytest.raises(ValueError, match="norm"):
        random_shift_survival(x, 0.0)
    with pytest.raises(ValueError, match="tokens, hidden"):
        random_shift_survival(x[0], 1.0)
