"""Careless and hostile input to the analysis helpers (segments, tokens, positions, and the size-taking helpers of
sinusoids and relative positions): each mistake gets the named exception type and a message that says what to pass.

CHECKED lists explicit mistakes, each with its exception type and a fragment of its message; the properties below
(hypothesis) draw random tables, ids, masks and wrong types: every call either agrees with an independent reference
(torch, scikit-learn, a direct formula) or raises TypeError/ValueError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics.pairwise import cosine_similarity
from transformers import BatchEncoding, BertTokenizer

from helpers import (
    absolute_position_predictions,
    absolute_position_probe,
    alibi_bias,
    alibi_slopes,
    band_statistics,
    constant_position_mae,
    contrastive_step_gradients,
    cosine_similarity_matrix,
    diagonal_profile,
    dimension_shares,
    extrapolation_mae,
    final_state,
    greedy_wordpiece,
    halves_permutation,
    layernorm_shift_survival,
    nearest_table,
    nearest_tokens,
    offset_dot_product,
    one_step_row_changes,
    order_properties,
    random_shift_change,
    relative_order_probe,
    rotation_period,
    row_norms,
    segment_rows,
    segment_table_rows,
    single_token_id,
    swap_segments,
    t5_buckets,
    token_matrix,
    token_table,
    validation,
    word_group_pca,
)
from helpers.positions import dot_product_matrix
from tests.unit.conftest import rounding_tolerance
from tests.unit.test_hostile_input import BAD_IDS, BERT, CASES, DISTILBERT, IDS, LAYER, PROPERTY, SMALL


def _tokenizer() -> BertTokenizer:
    """A WordPiece tokenizer whose 50 tokens fill exactly BERT's small token table."""
    words = ["the", "bank", "river", "money", "red", "blue", "green", "one", "two", "three", "##ing"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + letters
    vocab += [f"[unused{i}]" for i in range(SMALL["vocab_size"] - len(vocab))]
    return BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, model_max_length=SMALL["max_position_embeddings"])


TOKENIZER = _tokenizer()
GROUPS = {"colours": ["red", "blue", "green"], "numbers": ["one", "two", "three"]}
TABLE = BERT.embeddings.position_embeddings.weight.detach()  # (24, 16) float32
TALL = torch.zeros(10**5, 1)  # 0.4 MB, but its (10**5, 10**5) similarity matrix would need 80 GB
X = torch.randn(3, 16, generator=torch.Generator().manual_seed(0))  # (tokens, hidden) for the LayerNorm helper
TYPES = torch.tensor([[0, 0, 1, 1]])

