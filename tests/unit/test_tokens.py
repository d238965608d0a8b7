"""Unit tests for helpers.tokens against transformers' tokenizer, the tokenizers library, torch and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from transformers import BertTokenizer

from helpers import (
    greedy_wordpiece,
    nearest_table,
    nearest_tokens,
    row_norms,
    single_token_id,
    token_matrix,
    token_table,
    word_group_pca,
)
from helpers.tokens import TokenTable
from tests.unit.conftest import rounding_tolerance

# The source notebooks' sentences and the bert-base-uncased ids they printed (FACTS.md).
SOURCE_IDS = {
    "I am Sinan": [101, 1045, 2572, 8254, 2319, 102],
    "We lived above the clouds": [101, 2057, 2973, 2682, 1996, 8044, 102],
    "this is a test sentence": [101, 2023, 2003, 1037, 3231, 6251, 102],
}
TEXTS = ["I am Sinan", "We lived above the clouds", "let's tokenize something?", "Paris is the [MASK] of ☃", ""]


@pytest.fixture(scope="module")
def tokenizer(packaged):
    return packaged[1]


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_bert):
    """A WordPiece tokenizer whose vocabulary fills exactly the tiny model's token table."""
    words = ["the", "bank", "river", "money", "red", "blue", "green", "one", "two", "three", "##ing"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + letters + ["##" + c for c in letters]
    size = tiny_bert.config.vocab_size
    vocab += [f"[unused{i}]" for i in range(size - len(vocab))]
    assert len(set(vocab)) == size
    return BertTokenizer(vocab={t: i for i, t in enumerate(vocab)},
                         model_max_length=tiny_bert.config.max_position_embeddings)


# ---- token_table ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", TEXTS)
def test_token_table_matches_the_tokenizer(tokenizer, text):
    encoding = tokenizer(text)
    table = token_table(tokenizer, text)
    assert table.ids == encoding["input_ids"]
    assert table.tokens == tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    assert [row.token_type for row in table] == encoding["token_type_ids"]
    assert [row.position for row in table] == list(range(len(encoding["input_ids"])))
    assert [row.special for row in table] == [i in tokenizer.all_special_ids for i in encoding["input_ids"]]


def test_token_table_source_ids(tokenizer):
    for text, ids in SOURCE_IDS.items():
        assert token_table(tokenizer, text).ids == ids


def test_token_table_pair_types(tokenizer):
    encoding = tokenizer("I am Sinan", "She is Zoe")
    table = token_table(tokenizer, "I am Sinan", "She is Zoe")
    types = [row.token_type for row in table]
    assert table.ids == encoding["input_ids"] and types == encoding["token_type_ids"]
    assert table.tokens.count(tokenizer.sep_token) == 2 and set(types) == {0, 1}


def test_token_table_tiny_tokenizer(tiny_tokenizer, tiny_bert):
    text = "the red banks"
    table = token_table(tiny_tokenizer, text)
    assert table.tokens == tiny_tokenizer.convert_ids_to_tokens(tiny_tokenizer(text)["input_ids"])
    assert table.tokens == ["[CLS]", "the", "red", "bank", "##s", "[SEP]"]
    assert max(table.ids) < tiny_bert.config.vocab_size


def test_token_table_displays(tokenizer):
    table = token_table(tokenizer, "I am Sinan")
    text, markdown = repr(table), table._repr_markdown_()
    for token in table.tokens:
        assert token in text and f"`{token}`" in markdown
    assert markdown.count("\n") == len(table) + 1  # header, rule, one line per token
    assert isinstance(table[1:3], TokenTable) and table[1:3].tokens == table.tokens[1:3]


def test_token_table_empty_string(tokenizer):
    table = token_table(tokenizer, "")
    assert table.tokens == [tokenizer.cls_token, tokenizer.sep_token]
    assert table.ids == [tokenizer.cls_token_id, tokenizer.sep_token_id]


def test_token_table_too_long_raises_or_truncates(tokenizer, packaged):
    limit = packaged[0].config.max_position_embeddings
    text = "word " * (limit + 10)
    with pytest.raises(ValueError, match=rf"tokenises to {limit + 12} tokens .* position table has {limit} rows"):
        token_table(tokenizer, text, max_positions=limit)
    with pytest.raises(ValueError, match="position table"):
        token_table(tokenizer, text)  # default limit: the tokenizer's model_max_length
    truncated = token_table(tokenizer, text, max_positions=limit, truncate=True)
    reference = tokenizer(text, truncation=True, max_length=limit)["input_ids"]
    assert truncated.ids == reference and len(truncated) == limit and truncated.truncated
    assert truncated.tokens[-1] == tokenizer.sep_token


def test_token_table_too_long_tiny(tiny_tokenizer, tiny_bert):
    limit = tiny_bert.config.max_position_embeddings
    with pytest.raises(ValueError, match=f"position table has {limit} rows"):
        token_table(tiny_tokenizer, "the " * limit)
    assert len(token_table(tiny_tokenizer, "the " * (limit - 2))) == limit


@pytest.mark.parametrize("bad", [42, None, b"bytes", ["I am Sinan", "She is Zoe"]])
def test_token_table_rejects_non_text(tokenizer, bad):
    with pytest.raises(TypeError, match="must be one string"):
        token_table(tokenizer, bad)
    with pytest.raises(TypeError, match="text_pair must be one string"):
        token_table(tokenizer, "fine", bad if bad is not None else 3.5)


@pytest.mark.parametrize(("limit", "error"), [(0, ValueError), (1, ValueError), ("512", TypeError), (2.5, TypeError)])
def test_token_table_rejects_bad_limit(tokenizer, limit, error):
    with pytest.raises(error, match=r"max_positions must be an integer >= 2, got .*\(room for \[CLS\] and \[SEP\]\)"):
        token_table(tokenizer, "hi", max_positions=limit)


# ---- greedy_wordpiece ------------------------------------------------------------------------------------------------

WORDS = ["sinan", "zoe", "tokenize", "unaffable", "embeddings", "clouds", "x☃y", "supercalifragilistic",
         "antidisestablishmentarianism", "bank", "##", "a" * 101]


@pytest.mark.parametrize("word", WORDS)
def test_greedy_wordpiece_matches_tokenizers_library(tokenizer, word):
    vocab = tokenizer.get_vocab()
    reference = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))  # no normaliser
    expected = [t.value for t in reference.model.tokenize(word)]
    assert greedy_wordpiece(word, vocab).pieces == expected


