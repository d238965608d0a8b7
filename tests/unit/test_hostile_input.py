"""Careless and hostile input to the public helpers: a clear TypeError/ValueError, or the reference's own answer.

Two parts. BAD_INPUTS: explicit mistakes (each a parametrized case) that must raise TypeError or ValueError, never
another exception, and never allocate before refusing. The properties below them (hypothesis) draw random shapes,
dtypes, sizes, id ranges and wrong types: every call either agrees with the reference (transformers' own layer, or
the paper's formula in numpy) or raises TypeError/ValueError. The analysis helpers' mistakes, each pinned by its
exception type and message, are in test_hostile_analysis_input.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import (
    AlbertConfig,
    AlbertModel,
    BatchEncoding,
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    RobertaConfig,
    RobertaModel,
)
from transformers.models.t5.modeling_t5 import T5Attention

from helpers import (
    check_embedding_inputs,
    compare_on_device,
    embedding_parts,
    factorised_embedding_parameters,
    halves_permutation,
    padded_position_ids,
    part_norms,
    rotary_scores,
    rotation_matrix,
    segment_pattern,
    segment_swap_change,
    sinusoidal_table,
    t5_bucket_matrix,
    wavelengths,
)
from helpers.relative_positions import relative_offsets, t5_bucket_ranges

SMALL = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
             max_position_embeddings=24, type_vocab_size=2)
HUGE = 10**7  # 10**7 x 10**7 of anything is far above MEMORY_BOUND
PROPERTY = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _model(cls, config_cls, **extra):
    torch.manual_seed(0)
    return cls(config_cls(**{**SMALL, **extra})).eval()


BERT = _model(BertModel, BertConfig)
ROBERTA = _model(RobertaModel, RobertaConfig, pad_token_id=1, max_position_embeddings=26)
DISTILBERT = _model(DistilBertModel, DistilBertConfig, dim=16, n_heads=2, n_layers=1, hidden_dim=20)
ALBERT = _model(AlbertModel, AlbertConfig, embedding_size=8)
LAYER = BERT.embeddings
IDS = torch.tensor([[2, 7, 11, 3]])  # (1, 4)

# Mistakes with the ids argument, as a learner makes them.
BAD_IDS = {
    "BatchEncoding": BatchEncoding({"input_ids": [[2, 7, 3]], "token_type_ids": [[0, 0, 0]]}),
    "plain dict": {"input_ids": [[2, 7, 3]]},
    "text": "I am Sinan",
    "bytes": b"I am Sinan",
    "token strings": ["[CLS]", "i", "am", "[SEP]"],
    "batch of token strings": [["[CLS]", "i"], ["[CLS]", "am"]],
    "ragged list": [[2, 7, 3], [2, 3]],
    "empty list": [],
    "empty tensor": torch.zeros(0, dtype=torch.long),
    "empty batch": torch.zeros((0, 5), dtype=torch.long),
    "no tokens": torch.zeros((2, 0), dtype=torch.long),
    "float tensor": torch.tensor([[2.0, 7.0]]),
    "bool tensor": torch.tensor([[True, False]]),
    "float list": [2.5, 7.0],
    "bool list": [True, False],
    "numpy float array": np.array([[2.0, 7.0]]),
    "3-D tensor": torch.zeros((1, 2, 3), dtype=torch.long),
    "scalar tensor": torch.tensor(5),
    "None": None,
    "object": object(),
    "nested three deep": [[[2, 7]]],
    "negative id": torch.tensor([[2, -1, 3]]),
    "id past the vocabulary": torch.tensor([[2, SMALL["vocab_size"], 3]]),
}
WRONG_LAYERS = {
    "whole BertModel": BERT,
    "whole RobertaModel": ROBERTA,
    "DistilBERT embeddings": DISTILBERT.embeddings,
    "ALBERT embeddings": ALBERT.embeddings,
    "a Linear layer": torch.nn.Linear(4, 4),
    "the word table alone": LAYER.word_embeddings,
    "a tensor": LAYER.word_embeddings.weight,
    "a string": "model.embeddings",
}
ID_TAKERS = {
    "embedding_parts": lambda layer, ids: embedding_parts(layer, ids),
    "check_embedding_inputs": lambda layer, ids: check_embedding_inputs(layer, ids),
    "part_norms": lambda layer, ids: part_norms(layer, ids),
    "segment_swap_change": lambda layer, ids: segment_swap_change(layer, ids, None),
}
SECOND_ARGUMENTS = {
    "token types one short": dict(token_type_ids=torch.zeros((1, 3), dtype=torch.long)),
    "token types (1, 1)": dict(token_type_ids=torch.ones((1, 1), dtype=torch.long)),
    "token type past the table": dict(token_type_ids=torch.full((1, 4), 2)),
    "negative token type": dict(token_type_ids=torch.full((1, 4), -1)),
    "float token types": dict(token_type_ids=torch.zeros((1, 4))),
    "token types as BatchEncoding": dict(token_type_ids=BatchEncoding({"token_type_ids": [[0] * 4]})),
    "positions one short": dict(position_ids=torch.arange(3)[None]),
    "positions of batch 3": dict(position_ids=torch.arange(4).expand(3, 4)),
    "position past the table": dict(position_ids=torch.tensor([[0, 1, 2, SMALL["max_position_embeddings"]]])),
    "negative position": dict(position_ids=torch.tensor([[-1, 0, 1, 2]])),
    "positions as text": dict(position_ids="0 1 2 3"),
}
SIZE_CALLS = {
    "sinusoidal_table, 10**7 x 10**7": lambda: sinusoidal_table(HUGE, HUGE),
    "sinusoidal_table, 10**9 positions": lambda: sinusoidal_table(10**9, 512),
    "sinusoidal_table, d_model 10**12": lambda: sinusoidal_table(4, 10**12),
    "sinusoidal_table, odd width": lambda: sinusoidal_table(10, 385),
    "sinusoidal_table, 0 positions": lambda: sinusoidal_table(0, 8),
    "sinusoidal_table, negative positions": lambda: sinusoidal_table(-5, 8),
    "sinusoidal_table, 1.5 positions": lambda: sinusoidal_table(1.5, 8),
    "sinusoidal_table, positions as text": lambda: sinusoidal_table("512", 8),
    "sinusoidal_table, positions None": lambda: sinusoidal_table(None, 8),
    "sinusoidal_table, positions True": lambda: sinusoidal_table(True, 8),
    "sinusoidal_table, numpy float": lambda: sinusoidal_table(np.float64(4.0), 8),
    "sinusoidal_table, base 0": lambda: sinusoidal_table(4, 8, base=0),
    "sinusoidal_table, base 1": lambda: sinusoidal_table(4, 8, base=1),
    "sinusoidal_table, base nan": lambda: sinusoidal_table(4, 8, base=math.nan),
    "sinusoidal_table, base inf": lambda: sinusoidal_table(4, 8, base=math.inf),
    "sinusoidal_table, base text": lambda: sinusoidal_table(4, 8, base="10000"),
    "wavelengths, d_model 10**13": lambda: wavelengths(10**13),
    "wavelengths, negative base": lambda: wavelengths(8, base=-10000.0),
    "halves_permutation, d_model 10**13": lambda: halves_permutation(10**13),
    "rotation_matrix, d_model 10**6": lambda: rotation_matrix(1, 10**6),
    "rotation_matrix, offset 1.5": lambda: rotation_matrix(1.5, 8),
    "rotation_matrix, offset text": lambda: rotation_matrix("1", 8),
    "rotation_matrix, odd width": lambda: rotation_matrix(1, 7),
    "rotary_scores, 10**6 positions": lambda: rotary_scores(torch.ones(8), torch.ones(8), 10**6),
    "rotary_scores, 0 positions": lambda: rotary_scores(torch.ones(8), torch.ones(8), 0),
    "rotary_scores, 2.5 positions": lambda: rotary_scores(torch.ones(8), torch.ones(8), 2.5),
    "rotary_scores, odd head size": lambda: rotary_scores(torch.ones(7), torch.ones(7), 4),
    "rotary_scores, query and key differ": lambda: rotary_scores(torch.ones(8), torch.ones(6), 4),
    "rotary_scores, 2-D query": lambda: rotary_scores(torch.ones(2, 8), torch.ones(2, 8), 4),
    "rotary_scores, base 0.5": lambda: rotary_scores(torch.ones(8), torch.ones(8), 4, base=0.5),
    "t5_bucket_matrix, 10**7 x 10**7": lambda: t5_bucket_matrix(HUGE, HUGE),
    "t5_bucket_matrix, 10**5 x 10**5": lambda: t5_bucket_matrix(10**5, 10**5),
    "t5_bucket_matrix, no queries": lambda: t5_bucket_matrix(0, 5),
    "t5_bucket_matrix, negative keys": lambda: t5_bucket_matrix(5, -1),
    "t5_bucket_matrix, 2.5 queries": lambda: t5_bucket_matrix(2.5, 5),
    "t5_bucket_matrix, keys as text": lambda: t5_bucket_matrix(5, "5"),
    "t5_bucket_matrix, 31 buckets": lambda: t5_bucket_matrix(5, 5, num_buckets=31),
    "t5_bucket_matrix, 2 buckets": lambda: t5_bucket_matrix(5, 5, num_buckets=2),
    "t5_bucket_matrix, 32.0 buckets": lambda: t5_bucket_matrix(5, 5, num_buckets=32.0),
    "t5_bucket_matrix, max distance 4": lambda: t5_bucket_matrix(5, 5, max_distance=4),
    "t5_bucket_matrix, max distance 1.5": lambda: t5_bucket_matrix(5, 5, max_distance=1.5),
    "relative_offsets, 10**6 x 10**6": lambda: relative_offsets(10**6, 10**6),
    "t5_bucket_ranges, 10**12": lambda: t5_bucket_ranges(10**12),
    "t5_bucket_ranges, 0": lambda: t5_bucket_ranges(0),
    "segment_pattern, 10**12 pieces": lambda: segment_pattern(10**12),
    "segment_pattern, -1 pieces": lambda: segment_pattern(-1),
    "segment_pattern, 1.5 pieces": lambda: segment_pattern(1.5, 2),
    "segment_pattern, B as text": lambda: segment_pattern(3, "2"),
    "factorised parameters, 0 vocab": lambda: factorised_embedding_parameters(0, 768, 128),
    "factorised parameters, float width": lambda: factorised_embedding_parameters(30000, 768.0, 128),
    "padded_position_ids, padding_idx -1": lambda: padded_position_ids(IDS, -1),
    "padded_position_ids, padding_idx 1.5": lambda: padded_position_ids(IDS, 1.5),
    "padded_position_ids, ragged ids": lambda: padded_position_ids([[2, 7, 3], [2, 3]], 1),
    "padded_position_ids, BatchEncoding": lambda: padded_position_ids(BAD_IDS["BatchEncoding"], 1),
    "padded_position_ids, float ids": lambda: padded_position_ids(torch.ones(1, 3), 1),
    "compare_on_device, dtype as text": lambda: compare_on_device(LAYER, IDS, dtype="float16"),
    "compare_on_device, integer dtype": lambda: compare_on_device(LAYER, IDS, dtype=torch.int64),
    "compare_on_device, unknown device": lambda: compare_on_device(LAYER, IDS, device="gpu0"),
    "compare_on_device, whole model": lambda: compare_on_device(BERT, IDS),
}
CASES = {
    **{f"{helper}: ids {label}": (lambda f=f, v=value: f(LAYER, v))
       for helper, f in ID_TAKERS.items() for label, value in BAD_IDS.items()},
    **{f"{helper}: {label}": (lambda f=f, v=value: f(v, IDS))
       for helper, f in ID_TAKERS.items() for label, value in WRONG_LAYERS.items()},
    **{f"{helper}: {label}": (lambda f=f, kw=kwargs: f(LAYER, IDS, **kw))
       for helper, f in (("embedding_parts", embedding_parts), ("check_embedding_inputs", check_embedding_inputs))
       for label, kwargs in SECOND_ARGUMENTS.items()},
    "embedding_parts: sequence longer than the position table": lambda: embedding_parts(
        LAYER, torch.full((1, SMALL["max_position_embeddings"] + 1), 5)),
    **SIZE_CALLS,
}


def test_the_suite_tries_at_least_a_hundred_distinct_bad_inputs():
    assert len(CASES) >= 100, len(CASES)  # and test_hostile_analysis_input.py tries CHECKED beside them


@pytest.mark.parametrize("label", CASES)
def test_a_bad_input_gets_a_type_or_value_error(label, big_allocations):
    with pytest.raises((TypeError, ValueError)) as caught:
        CASES[label]()
    assert big_allocations == []  # refused before any big allocation
    message = str(caught.value)
    assert len(message) > 30 and "Traceback" not in message  # says what was passed and what to pass


@pytest.mark.parametrize("helper", ["embedding_parts", "check_embedding_inputs"])
def test_the_family_errors_name_the_fix(helper):
    call = ID_TAKERS[helper]
    with pytest.raises(TypeError, match="pass its embedding layer, model.embeddings"):
        call(BERT, IDS)
    with pytest.raises(TypeError, match=r"Embeddings \(the distilbert family; it has no token_type_embeddings\)"):
        call(DISTILBERT.embeddings, IDS)


def test_the_ids_errors_say_what_to_pass():
    for value, fix in ((BAD_IDS["BatchEncoding"], r"encoded\['input_ids'\]"),
                       (BAD_IDS["token strings"], "convert_tokens_to_ids"),
                       (BAD_IDS["ragged list"], "padding=True"), (BAD_IDS["empty list"], "at least one")):
        with pytest.raises((TypeError, ValueError), match=fix):
            embedding_parts(LAYER, value)
    with pytest.raises(ValueError, match="position_ids has batch size 3 but input_ids has 1"):
        embedding_parts(LAYER, IDS, position_ids=torch.arange(4).expand(3, 4))


def test_numpy_integers_are_accepted_wherever_ints_are():
    assert torch.equal(sinusoidal_table(np.int64(6), np.int32(8)), sinusoidal_table(6, 8))
    assert torch.equal(t5_bucket_matrix(np.int64(5), np.int16(7), num_buckets=np.int64(8), max_distance=np.int64(20)),
                       t5_bucket_matrix(5, 7, num_buckets=8, max_distance=20))
    assert torch.equal(rotation_matrix(np.int64(3), np.int64(8)), rotation_matrix(3, 8))
    query = torch.arange(8.0)
    assert torch.equal(rotary_scores(query, query, np.int64(5)), rotary_scores(query, query, 5))
    assert segment_pattern(np.int64(2), np.int64(1)) == segment_pattern(2, 1)
    assert factorised_embedding_parameters(np.int64(10), np.int64(8), np.int64(4)) == \
        factorised_embedding_parameters(10, 8, 4)
    parts = embedding_parts(LAYER, np.array([2, 7, 11, 3], dtype=np.int32))
    assert torch.equal(parts.output, LAYER(IDS))


def test_roberta_embeddings_are_rebuilt_exactly():
    ids = torch.tensor([[0, 5, 9, 2, 1, 1], [0, 7, 2, 1, 1, 1]])  # padding_idx 1 at the end
    parts = embedding_parts(ROBERTA.embeddings, ids)
    with torch.no_grad():
        reference = ROBERTA.embeddings(input_ids=ids)
    assert torch.equal(parts.output, reference)  # exact: same lookups, same order of additions
    table = ROBERTA.embeddings.position_embeddings.weight
    assert parts.position[0, 0].equal(table[2]) and parts.position[0, 1].equal(table[3])  # from padding_idx + 1
    assert parts.position[0, 4].equal(table[1])  # a pad gets padding_idx's row


# ---------------------------------------------------------------- properties (hypothesis)

IDS_LIKE = st.one_of(
    st.lists(st.integers(-3, 60), max_size=6),
    st.lists(st.lists(st.integers(-3, 60), max_size=5), max_size=3),
    st.lists(st.one_of(st.integers(0, 40), st.text(max_size=3), st.floats(), st.none()), max_size=4),
    st.text(max_size=5), st.none(), st.floats(), st.booleans(),
    st.dictionaries(st.sampled_from(["input_ids", "attention_mask"]), st.lists(st.integers(0, 40), max_size=3)),
)


@PROPERTY
@given(ids=IDS_LIKE, layer=st.sampled_from([BERT.embeddings, ROBERTA.embeddings]))
def test_any_ids_either_match_the_layer_or_get_a_clear_error(ids, layer):
    try:
        parts = embedding_parts(layer, ids)
    except (TypeError, ValueError):
        return
    with torch.no_grad():
        reference = layer(input_ids=torch.as_tensor(ids).reshape(parts.output.shape[:2]))
    assert torch.equal(parts.output, reference)  # exact: the model's own order of additions


@PROPERTY
@given(batch=st.integers(1, 3), seq=st.integers(1, 30), low=st.integers(-2, 0), high=st.integers(48, 52),
       types=st.integers(0, 3), positions=st.sampled_from([None, "default", "short", "batch"]),
       dtype=st.sampled_from([torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32]),
       seed=st.integers(0, 9))
def test_random_tensors_either_match_bert_or_get_a_clear_error(batch, seq, low, high, types, positions, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(low, high, (batch, seq), generator=generator).clamp(min=0 if dtype == torch.uint8 else low)
    ids = ids.to(dtype)
    token_types = torch.randint(0, types + 1, (batch, seq), generator=generator)
    position_ids = {None: None, "default": torch.arange(seq)[None], "short": torch.arange(max(seq - 1, 1))[None],
                    "batch": torch.arange(seq).expand(batch + 1, seq)}[positions]
    try:
        parts = embedding_parts(LAYER, ids, token_types, position_ids)
    except (TypeError, ValueError):
        return
    with torch.no_grad():
        reference = LAYER(input_ids=ids.long(), token_type_ids=token_types, position_ids=position_ids)
    assert torch.equal(parts.output, reference)


def numpy_table(positions: int, d_model: int, base: float) -> np.ndarray:
    """Vaswani et al. 2017, section 3.5, in float64 numpy: the independent reference."""
    pos = np.arange(positions)[:, None]
    angle = pos / base ** (np.arange(0, d_model, 2) / d_model)
    table = np.empty((positions, d_model))
    table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)
    return table


WRONG_NUMBERS = st.one_of(st.integers(-10, 0), st.floats(allow_nan=True), st.text(max_size=3), st.none(),
                          st.booleans(), st.integers(10**6, 10**15))
SOME_INT = st.one_of(st.integers(1, 40), st.integers(1, 40).map(np.int64), st.integers(1, 40).map(np.int32))


@PROPERTY
@given(positions=st.one_of(SOME_INT, WRONG_NUMBERS), d_model=st.one_of(SOME_INT, WRONG_NUMBERS),
       base=st.one_of(st.floats(-5, 1e5), st.just(10000.0), st.text(max_size=2)))
def test_sinusoidal_table_matches_the_formula_or_refuses(positions, d_model, base):
    try:
        table = sinusoidal_table(positions, d_model, base)
    except (TypeError, ValueError):
        return
    expected = numpy_table(int(positions), int(d_model), float(base))
    # float64 computation rounded once to float32: half a float32 ulp of |value| <= 1, so 1e-7 absolute
    np.testing.assert_allclose(table.numpy(), expected, rtol=0, atol=1.2e-7)


@PROPERTY
@given(query_len=st.one_of(SOME_INT, WRONG_NUMBERS), key_len=st.one_of(SOME_INT, WRONG_NUMBERS),
       num_buckets=st.one_of(st.integers(-2, 40), st.floats(0, 40), st.integers(4, 40).map(np.int64)),
       max_distance=st.one_of(st.integers(-2, 200), st.floats(0, 10)), bidirectional=st.booleans())
def test_t5_buckets_match_t5_or_refuse(query_len, key_len, num_buckets, max_distance, bidirectional):
    try:
        buckets = t5_bucket_matrix(query_len, key_len, bidirectional, num_buckets, max_distance)
    except (TypeError, ValueError):
        return
    context = torch.arange(int(query_len))[:, None]  # T5Attention.compute_bias builds offsets this way
    memory = torch.arange(int(key_len))[None, :]
    expected = T5Attention._relative_position_bucket(memory - context, bidirectional=bidirectional,
                                                     num_buckets=int(num_buckets), max_distance=int(max_distance))
    assert torch.equal(buckets, expected)
    assert int(buckets.max()) < int(num_buckets)


@PROPERTY
@given(head=st.one_of(st.integers(1, 6).map(lambda n: 2 * n), st.integers(0, 7)),
       positions=st.one_of(SOME_INT, WRONG_NUMBERS), seed=st.integers(0, 5))
def test_rotary_scores_depend_on_the_offset_or_refuse(head, positions, seed):
    generator = torch.Generator().manual_seed(seed)
    query, key = torch.randn(head, generator=generator), torch.randn(head, generator=generator)
    try:
        scores = rotary_scores(query, key, positions)
    except (TypeError, ValueError):
        return
    n = int(positions)
    assert scores.shape == (n, n)
    if n > 1:  # translation invariance: S[m, n] = S[m + 1, n + 1] (float32 rotations: 1e-5 of |q||k|)
        scale = float(query.norm() * key.norm())
        torch.testing.assert_close(scores[1:, 1:], scores[:-1, :-1], rtol=0, atol=1e-5 * scale + 1e-6)