# The mistakes of the analysis helpers: label -> (call, the exception type, a fragment of its message).
CHECKED = {
    "swap_segments: BatchEncoding": (lambda: swap_segments(BatchEncoding({"token_type_ids": [[0, 1]]})),
                                     TypeError, "whole output"),
    "swap_segments: text": (lambda: swap_segments("0 0 1 1"), TypeError, "not text"),
    "swap_segments: token strings": (lambda: swap_segments(["0", "1"]), TypeError, "token strings"),
    "swap_segments: ragged list": (lambda: swap_segments([[0, 0, 1], [0, 1]]), ValueError, "ragged"),
    "swap_segments: empty list": (lambda: swap_segments([]), ValueError, "empty list"),
    "swap_segments: float tensor": (lambda: swap_segments(torch.tensor([0.0, 1.0])), TypeError, "dtype torch.float32"),
    "swap_segments: bool tensor": (lambda: swap_segments(torch.tensor([True, False])), TypeError, "dtype torch.bool"),
    "swap_segments: type 2": (lambda: swap_segments(torch.tensor([0, 1, 2])), ValueError, "holds 2"),
    "swap_segments: type -1": (lambda: swap_segments(torch.tensor([0, -1])), ValueError, "holds -1"),
    "swap_segments: None": (lambda: swap_segments(None), TypeError, "got NoneType"),
    "swap_segments: 3-D": (lambda: swap_segments(torch.zeros(1, 2, 3, dtype=torch.long)), ValueError, "(batch, seq)"),
    "swap_segments: mask one short": (lambda: swap_segments(TYPES, torch.ones(1, 3, dtype=torch.long)), ValueError,
                                      "attention_mask has shape (1, 3)"),
    "swap_segments: mask as BatchEncoding": (lambda: swap_segments(TYPES, BatchEncoding({"attention_mask": [1] * 4})),
                                             TypeError, "whole output"),
    "swap_segments: mask of 2s": (lambda: swap_segments(TYPES, torch.full((1, 4), 2)), ValueError,
                                  "attention_mask holds 2"),
    "swap_segments: float mask": (lambda: swap_segments(TYPES, torch.ones(1, 4)), TypeError, "attention_mask"),
    "segment_table_rows: whole BertModel": (lambda: segment_table_rows(BERT), TypeError, "model.embeddings"),
    "segment_table_rows: a tensor": (lambda: segment_table_rows(TABLE), TypeError, "model.embeddings"),
    "segment_rows: whole BertModel": (lambda: segment_rows(BERT), TypeError, "pass its embedding layer"),
    "segment_rows: a string": (lambda: segment_rows("embeddings"), TypeError, "got str"),
    "segment_rows: DistilBERT embeddings": (lambda: segment_rows(DISTILBERT.embeddings), ValueError,
                                            "has no token_type_embeddings"),
    "layernorm_shift_survival: x None": (lambda: layernorm_shift_survival(None, X[0]), TypeError, "x must be"),
    "layernorm_shift_survival: x text": (lambda: layernorm_shift_survival("x", X[0]), TypeError, "x must be"),
    "layernorm_shift_survival: shift of strings": (lambda: layernorm_shift_survival(X, ["a"] * 16), TypeError,
                                                   "shift must be"),
    "layernorm_shift_survival: 1-D x": (lambda: layernorm_shift_survival(X[0], X[0]), ValueError, "same hidden size"),
    "layernorm_shift_survival: shift one short": (lambda: layernorm_shift_survival(X, X[0, :-1]), ValueError,
                                                  "same hidden size"),
    "layernorm_shift_survival: zero shift": (lambda: layernorm_shift_survival(X, torch.zeros(16)), ValueError,
                                             "not all zeros"),
    "layernorm_shift_survival: NaN in x": (lambda: layernorm_shift_survival(X * math.nan, X[0]), ValueError, "NaN"),
    "layernorm_shift_survival: eps -1": (lambda: layernorm_shift_survival(X, X[0], eps=-1.0), ValueError, "eps"),
    "layernorm_shift_survival: eps text": (lambda: layernorm_shift_survival(X, X[0], eps="1e-12"), TypeError, "eps"),
    "one_step_row_changes: the embedding layer": (lambda: one_step_row_changes(LAYER, IDS), TypeError,
                                                  "the whole model"),
    "one_step_row_changes: BatchEncoding": (lambda: one_step_row_changes(BERT, BAD_IDS["BatchEncoding"]), TypeError,
                                            "whole output"),
    "one_step_row_changes: DistilBERT": (lambda: one_step_row_changes(DISTILBERT, IDS), TypeError, "family"),
    "one_step_row_changes: lr text": (lambda: one_step_row_changes(BERT, IDS, lr="0.1"), TypeError, "lr"),
    "one_step_row_changes: lr NaN": (lambda: one_step_row_changes(BERT, IDS, lr=math.nan), ValueError, "lr"),
    "dimension_shares: 3-D": (lambda: dimension_shares(torch.ones(2, 3, 4)), ValueError, "(rows, hidden)"),
    "dimension_shares: empty": (lambda: dimension_shares(torch.ones(0, 4)), ValueError, "empty"),
    "dimension_shares: all zeros": (lambda: dimension_shares(torch.zeros(2, 4)), ValueError, "all zeros"),
    "dimension_shares: text": (lambda: dimension_shares("rows"), TypeError, "table must be"),
    "dimension_shares: the layer": (lambda: dimension_shares(LAYER.token_type_embeddings), TypeError, ".weight"),
    "random_shift_change: mask one short": (lambda: random_shift_change(LAYER, IDS, None, 1.0, mask=[[1, 1, 1]]),
                                            ValueError, "mask has shape"),
    "random_shift_change: 0 draws": (lambda: random_shift_change(LAYER, IDS, None, 1.0, draws=0), ValueError,
                                     "draws"),
    "random_shift_change: 2.5 draws": (lambda: random_shift_change(LAYER, IDS, None, 1.0, draws=2.5), TypeError,
                                       "draws"),
    "random_shift_change: norm text": (lambda: random_shift_change(LAYER, IDS, None, "1"), TypeError, "norm"),
    "random_shift_change: negative norm": (lambda: random_shift_change(LAYER, IDS, None, -1.0), ValueError, "norm"),
    "random_shift_change: seed 1.5": (lambda: random_shift_change(LAYER, IDS, None, 1.0, seed=1.5), TypeError,
                                      "seed"),
    "random_shift_change: whole model": (lambda: random_shift_change(BERT, IDS, None, 1.0), TypeError,
                                         "model.embeddings"),
    "contrastive_step_gradients: one string": (lambda: contrastive_step_gradients(BERT, TOKENIZER, "the bank",
                                                                                  "the river"), TypeError, "list"),
    "contrastive_step_gradients: lengths differ": (lambda: contrastive_step_gradients(
        BERT, TOKENIZER, ["the bank", "red"], ["the river"]), ValueError, "same number"),
    "contrastive_step_gradients: empty": (lambda: contrastive_step_gradients(BERT, TOKENIZER, [], []), ValueError,
                                          "at least"),
    "contrastive_step_gradients: the embedding layer": (lambda: contrastive_step_gradients(
        LAYER, TOKENIZER, ["red"], ["blue"]), TypeError, "the whole model"),
    "contrastive_step_gradients: model as tokenizer": (lambda: contrastive_step_gradients(
        BERT, BERT, ["red"], ["blue"]), TypeError, "tokenizer"),
    "token_table: the model as tokenizer": (lambda: token_table(BERT, "the bank"), TypeError, "tokenizer"),
    "token_table: arguments swapped": (lambda: token_table("the bank", TOKENIZER), TypeError, "tokenizer"),
    "token_table: max_positions 1": (lambda: token_table(TOKENIZER, "red", max_positions=1), ValueError, ">= 2"),
    "token_table: max_positions 2.5": (lambda: token_table(TOKENIZER, "red", max_positions=2.5), TypeError,
                                       "max_positions"),
    "token_table: max_positions True": (lambda: token_table(TOKENIZER, "red", max_positions=True), TypeError,
                                        "max_positions"),
    "token_table: a list of texts": (lambda: token_table(TOKENIZER, ["red", "blue"]), TypeError, "one string"),
    "greedy_wordpiece: the tokenizer as vocab": (lambda: greedy_wordpiece("bank", TOKENIZER), TypeError,
                                                 "get_vocab()"),
    "greedy_wordpiece: a list as vocab": (lambda: greedy_wordpiece("bank", ["bank"]), TypeError, "get_vocab()"),
    "greedy_wordpiece: max_chars 0": (lambda: greedy_wordpiece("bank", TOKENIZER.get_vocab(), max_chars=0),
                                      ValueError, "max_chars"),
    "greedy_wordpiece: max_chars 2.5": (lambda: greedy_wordpiece("bank", TOKENIZER.get_vocab(), max_chars=2.5),
                                        TypeError, "max_chars"),
    "greedy_wordpiece: prefix None": (lambda: greedy_wordpiece("bank", TOKENIZER.get_vocab(), prefix=None),
                                      TypeError, "prefix"),
    "greedy_wordpiece: two words": (lambda: greedy_wordpiece("the bank", TOKENIZER.get_vocab()), ValueError,
                                    "one word"),
    "single_token_id: the model as tokenizer": (lambda: single_token_id(BERT, "bank"), TypeError, "tokenizer"),
    "single_token_id: word None": (lambda: single_token_id(TOKENIZER, None), TypeError, "one string"),
    "single_token_id: an id": (lambda: single_token_id(TOKENIZER, 7), TypeError, "one string"),
    "token_matrix: words as one string": (lambda: token_matrix(BERT, TOKENIZER, "bank"), TypeError,
                                          "a list of words"),
    "token_matrix: no words": (lambda: token_matrix(BERT, TOKENIZER, []), ValueError, "at least one word"),
    "token_matrix: ids instead of words": (lambda: token_matrix(BERT, TOKENIZER, [5, 6]), TypeError,
                                           "a list of words"),
    "token_matrix: BatchEncoding": (lambda: token_matrix(BERT, TOKENIZER, TOKENIZER("red")), TypeError,
                                    "a list of words"),
    "token_matrix: the embedding layer": (lambda: token_matrix(LAYER, TOKENIZER, ["red"]), TypeError,
                                          "the whole model"),
    "token_matrix: a word of two tokens": (lambda: token_matrix(BERT, TOKENIZER, ["banking"]), ValueError,
                                           "not one token"),
    "nearest_tokens: k 0": (lambda: nearest_tokens(BERT, TOKENIZER, "bank", k=0), ValueError, "k must be"),
    "nearest_tokens: k 2.5": (lambda: nearest_tokens(BERT, TOKENIZER, "bank", k=2.5), TypeError, "k must be"),
    "nearest_tokens: k past the vocabulary": (lambda: nearest_tokens(BERT, TOKENIZER, "bank", k=50), ValueError,
                                              "between 1 and 49"),
    "nearest_tokens: model and tokenizer swapped": (lambda: nearest_tokens(TOKENIZER, BERT, "bank"), TypeError,
                                                    "BERT model"),
    "nearest_tokens: the position table": (lambda: nearest_tokens(LAYER.position_embeddings, TOKENIZER, "bank"),
                                           ValueError, "does not belong"),
    "nearest_tokens: word as a list": (lambda: nearest_tokens(BERT, TOKENIZER, ["bank"]), TypeError, "one string"),
    "nearest_table: words as one string": (lambda: nearest_table(BERT, TOKENIZER, "bank"), TypeError,
                                           "a list of words"),
    "nearest_table: digits -1": (lambda: nearest_table(BERT, TOKENIZER, ["bank"], digits=-1), ValueError, "digits"),
    "nearest_table: digits 1.5": (lambda: nearest_table(BERT, TOKENIZER, ["bank"], digits=1.5), TypeError, "digits"),
    "row_norms: the embedding layer": (lambda: row_norms(LAYER), TypeError, "the whole model"),
    "row_norms: a tensor": (lambda: row_norms(TABLE), TypeError, "nn.Embedding"),
    "row_norms: a string": (lambda: row_norms("model"), TypeError, "got str"),
    "word_group_pca: a list of words": (lambda: word_group_pca(BERT, TOKENIZER, ["red", "blue", "one"]), TypeError,
                                        "dict"),
    "word_group_pca: a group as one string": (lambda: word_group_pca(BERT, TOKENIZER, {"a": "red", "b": "one"}),
                                              TypeError, "a list of words"),
    "word_group_pca: 0 components": (lambda: word_group_pca(BERT, TOKENIZER, GROUPS, 0), ValueError, "n_components"),
    "word_group_pca: 1.5 components": (lambda: word_group_pca(BERT, TOKENIZER, GROUPS, 1.5), TypeError,
                                       "n_components"),
    "word_group_pca: no groups": (lambda: word_group_pca(BERT, TOKENIZER, {}), ValueError, "non-empty"),
    "word_group_pca: too few words": (lambda: word_group_pca(BERT, TOKENIZER, {"a": ["red"], "b": ["one"]}),
                                      ValueError, "needs more than 2 words"),
    "final_state: shift 1.5": (lambda: final_state(BERT, TOKENIZER, "the bank", "bank", 1.5), TypeError, "shift"),
    "final_state: shift -1": (lambda: final_state(BERT, TOKENIZER, "the bank", "bank", -1), ValueError, "shift"),
    "final_state: shift past the table": (lambda: final_state(BERT, TOKENIZER, "the bank", "bank", 22), ValueError,
                                          "shift must be in 0..20"),
    "final_state: the embedding layer": (lambda: final_state(LAYER, TOKENIZER, "the bank", "bank"), TypeError,
                                         "the whole model"),
    "final_state: text as a list": (lambda: final_state(BERT, TOKENIZER, ["the bank"], "bank"), TypeError,
                                    "one string"),
    "final_state: word not in text": (lambda: final_state(BERT, TOKENIZER, "the bank", "river"), ValueError,
                                      "does not occur"),
    "dot_product_matrix: numpy array": (lambda: dot_product_matrix(TABLE.numpy()), TypeError, "torch.Tensor"),
    "dot_product_matrix: whole model": (lambda: dot_product_matrix(BERT), TypeError, "position_embeddings.weight"),
    "dot_product_matrix: nn.Embedding": (lambda: dot_product_matrix(LAYER.position_embeddings), TypeError, ".weight"),
    "dot_product_matrix: 1-D": (lambda: dot_product_matrix(TABLE[0]), ValueError, "2-D"),
    "dot_product_matrix: 10**5 rows": (lambda: dot_product_matrix(TALL), ValueError, "memory"),
    "cosine_similarity_matrix: 10**5 rows": (lambda: cosine_similarity_matrix(TALL), ValueError, "memory"),
    "cosine_similarity_matrix: a list": (lambda: cosine_similarity_matrix(TABLE.tolist()), TypeError, "torch.Tensor"),
    "cosine_similarity_matrix: integer table": (lambda: cosine_similarity_matrix(TABLE.long()), TypeError,
                                                "floating-point"),
    "cosine_similarity_matrix: NaN": (lambda: cosine_similarity_matrix(TABLE * math.nan), ValueError, "NaN"),
    "diagonal_profile: max_offset 1.5": (lambda: diagonal_profile(TABLE @ TABLE.T, 1.5), TypeError, "max_offset"),
    "diagonal_profile: max_offset 0": (lambda: diagonal_profile(TABLE @ TABLE.T, 0), ValueError, "max_offset"),
    "diagonal_profile: max_offset past the table": (lambda: diagonal_profile(TABLE @ TABLE.T, 24), ValueError,
                                                    "too large"),
    "diagonal_profile: start 1.5": (lambda: diagonal_profile(TABLE @ TABLE.T, 2, start=1.5), TypeError, "start"),
    "diagonal_profile: stop past the end": (lambda: diagonal_profile(TABLE @ TABLE.T, 2, stop=30), ValueError,
                                            "stop <= 24"),
    "diagonal_profile: a list": (lambda: diagonal_profile([[1.0, 0.0], [0.0, 1.0]], 1), TypeError, "matrix"),
    "diagonal_profile: the table itself": (lambda: diagonal_profile(TABLE, 2), ValueError, "square"),
    "absolute_position_predictions: folds 1": (lambda: absolute_position_predictions(TABLE, folds=1), ValueError,
                                               "folds"),
    "absolute_position_predictions: folds 2.5": (lambda: absolute_position_predictions(TABLE, folds=2.5), TypeError,
                                                 "folds"),
    "absolute_position_predictions: seed 0.5": (lambda: absolute_position_predictions(TABLE, seed=0.5), TypeError,
                                                "seed"),
    "absolute_position_predictions: more folds than rows": (lambda: absolute_position_predictions(TABLE, folds=30),
                                                            ValueError, "needs at least 30 rows"),
    "absolute_position_probe: a numpy array": (lambda: absolute_position_probe(TABLE.numpy()), TypeError,
                                               "torch.Tensor"),
    "constant_position_mae: 0 positions": (lambda: constant_position_mae(0), ValueError, "num_positions"),
    "constant_position_mae: 10**12 positions": (lambda: constant_position_mae(10**12), ValueError, "memory"),
    "constant_position_mae: 2.5 positions": (lambda: constant_position_mae(2.5), TypeError, "num_positions"),
    "constant_position_mae: the table": (lambda: constant_position_mae(TABLE), TypeError, "table.shape[0]"),
    "constant_position_mae: fewer positions than folds": (lambda: constant_position_mae(3), ValueError, "folds"),
    "relative_order_probe: 0 pairs": (lambda: relative_order_probe(TABLE, pairs=0), ValueError, "pairs"),
    "relative_order_probe: 10**9 pairs": (lambda: relative_order_probe(TABLE, pairs=10**9), ValueError, "memory"),
    "relative_order_probe: 2.5 pairs": (lambda: relative_order_probe(TABLE, pairs=2.5), TypeError, "pairs"),
    "relative_order_probe: folds 1": (lambda: relative_order_probe(TABLE, folds=1), ValueError, "folds"),
    "relative_order_probe: too few rows": (lambda: relative_order_probe(TABLE[:6]), ValueError, "needs at least 10"),
    "extrapolation_mae: fit_rows 2.5": (lambda: extrapolation_mae(TABLE, 2.5), TypeError, "fit_rows"),
    "extrapolation_mae: all rows": (lambda: extrapolation_mae(TABLE, 24), ValueError, "both sides"),
    "extrapolation_mae: 1 row": (lambda: extrapolation_mae(TABLE, 1), ValueError, "both sides"),
    "order_properties: max_offset 0": (lambda: order_properties(TABLE, 0), ValueError, "max_offset"),
    "order_properties: max_offset past the table": (lambda: order_properties(TABLE, 23), ValueError, "too large"),
    "order_properties: max_offset text": (lambda: order_properties(TABLE, "5"), TypeError, "max_offset"),
    "rotation_period: text": (lambda: rotation_period("coords"), TypeError, "coords"),
    "rotation_period: None": (lambda: rotation_period(None), TypeError, "coords"),
    "rotation_period: a list of strings": (lambda: rotation_period([["a", "b"]] * 3), TypeError, "coords"),
    "rotation_period: 3 columns": (lambda: rotation_period(np.zeros((10, 3))), ValueError, "(positions, 2)"),
    "rotation_period: 2 rows": (lambda: rotation_period(np.ones((2, 2))), ValueError, "at least 3 rows"),
    "rotation_period: no turn": (lambda: rotation_period(np.tile([[1.0, 0.0]], (10, 1))), ValueError, "turn"),
    "band_statistics: edges an int": (lambda: band_statistics(TABLE, 8), TypeError, "edges"),
    "band_statistics: edges as text": (lambda: band_statistics(TABLE, ("8", "16")), TypeError, "edges"),
    "band_statistics: float edges": (lambda: band_statistics(TABLE, (8.5, 16)), TypeError, "edges"),
    "band_statistics: decreasing edges": (lambda: band_statistics(TABLE, (16, 8)), ValueError, "increase"),
    "halves_permutation: odd width": (lambda: halves_permutation(3), ValueError, "even"),
    "offset_dot_product: offset 1.5": (lambda: offset_dot_product(1.5, 8), TypeError, "offset must be an integer"),
    "offset_dot_product: odd width": (lambda: offset_dot_product(1, 7), ValueError, "d_model"),
    "alibi_slopes: 10**12 heads": (lambda: alibi_slopes(10**12), ValueError, "memory"),
    "alibi_slopes: 0 heads": (lambda: alibi_slopes(0), ValueError, "num_heads"),
    "alibi_slopes: 2.5 heads": (lambda: alibi_slopes(2.5), TypeError, "num_heads"),
    "alibi_bias: 8 heads, 10**5 long": (lambda: alibi_bias(8, 10**5), ValueError, "memory"),
    "alibi_bias: length 0": (lambda: alibi_bias(8, 0), ValueError, "length"),
    "t5_buckets: offsets as text": (lambda: t5_buckets("0 1 2"), TypeError, "offsets"),
    "t5_buckets: offsets None": (lambda: t5_buckets(None), TypeError, "offsets"),
}