def test_greedy_wordpiece_trace(tokenizer):
    result = greedy_wordpiece("sinan", tokenizer.get_vocab())
    vocab = tokenizer.get_vocab()
    assert result.pieces == tokenizer.tokenize("Sinan")
    assert all(found == (candidate in vocab) for candidate, found in result.tried)
    assert [c for c, found in result.tried if found] == result.pieces  # each success is a piece, in order
    assert result.tried[0] == ("sinan", False)


def test_greedy_wordpiece_tiny(tiny_tokenizer):
    vocab = tiny_tokenizer.get_vocab()
    for word in ["banks", "rivering", "qz", "the"]:
        assert greedy_wordpiece(word, vocab).pieces == tiny_tokenizer.tokenize(word)


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), ("two words", ValueError)])
def test_greedy_wordpiece_bad_input(tokenizer, bad, error):
    with pytest.raises(error, match="word|one string"):
        greedy_wordpiece(bad, tokenizer.get_vocab())


# ---- nearest_tokens ------------------------------------------------------------------------------------------------

def brute_force(weight: torch.Tensor, query: int, k: int) -> tuple[list[int], torch.Tensor]:
    """Reference: cosine of every row with the query row in plain torch (float64), itself excluded."""
    w = weight.detach().double()  # (vocab, hidden)
    norms = w.norm(dim=1)  # (vocab,)
    cosine = (w @ w[query]) / (norms * norms[query]).clamp_min(1e-12)  # (vocab,); a zero row gets 0
    cosine[query] = -2.0
    values, indices = cosine.topk(k)
    return indices.tolist(), values


@pytest.mark.parametrize("word", ["bank", "monday", "red", "[SEP]", "##ing"])
def test_nearest_tokens_packaged_vs_brute_force(packaged, word):
    model, tokenizer = packaged
    near = nearest_tokens(model, tokenizer, word, k=8)
    ids, values = brute_force(model.embeddings.word_embeddings.weight, single_token_id(tokenizer, word), 8)
    assert [n.id for n in near] == ids
    # float32 cosines (<= 1) of `hidden` terms, by sklearn and by torch -> rounding_tolerance(float32, hidden)
    atol = rounding_tolerance(torch.float32, terms=model.config.hidden_size)
    np.testing.assert_allclose([n.cosine for n in near], values.numpy(), rtol=0, atol=atol)
    assert [n.token for n in near] == tokenizer.convert_ids_to_tokens(ids)


