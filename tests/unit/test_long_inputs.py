"""helpers.long_inputs against independent references: numpy's tile and interp, transformers' own forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from helpers.long_inputs import (
    copied_rows,
    encode_in_windows,
    encode_masked,
    interpolated_rows,
    token_distance,
    with_position_table,
)

EPS32 = torch.finfo(torch.float32).eps


@pytest.fixture(scope="module")
def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=10)
    return BertModel(config).eval()


def test_copied_rows_repeat_the_table_like_numpy_tile():
    table = torch.randn(5, 3, dtype=torch.float64)
    expected = np.tile(table.numpy(), (3, 1))[:13]
    np.testing.assert_array_equal(copied_rows(table, 13).numpy(), expected)


def test_interpolated_rows_match_numpy_interp_column_by_column():
    table = torch.randn(7, 4, dtype=torch.float64)
    got = interpolated_rows(table, 20).numpy()
    where = np.linspace(0, 6, 20)  # new row j sits at j * 6 / 19 on the old rows
    expected = np.stack([np.interp(where, np.arange(7), table[:, c].numpy()) for c in range(4)], axis=1)
    # float64 both sides, one multiply-add per value of size < 5: a few ulps
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got[[0, -1]], table.numpy()[[0, -1]])  # the ends stay put


def test_a_table_of_the_same_length_changes_nothing(tiny_bert):
    table = tiny_bert.embeddings.position_embeddings.weight
    ids = torch.randint(1, 40, (2, 8), generator=torch.Generator().manual_seed(1))
    for rows in (copied_rows(table, 10), interpolated_rows(table, 10)):
        assert torch.equal(rows, table.detach())
        with torch.no_grad():
            assert torch.equal(with_position_table(tiny_bert, rows)(ids).last_hidden_state,
                               tiny_bert(ids).last_hidden_state)


def test_a_longer_table_lets_the_model_read_longer_inputs(tiny_bert):
    ids = torch.randint(1, 40, (1, 25), generator=torch.Generator().manual_seed(2))
    with pytest.raises(RuntimeError):
        tiny_bert(ids)  # transformers' own failure past the table
    table = tiny_bert.embeddings.position_embeddings.weight
    longer = with_position_table(tiny_bert, copied_rows(table, 30))
    assert tiny_bert.embeddings.position_embeddings.num_embeddings == 10  # the original is untouched
    assert tiny_bert.embeddings.position_ids.shape == (1, 10) and tiny_bert.config.max_position_embeddings == 10
    assert longer.encoder is tiny_bert.encoder  # shared, not copied
    assert longer.embeddings.word_embeddings is tiny_bert.embeddings.word_embeddings
    positions = torch.arange(25).unsqueeze(0) % 10  # the copied rows, by hand: explicit ids into the old table
    with torch.no_grad():
        got = longer(ids).last_hidden_state
        by_hand = tiny_bert(ids, position_ids=positions, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    assert torch.equal(got, by_hand)


def test_windows_are_separate_inputs_and_none_is_one_input(tiny_bert):
    ids = torch.randint(3, 40, (17,), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        whole = tiny_bert(torch.cat([torch.tensor([1]), ids[:8], torch.tensor([2])])[None]).last_hidden_state
        assert torch.equal(encode_in_windows(tiny_bert, ids[:8], 1, 2), whole[0, 1:-1])
        windows = encode_in_windows(tiny_bert, ids, 1, 2, window=10)
        for start in (0, 8, 16):
            piece = torch.cat([torch.tensor([1]), ids[start:start + 8], torch.tensor([2])])[None]
            assert torch.equal(windows[start:start + 8], tiny_bert(piece).last_hidden_state[0, 1:-1])
    assert windows.shape == (17, 16)


@pytest.mark.parametrize(("length", "low", "high", "window"), [(23, 0, 3, 10), (23, 5, 11, 10), (23, 8, 16, 10),
                                                                (23, 16, 23, 10), (23, 3, 23, 10), (8, 2, 5, None),
                                                                (8, 0, 3, None), (8, 5, 8, None)])
def test_encode_masked_hides_the_band_and_keeps_the_rest(tiny_bert, length, low, high, window):
    ids = torch.randint(3, 40, (length,), generator=torch.Generator().manual_seed(4))
    states = encode_in_windows(tiny_bert, ids, 1, 2, window=window)
    got = encode_masked(tiny_bert, ids, states, low, high, 1, 2, window=window)
    assert got.shape == (length - (high - low), 16)
    other = ids.clone()
    other[low:high] = torch.randint(3, 40, (high - low,), generator=torch.Generator().manual_seed(6))
    again = encode_masked(tiny_bert, other, encode_in_windows(tiny_bert, other, 1, 2, window=window), low, high,
                          1, 2, window=window)
    torch.testing.assert_close(again, got, rtol=0, atol=1e-6)  # nothing reads the band's ids
    step = length if window is None else 8
    outside = torch.cat([torch.arange(length)[:low], torch.arange(length)[high:]])  # positions of got's rows
    for row, j in enumerate(outside.tolist()):
        start = j // step * step
        if start + step <= low or start >= high:  # a window the band does not touch: the unmasked states
            assert torch.equal(got[row], states[j])
    if window is None:  # one pass: transformers' own masked forward, from scratch
        mask = torch.ones(length + 2, dtype=torch.long)
        mask[1 + low:1 + high] = 0
        with torch.no_grad():
            full = tiny_bert(torch.cat([torch.tensor([1]), ids, torch.tensor([2])])[None],
                             attention_mask=mask[None]).last_hidden_state[0, 1:-1]
        assert torch.equal(got, full[outside])


def test_encode_masked_refuses_a_band_outside_the_ids_and_foreign_states(tiny_bert):
    ids = torch.randint(3, 40, (12,), generator=torch.Generator().manual_seed(5))
    states = encode_in_windows(tiny_bert, ids, 1, 2, window=10)
    with pytest.raises(ValueError, match="low < high"):
        encode_masked(tiny_bert, ids, states, 5, 5, 1, 2, window=10)
    with pytest.raises(ValueError, match="low < high"):
        encode_masked(tiny_bert, ids, states, 5, 13, 1, 2, window=10)
    with pytest.raises(ValueError, match="states must be"):
        encode_masked(tiny_bert, ids, states[:4], 5, 8, 1, 2, window=10)


def test_token_distance_against_sklearn():
    from sklearn.metrics.pairwise import cosine_similarity

    a, b = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    expected = 1 - np.diag(cosine_similarity(a.numpy(), b.numpy()))
    np.testing.assert_allclose(token_distance(a, b).numpy(), expected, rtol=0, atol=1e-12)  # float64, 8 terms


@pytest.mark.parametrize("call, error, words", [
    (lambda m: copied_rows([[1.0]], 3), TypeError, "table must be"),
    (lambda m: copied_rows(torch.ones(3, 2, dtype=torch.long), 3), ValueError, "floating-point"),
    (lambda m: copied_rows(torch.ones(3, 2), 2.5), TypeError, "length"),
    (lambda m: copied_rows(torch.ones(3, 2), 10**12), ValueError, "memory"),
    (lambda m: interpolated_rows(torch.ones(1, 2), 5), ValueError, "at least 2"),
    (lambda m: with_position_table(torch.nn.Linear(2, 2), torch.ones(3, 2)), TypeError, "BERT model"),
    (lambda m: with_position_table(m, torch.ones(30, 8)), ValueError, "hidden size"),
    (lambda m: encode_in_windows(m, torch.ones(2, 5, dtype=torch.long), 1, 2), ValueError, "one text"),
    (lambda m: encode_in_windows(m, "some text", 1, 2), TypeError, "not text"),
    (lambda m: encode_in_windows(m, torch.ones(5, dtype=torch.long), 1, 2, window=2), ValueError, "window"),
    (lambda m: token_distance(torch.ones(3, 2), torch.ones(4, 2)), ValueError, "one shape"),
    (lambda m: copied_rows(torch.ones(3, 2), 5, first=-1), ValueError, "first"),
])
def test_bad_input_is_refused_clearly(tiny_bert, call, error, words):
    with pytest.raises(error, match=words):
        call(tiny_bert)