def test_the_suites_try_at_least_three_hundred_distinct_bad_inputs():
    assert len(CASES) + len(CHECKED) >= 300, len(CASES) + len(CHECKED)
    assert not set(CASES) & set(CHECKED)


@pytest.mark.parametrize("label", CHECKED)
def test_an_analysis_helper_names_the_mistake(label, big_allocations):
    call, error, fragment = CHECKED[label]
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    assert big_allocations == []  # refused before any big allocation
    assert type(caught.value) is error, caught.value
    assert fragment in str(caught.value)


def test_numpy_integers_are_accepted_by_the_analysis_helpers():
    similarity = cosine_similarity_matrix(TABLE)
    assert torch.equal(diagonal_profile(similarity, np.int64(3), np.int32(2), np.int64(20)),
                       diagonal_profile(similarity, 3, 2, 20))
    assert order_properties(TABLE, np.int64(4)) == order_properties(TABLE, 4)
    assert constant_position_mae(np.int64(24), np.int64(4)) == constant_position_mae(24, 4)
    assert band_statistics(TABLE, (np.int64(8), np.int32(16))) == band_statistics(TABLE, (8, 16))
    assert [n.id for n in nearest_tokens(BERT, TOKENIZER, "bank", np.int64(3))] == \
        [n.id for n in nearest_tokens(BERT, TOKENIZER, "bank", 3)]
    assert token_table(TOKENIZER, "the bank", max_positions=np.int64(8)).ids == token_table(TOKENIZER, "the bank").ids
    assert torch.equal(final_state(BERT, TOKENIZER, "the bank", "bank", np.int64(2)),
                       final_state(BERT, TOKENIZER, "the bank", "bank", 2))