def test_nearest_tokens_bert_base_random(bert_base_random, tokenizer):
    near = nearest_tokens(bert_base_random, tokenizer, "bank", k=5)
    weight = bert_base_random.embeddings.word_embeddings.weight
    ids, values = brute_force(weight, tokenizer.convert_tokens_to_ids("bank"), 5)
    assert [n.id for n in near] == ids
    atol = rounding_tolerance(torch.float32, terms=bert_base_random.config.hidden_size)  # float32 cosines: as above
    np.testing.assert_allclose([n.cosine for n in near], values.numpy(), rtol=0, atol=atol)


def test_nearest_tokens_tiny(tiny_bert, tiny_tokenizer):
    k = len(tiny_tokenizer) - 1  # the full ranking, not only the top
    river = tiny_tokenizer.convert_tokens_to_ids("river")
    near = nearest_tokens(tiny_bert, tiny_tokenizer, "river", k=k)
    ids, values = brute_force(tiny_bert.embeddings.word_embeddings.weight, river, k)
    atol = rounding_tolerance(torch.float32, terms=tiny_bert.config.hidden_size)  # float32 cosines: as above
    np.testing.assert_allclose([n.cosine for n in near], values.numpy(), rtol=0, atol=atol)
    assert sorted(n.id for n in near) == sorted(ids) and river not in ids
    gaps = np.abs(np.diff(values.numpy())) > 1e-5  # rank order is only defined between values that differ
    clear = np.concatenate([[gaps[0]], gaps[:-1] & gaps[1:], [gaps[-1]]])
    assert clear.sum() > k // 2
    assert [n.id for n, c in zip(near, clear, strict=True) if c] == [i for i, c in zip(ids, clear, strict=True) if c]


def test_nearest_tokens_accepts_an_embedding(packaged):
    model, tokenizer = packaged
    a = nearest_tokens(model, tokenizer, "king", 5)
    b = nearest_tokens(model.embeddings.word_embeddings, tokenizer, "king", 5)
    assert a == b


def test_nearest_table(packaged):
    model, tokenizer = packaged
    table = nearest_table(model, tokenizer, ["bank", "king"], k=3)
    assert [row[0] for row in table.rows] == ["bank", "king"]
    first = nearest_tokens(model, tokenizer, "bank", 3)[0]
    assert table.rows[0][1] == f"{first.token} ({first.cosine:.2f})"


@pytest.mark.parametrize("word, match", [("Sinan", r"not one token: WordPiece splits it into \['sin', '##an'\]"),
                                         ("", "empty"), ("☃", "not in the vocabulary")])
def test_nearest_tokens_bad_words(packaged, word, match):
    model, tokenizer = packaged
    with pytest.raises(ValueError, match=match):
        nearest_tokens(model, tokenizer, word)


def test_nearest_tokens_bad_k_and_types(packaged):
    model, tokenizer = packaged
    for k in (0, -1, len(tokenizer)):
        with pytest.raises(ValueError, match="k must be between 1 and"):
            nearest_tokens(model, tokenizer, "bank", k)
    with pytest.raises(TypeError, match="k must be an integer, got float 2.0"):
        nearest_tokens(model, tokenizer, "bank", 2.0)
    with pytest.raises(TypeError, match="one string"):
        nearest_tokens(model, tokenizer, 42)
    with pytest.raises(TypeError, match=r"nearest_tokens expected a BERT model .* or an nn.Embedding, got str"):
        nearest_tokens("model", tokenizer, "bank")


def test_nearest_tokens_mismatched_tokenizer(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match="does not belong to this model"):
        nearest_tokens(tiny_bert, tokenizer, "bank")


# ---- token_matrix, row_norms, word_group_pca -------------------------------------------------------------------------

def test_token_matrix_and_row_norms(any_bert, tokenizer, tiny_tokenizer):
    tok = tiny_tokenizer if any_bert.config.vocab_size == len(tiny_tokenizer) else tokenizer
    weight = any_bert.embeddings.word_embeddings.weight
    rows = token_matrix(any_bert, tok, ["the", "bank"])
    assert torch.equal(rows, weight[tok.convert_tokens_to_ids(["the", "bank"])])
    norms = row_norms(any_bert)
    assert norms.shape == (any_bert.config.vocab_size,)
    # float32 norms of `hidden` squares, by two kernels -> rtol rounding_tolerance(float32, hidden)
    torch.testing.assert_close(norms, weight.detach().pow(2).sum(dim=1).sqrt(),
                               rtol=rounding_tolerance(torch.float32, terms=any_bert.config.hidden_size), atol=0)