@pytest.mark.parametrize(("check", "message"), [
    (lambda: validation.integer("n", -1, minimum=0), "n must be a non-negative integer, got -1."),
    (lambda: validation.integer("n", 0, minimum=1), "n must be a positive integer, got 0."),
    (lambda: validation.integer("n", 3, minimum=2, even=True), "n must be an even integer >= 2, got 3."),
    (lambda: validation.integer("n", 1.0, hint=" (a count)"), "n must be an integer, got float 1.0 (a count)."),
    (lambda: validation.integer("n", 7, even=True, hint=": pairs."), "n must be an even integer, got 7: pairs."),
    (lambda: validation.real("x", math.inf, above=0.0), "x must be a finite number greater than 0, got inf."),
    (lambda: validation.real("x", -0.5, minimum=0.0), "x must be a finite number >= 0, got -0.5."),
    (lambda: validation.real("x", True), "x must be a real number, got bool True."),
])
def test_the_shared_checks_say_what_was_passed_and_what_to_pass(check, message):
    with pytest.raises((TypeError, ValueError)) as caught:
        check()
    assert str(caught.value) == message


def test_the_shared_checks_accept_numpy_and_zero_dimensional_tensors():
    assert validation.integer("n", np.int16(4), minimum=1, even=True) == 4
    assert validation.integer("n", torch.tensor(4)) == 4
    assert validation.real("x", np.float32(0.5), above=0.0) == 0.5
    assert validation.real("x", torch.tensor(2)) == 2.0


# ---------------------------------------------------------------- properties (hypothesis)

SEGMENT_IDS = st.one_of(
    arrays(np.int64, st.tuples(st.integers(1, 3), st.integers(1, 8)), elements=st.integers(-1, 2)),
    arrays(np.int64, st.integers(1, 8), elements=st.integers(0, 1)),
    st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=4), max_size=3),
    st.lists(st.one_of(st.integers(0, 1), st.text(max_size=2), st.floats(), st.booleans()), max_size=4),
    st.text(max_size=4), st.none(),
)


@PROPERTY
@given(types=SEGMENT_IDS, mask_kind=st.sampled_from(["none", "random", "bool", "short", "twos"]),
       seed=st.integers(0, 9))
def test_swap_segments_is_one_minus_the_types_where_the_mask_is_set_or_refuses(types, mask_kind, seed):
    shape = np.shape(types) if isinstance(types, np.ndarray) else None
    mask = None
    if shape is not None and mask_kind != "none":
        generator = np.random.default_rng(seed)
        mask = {"random": lambda: generator.integers(0, 2, shape), "bool": lambda: generator.integers(0, 2, shape) > 0,
                "short": lambda: np.ones(shape[:-1] + (shape[-1] + 1,), dtype=np.int64),
                "twos": lambda: np.full(shape, 2)}[mask_kind]()
        mask = torch.from_numpy(mask)
    try:
        swapped = swap_segments(types, mask)
    except (TypeError, ValueError):
        return
    original = torch.as_tensor(np.asarray(types), dtype=torch.long)  # the reference: 1 - ids where mask is 1
    expected = 1 - original if mask is None else torch.where(mask.bool(), 1 - original, original)
    assert torch.equal(swapped, expected)