def test_word_group_pca_vs_torch_svd(packaged):
    model, tokenizer = packaged
    groups = {"days": ["monday", "tuesday", "friday"], "colours": ["red", "blue", "green"], "numbers": ["one", "two"]}
    projection = word_group_pca(model, tokenizer, groups)
    x = token_matrix(model, tokenizer, projection.words).double()
    centred = x - x.mean(dim=0)
    u, s, vh = torch.linalg.svd(centred, full_matrices=False)
    reference = (centred @ vh[:2].T).numpy()  # (words, 2)
    signs = np.sign((projection.coords * reference).sum(axis=0))  # PCA components are defined up to sign
    # scikit-learn's PCA stays in float32, the reference is float64: the centring and SVD sum `hidden` terms of
    # size |x| <= max |coords| -> rounding_tolerance(float32, hidden, max |coords|), and a 3x margin for the SVD
    hidden = x.shape[1]
    np.testing.assert_allclose(projection.coords, reference * signs, rtol=0,
                               atol=3 * rounding_tolerance(torch.float32, terms=hidden,
                                                           scale=float(np.abs(reference).max())))
    # a float32 ratio in [0, 1] -> rounding_tolerance(float32, hidden)
    np.testing.assert_allclose(projection.explained_variance_ratio, (s[:2] ** 2 / (s**2).sum()).numpy(), rtol=0,
                               atol=rounding_tolerance(torch.float32, terms=hidden))
    assert projection.groups == ["days"] * 3 + ["colours"] * 3 + ["numbers"] * 2


def test_word_group_pca_bad_input(packaged):
    model, tokenizer = packaged
    with pytest.raises(ValueError, match="non-empty"):
        word_group_pca(model, tokenizer, {})
    with pytest.raises(ValueError, match="needs more than 2 words"):
        word_group_pca(model, tokenizer, {"a": ["red", "blue"]})
    with pytest.raises(ValueError, match="not one token"):
        word_group_pca(model, tokenizer, {"a": ["red", "blue", "sinan"]})


# ------------------------------------------------------------------ final_state: one change at a time


def test_final_state_equals_the_model_with_explicit_positions(packaged):
    from helpers import final_state

    model, tokenizer = packaged
    text = "we sat on the bank of the river"
    encoded = tokenizer(text, return_tensors="pt")
    where = encoded["input_ids"][0].tolist().index(tokenizer.convert_tokens_to_ids("bank"))
    with torch.no_grad():
        default = model(**encoded).last_hidden_state[0, where]
        shifted = model(**encoded, position_ids=torch.arange(3, 3 + encoded["input_ids"].shape[1])[None])
    assert torch.equal(final_state(model, tokenizer, text, "bank"), default)
    assert torch.equal(final_state(model, tokenizer, text, "bank", shift=3), shifted.last_hidden_state[0, where])
    assert not torch.equal(final_state(model, tokenizer, text, "bank", shift=3), default)


def test_final_state_keep_cls_moves_only_the_tokens_after_cls(packaged):
    from helpers.tokens import final_state

    model, tokenizer = packaged
    text = "we sat on the bank of the river"
    encoded = tokenizer(text, return_tensors="pt")
    seq = encoded["input_ids"].shape[1]
    positions = torch.tensor([[0] + list(range(3, seq + 2))])  # [CLS] at 0, the rest + 2
    with torch.no_grad():
        expected = model(**encoded, position_ids=positions).last_hidden_state[0, 5]
    assert torch.equal(final_state(model, tokenizer, text, "bank", shift=2, keep_cls=True), expected)
    with pytest.raises(TypeError, match="keep_cls"):
        final_state(model, tokenizer, text, "bank", shift=2, keep_cls=1)


def test_final_state_rejects_missing_words_and_bad_shifts(packaged):
    from helpers import final_state

    model, tokenizer = packaged
    with pytest.raises(ValueError, match="does not occur"):
        final_state(model, tokenizer, "we sat by the river", "bank")
    with pytest.raises(ValueError, match="shift"):
        final_state(model, tokenizer, "the bank", "bank", shift=model.config.max_position_embeddings)