TABLES = st.one_of(
    arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 6)), elements=st.floats(-10, 10)),
    arrays(np.float32, st.tuples(st.integers(2, 12), st.integers(1, 6)), elements=st.floats(-10, 10, width=32)),
    arrays(np.float64, st.tuples(st.integers(2, 6), st.integers(1, 4)), elements=st.floats(allow_nan=True)),
    arrays(np.int64, st.tuples(st.integers(2, 6), st.integers(1, 4)), elements=st.integers(-5, 5)),
    arrays(np.float64, st.integers(1, 6), elements=st.floats(-1, 1)),
)


@PROPERTY
@given(table=TABLES, as_tensor=st.booleans())
@example(table=np.full((2, 1), 1.35e154), as_tensor=True)  # finite values whose dot products overflow float64
@example(table=np.array([[3e-9], [2e-9]]), as_tensor=True)  # norms under torch's default eps (failed before)
@example(table=np.array([[1e-20], [1.0]]), as_tensor=True)  # a norm under scikit-learn's zero
def test_similarity_matrices_match_torch_and_scikit_learn_or_refuse(table, as_tensor):
    value = torch.from_numpy(table) if as_tensor else table
    try:
        dots, cosines = dot_product_matrix(value), cosine_similarity_matrix(value)
    except (TypeError, ValueError):
        return
    rows = torch.from_numpy(table).double()  # (positions, hidden)
    hidden, scale = rows.shape[1], float(rows.abs().max()) ** 2 + 1e-300
    # float64 sums of `hidden` products of size <= scale: rounding_tolerance(float64, hidden, scale)
    torch.testing.assert_close(dots, torch.from_numpy(table.astype(np.float64) @ table.astype(np.float64).T),
                               rtol=0, atol=rounding_tolerance(torch.float64, hidden, scale))
    np.testing.assert_allclose(cosines.numpy(), cosine_similarity(table.astype(np.float64)), rtol=0,
                               atol=rounding_tolerance(torch.float64, hidden))  # the same library, float64
    # scikit-learn leaves a row whose norm is under 10 float64 eps unscaled (sklearn.preprocessing.normalize) and
    # torch clamps every norm under its eps (default 1e-8: a row [3e-9] is no longer at cosine 1 with itself): two
    # guards for tiny rows that differ; compare the rows above both (eps 1e-300 keeps torch's for zero rows only)
    nonzero = rows.norm(dim=1) > 100 * np.finfo(np.float64).eps
    reference = F.cosine_similarity(rows[:, None, :], rows[None, :, :], dim=-1, eps=1e-300)  # (positions, positions)
    torch.testing.assert_close(cosines[nonzero][:, nonzero], reference[nonzero][:, nonzero], rtol=0,
                               atol=rounding_tolerance(torch.float64, hidden))


@PROPERTY
@given(size=st.integers(2, 10), max_offset=st.one_of(st.integers(-1, 11), st.floats(0, 5), st.integers(1, 5).map(
    np.int64)), start=st.one_of(st.integers(-1, 10), st.just(1.5)), stop=st.one_of(st.none(), st.integers(0, 11)),
       seed=st.integers(0, 9))
def test_diagonal_profile_is_the_mean_of_each_diagonal_or_refuses(size, max_offset, start, stop, seed):
    matrix = torch.randn(size, size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    try:
        profile = diagonal_profile(matrix, max_offset, start, stop)
    except (TypeError, ValueError):
        return
    block = matrix[start:stop, start:stop]  # the reference: torch.diagonal, one offset at a time
    expected = torch.stack([torch.diagonal(block, int(k)).mean() for k in range(int(max_offset) + 1)])
    # float64 means of <= 10 values of size ~3: rounding_tolerance(float64, 10, 3)
    torch.testing.assert_close(profile, expected, rtol=0, atol=rounding_tolerance(torch.float64, 10, 3))


@PROPERTY
@given(words=st.one_of(st.lists(st.sampled_from(["red", "blue", "bank", "the", "one"]), max_size=4),
                       st.lists(st.sampled_from(["banking", "zebra", "", "red blue"]), min_size=1, max_size=2),
                       st.text(max_size=5), st.lists(st.integers(0, 49), max_size=3), st.none()))
def test_token_matrix_is_the_table_rows_of_the_tokenizer_ids_or_refuses(words, big_allocations):
    try:
        rows = token_matrix(BERT, TOKENIZER, words)
    except (TypeError, ValueError):
        return
    ids = [TOKENIZER.convert_tokens_to_ids(word) for word in words]  # the reference: the vocabulary lookup
    assert torch.equal(rows, BERT.embeddings.word_embeddings.weight.detach()[ids])