def test_sense_and_shift_cosines_against_the_model_pair_by_pair(packaged):
    from helpers.tokens import sense_and_shift_cosines

    model, tokenizer = packaged
    river = ["we sat on the bank", "the boat hit the bank"]
    money = ["the bank raised rates", "my bank account"]

    def state(text, positions=None):
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded, position_ids=positions).last_hidden_state[0]
        return hidden[encoded["input_ids"][0].tolist().index(tokenizer.convert_tokens_to_ids("bank"))]

    def cos(u, v):
        return float(torch.nn.functional.cosine_similarity(u, v, dim=0))

    got = sense_and_shift_cosines(model, tokenizer, "bank", river, money, shift=2)
    expected_same = sorted([cos(state(river[0]), state(river[1])), cos(state(money[0]), state(money[1]))])
    np.testing.assert_allclose(sorted(got["same sense"].tolist()), expected_same, atol=1e-5)
    expected_other = [cos(state(r), state(m)) for r in river for m in money]
    np.testing.assert_allclose(got["other sense"].tolist(), expected_other, atol=1e-5)
    seq = tokenizer(river[0], return_tensors="pt")["input_ids"].shape[1]
    moved = torch.tensor([[0] + list(range(3, seq + 2))])  # [CLS] kept at 0
    np.testing.assert_allclose(float(got["moved"][0]), cos(state(river[0]), state(river[0], moved)), atol=1e-5)
    lengths = [tokenizer(t, return_tensors="pt")["input_ids"].shape[1] for t in river + money]
    assert len(got["baseline"]) == sum(n * (n - 1) // 2 for n in lengths)
    with pytest.raises(ValueError, match="two sentences"):
        sense_and_shift_cosines(model, tokenizer, "bank", river[:1], money)


def test_sense_hits_is_a_hand_leave_one_out_nearest_centroid_with_an_exact_permutation_p(packaged):
    from itertools import combinations

    from helpers.tokens import sense_hits

    model, tokenizer = packaged
    river = ["we sat on the bank", "the boat hit the bank", "fish swam by the bank"]
    money = ["the bank raised rates", "my bank account", "a loan from the bank"]
    bank = tokenizer.convert_tokens_to_ids("bank")

    def unit_state(text):
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0]
        h = hidden[encoded["input_ids"][0].tolist().index(bank)].numpy().astype(np.float64)
        return h / np.linalg.norm(h)

    states = np.stack([unit_state(t) for t in river + money])

    def hand_hits(labels):  # centroids without sentence i, the nearer one by Euclidean distance
        hits = 0
        for i in range(6):
            keep = np.arange(6) != i
            centroids = [states[keep & (labels == k)].mean(0) for k in (0, 1)]
            hits += int(np.argmin([np.linalg.norm(states[i] - c) for c in centroids]) == labels[i])
        return hits

    labels = np.array([0] * 3 + [1] * 3)
    expected = hand_hits(labels)
    every = [hand_hits(np.isin(np.arange(6), chosen).astype(int)) for chosen in combinations(range(6), 3)]
    exact_p = np.mean([h >= expected for h in every])  # all 20 ways to label three sentences as one sense
    # the same 200 shuffles scikit-learn draws (RandomState(seed).permutation of the labels, one per shuffle), each
    # scored by the hand read-out: p is their share at or above the real score, the real labels counted once
    draw = np.random.RandomState(0)
    at_least = sum(hand_hits(labels[draw.permutation(6)]) >= expected for _ in range(200))
    hits, n, p = sense_hits(model, tokenizer, "bank", river, money, shuffles=200, seed=0)
    assert (hits, n) == (expected, 6)
    assert p == pytest.approx((at_least + 1) / 201, abs=1e-12)  # every shuffle's score and the count, exactly
    assert p == pytest.approx(exact_p, abs=0.05)  # and the shuffles sample the 20 labellings evenly
    with pytest.raises(ValueError, match="two sentences"):
        sense_hits(model, tokenizer, "bank", river[:1], money)


def test_fresh_row_norms_match_a_bert_model_initialised_table():
    from transformers import BertConfig, BertModel

    from helpers.tokens import fresh_row_norms

    config = BertConfig(vocab_size=4000, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=8, initializer_range=0.02)
    torch.manual_seed(0)
    table = BertModel(config).embeddings.word_embeddings.weight.detach()[1:]  # row 0 is padding_idx's zeros
    made = torch.linalg.vector_norm(table, dim=1)
    drawn = fresh_row_norms(len(made), 64, 0.02)
    assert abs(float(drawn.mean() - made.mean())) < 3 * float(made.std()) / len(made) ** 0.5 + 1e-3
    assert abs(float(drawn.std() / made.std()) - 1) < 0.1
    assert torch.equal(drawn, fresh_row_norms(len(made), 64, 0.02))  # seeded
    with pytest.raises(ValueError, match="std"):
        fresh_row_norms(3, 4, 0.0)
