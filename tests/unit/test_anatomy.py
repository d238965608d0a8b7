"""helpers.anatomy against transformers' BertEmbeddings and torch's Dropout."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import check_embedding_inputs, embedding_parameter_table, embedding_parts
from tests.unit.conftest import rounding_tolerance


def random_inputs(model, batch=2, seq=9, seed=0):
    """Random token ids and token types within the model's tables, (batch, seq) each."""
    generator = torch.Generator().manual_seed(seed)
    config = model.config
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=generator)
    types = torch.randint(0, config.type_vocab_size, (batch, seq), generator=generator)
    return ids, types


def layer_norm_input(embeddings, ids, types):
    """What transformers' own forward feeds into LayerNorm, captured with a forward hook."""
    captured = {}
    handle = embeddings.LayerNorm.register_forward_hook(lambda module, args, out: captured.update(x=args[0]))
    try:
        output = embeddings(ids, types)
    finally:
        handle.remove()
    return captured["x"], output


# ------------------------------------------------------------------ embedding_parts


@torch.no_grad()
def test_embedding_parts_equal_transformers(any_bert):
    embeddings = any_bert.embeddings
    ids, types = random_inputs(any_bert)
    parts = embedding_parts(embeddings, ids, types)
    summed, output = layer_norm_input(embeddings, ids, types)
    assert torch.equal(parts.summed, summed)  # the same sum, bit for bit: same order
    assert torch.equal(parts.normalized, output)  # eval mode: dropout is the identity
    assert torch.equal(parts.output, output)
    assert torch.equal(parts.token, embeddings.word_embeddings.weight[ids])  # exact: row lookups, no arithmetic
    assert torch.equal(parts.segment, embeddings.token_type_embeddings.weight[types])
    positions = embeddings.position_embeddings.weight[: ids.shape[1]]  # (seq, hidden)
    assert torch.equal(parts.position, positions.expand_as(parts.token))
    for field in ("token", "segment", "position", "summed", "normalized", "output"):
        assert getattr(parts, field).shape == (*ids.shape, any_bert.config.hidden_size)


@torch.no_grad()
def test_embedding_parts_defaults_and_one_dimensional_ids(any_bert):
    embeddings = any_bert.embeddings
    ids, _ = random_inputs(any_bert, batch=1, seq=7, seed=1)
    assert torch.equal(embedding_parts(embeddings, ids).output, embeddings(ids))  # zeros token types, 0..seq-1
    assert torch.equal(embedding_parts(embeddings, ids[0]).output, embeddings(ids))  # (seq,) becomes (1, seq)
    positions = torch.tensor([[3, 1, 4, 1, 5, 9, 2]])
    assert torch.equal(embedding_parts(embeddings, ids, position_ids=positions).output,
                       embeddings(ids, position_ids=positions))


@torch.no_grad()
def test_embedding_parts_another_order_is_only_close(packaged):
    model, tokenizer = packaged
    encoded = tokenizer("I am Sinan", "We lived above the clouds", return_tensors="pt")
    parts = embedding_parts(model.embeddings, encoded["input_ids"], encoded["token_type_ids"])
    other = model.embeddings.LayerNorm(parts.token + parts.position + parts.segment)
    assert not torch.equal(other, parts.output)
    # float32: another order of 3 terms moves each sum by ~eps32 x |x|; LayerNorm divides by the std and multiplies
    # by gamma -> rounding_tolerance(float32, 3, max |x| / min std x max |gamma|)
    summed = parts.summed
    gain = float((summed.abs().amax(-1) / summed.std(-1)).max() * model.embeddings.LayerNorm.weight.abs().max())
    torch.testing.assert_close(other, parts.output, rtol=0, atol=rounding_tolerance(torch.float32, terms=3, scale=gain))


@torch.no_grad()
def test_hidden_states_zero_is_the_embedding_output(packaged):
    model, tokenizer = packaged
    encoded = tokenizer("this is a test sentence", return_tensors="pt")
    parts = embedding_parts(model.embeddings, encoded["input_ids"], encoded["token_type_ids"])
    hidden = model(**encoded, output_hidden_states=True).hidden_states[0]
    assert torch.equal(hidden, parts.output)  # exact: the same layer on the same ids, the same order


def test_packaged_ids_match_the_source_notebooks(packaged):
    _, tokenizer = packaged
    assert tokenizer("I am Sinan")["input_ids"] == [101, 1045, 2572, 8254, 2319, 102]  # FACTS.md table


@torch.no_grad()
def test_dropout_in_train_mode_matches_torch_dropout(tiny_bert):
    layer = copy.deepcopy(tiny_bert.embeddings).train()
    ids, types = random_inputs(tiny_bert, batch=4, seq=16)
    torch.manual_seed(5)
    parts = embedding_parts(layer, ids, types)
    torch.manual_seed(5)
    expected = F.dropout(parts.normalized, p=tiny_bert.config.hidden_dropout_prob, training=True)
    assert torch.equal(parts.output, expected)  # exact: the same seed, the same dropout kernel on the same values
    assert not torch.equal(parts.output, parts.normalized)
    assert not tiny_bert.training  # the fixture's model is untouched


# ------------------------------------------------------------------ embedding_parameter_table


def test_embedding_parameter_table(any_bert):
    rows = embedding_parameter_table(any_bert)
    named = dict(any_bert.embeddings.named_parameters())
    assert [row["part"] for row in rows] == list(named)
    total = sum(p.numel() for p in any_bert.parameters())
    for row in rows:
        assert row["shape"] == tuple(named[row["part"]].shape)
        assert row["parameters"] == named[row["part"]].numel()
        assert row["share"] == pytest.approx(row["parameters"] / total, rel=1e-12)  # the same float64 division
    config = any_bert.config
    by_part = {row["part"]: row["parameters"] for row in rows}
    hidden = config.hidden_size
    assert by_part == {  # closed form from the config (BertEmbeddings.__init__)
        "word_embeddings.weight": config.vocab_size * hidden,
        "position_embeddings.weight": config.max_position_embeddings * hidden,
        "token_type_embeddings.weight": config.type_vocab_size * hidden,
        "LayerNorm.weight": hidden,
        "LayerNorm.bias": hidden,
    }


# ------------------------------------------------------------------ check_embedding_inputs


def test_check_embedding_inputs_fills_defaults(tiny_bert):
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    input_ids, types, positions = check_embedding_inputs(tiny_bert.embeddings, ids)
    assert torch.equal(input_ids, ids)
    assert torch.equal(types, torch.zeros(2, 3, dtype=torch.long))
    assert torch.equal(positions, torch.tensor([[0, 1, 2], [0, 1, 2]]))
    assert positions.device == ids.device


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(input_ids="hello"), TypeError, "not text"),
        (dict(input_ids=torch.tensor([[1.0, 2.0]])), TypeError, "integer ids"),
        (dict(input_ids=torch.tensor([[True, False]])), TypeError, "integer ids"),
        (dict(input_ids=torch.ones(1, 2, 3, dtype=torch.long)), ValueError, r"shape \(batch, seq\)"),
        (dict(input_ids=torch.zeros(0, 5, dtype=torch.long)), ValueError, "nothing to embed"),
        (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), ValueError, "nothing to embed"),
        (dict(input_ids=torch.ones(1, 65, dtype=torch.long)), ValueError, "position table has 64 rows"),
        (dict(input_ids=torch.tensor([[1, 99]])), ValueError, "holds 99, outside the token table of 99 rows"),
        (dict(input_ids=torch.tensor([[1, -1]])), ValueError, "holds -1, outside the token table"),
        (dict(input_ids=torch.tensor([[1, 2, 3]]), token_type_ids=torch.tensor([[0, 0]])), ValueError,
         r"token_type_ids has shape \(1, 2\) but input_ids has \(1, 3\)"),
        (dict(input_ids=torch.tensor([[1, 2]]), token_type_ids=torch.tensor([[0, 3]])), ValueError,
         "outside the token-type"),
        (dict(input_ids=torch.tensor([[1, 2]]), position_ids=torch.tensor([[0, 1, 2]])), ValueError,
         "position_ids has 3 positions but the sequence has 2 tokens"),
        (dict(input_ids=torch.tensor([[1, 2]]), position_ids=torch.tensor([[0, 64]])), ValueError,
         "holds 64, outside the position table of 64 rows"),
    ],
)
def test_check_embedding_inputs_clear_errors(tiny_bert, kwargs, error, match):
    with pytest.raises(error, match=match):
        check_embedding_inputs(tiny_bert.embeddings, **kwargs)
    with pytest.raises(error, match=match):  # embedding_parts checks first
        embedding_parts(tiny_bert.embeddings, **kwargs)


def test_raw_layer_errors_that_the_chapter_shows(tiny_bert):
    """What transformers does without the helper: a size-mismatch RuntimeError, and empty output for empty input."""
    embeddings = tiny_bert.embeddings
    with pytest.raises(RuntimeError, match="must match the size"):
        embeddings(torch.tensor([[1, 2, 3]]), torch.tensor([[0, 0]]))
    with torch.no_grad():
        assert embeddings(torch.zeros(0, 5, dtype=torch.long)).shape == (0, 5, tiny_bert.config.hidden_size)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_embedding_parts_on_cuda_equal_transformers(tiny_bert):
    layer = copy.deepcopy(tiny_bert.embeddings).to("cuda")
    ids, types = (t.to("cuda") for t in random_inputs(tiny_bert))
    with torch.no_grad():
        assert torch.equal(embedding_parts(layer, ids, types).output, layer(ids, types))


# ------------------------------------------------------------------ second edition: orthogonality, shares, figure


def test_energy_share_against_a_numpy_projection(any_bert):
    import numpy as np

    from helpers import energy_share, top_directions

    tables = any_bert.embeddings
    rows = tables.word_embeddings.weight.detach()[:200].double().numpy()
    other = tables.position_embeddings.weight.detach().double().numpy()
    k = 4
    _, _, vt = np.linalg.svd(other, full_matrices=False)  # numpy's own SVD: the reference
    projector = vt[:k].T @ vt[:k]  # (hidden, hidden)
    expected = np.square(rows @ projector).sum() / np.square(rows).sum()
    got = energy_share(torch.from_numpy(rows), top_directions(torch.from_numpy(other), k))
    assert abs(got - expected) < 1e-10  # float64 on both sides, short reductions


def test_energy_share_limits_and_random_reference():
    from helpers import energy_share, top_directions

    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(50, 64, generator=generator, dtype=torch.float64)
    assert abs(energy_share(rows, top_directions(rows, 50)) - 1.0) < 1e-12  # its own full span holds it all
    random = torch.randn(8, 64, generator=generator, dtype=torch.float64)
    share = energy_share(rows, top_directions(random, 8))
    assert 0.02 < share < 0.3  # a random 8-dim span of 64 holds about 8/64 = 0.125
    with pytest.raises(ValueError):
        top_directions(rows, 0)


def test_parameter_share_table_counts_like_transformers(any_bert):
    from helpers import parameter_share_table

    table = parameter_share_table({"m": any_bert})
    counts = {row[0]: int(row[1].split()[0].replace(",", "")) for row in table.rows}
    embeddings = any_bert.embeddings
    assert counts["token table"] == embeddings.word_embeddings.weight.numel()
    assert counts["segment table"] == embeddings.token_type_embeddings.weight.numel()
    assert counts["embedding layer"] == sum(p.numel() for p in embeddings.parameters())
    assert counts["whole model"] == sum(p.numel() for p in any_bert.parameters())


def test_per_token_sum_figure_draws_four_rows_per_token(tiny_bert):
    import matplotlib.pyplot as plt

    from helpers.anatomy import _grid, per_token_sum_figure

    ids, _ = random_inputs(tiny_bert, batch=1, seq=5)
    types = torch.tensor([[0, 0, 1, 1, 1]])
    parts = embedding_parts(tiny_bert.embeddings, ids, types)
    fig = per_token_sum_figure([f"t{i}" for i in range(5)], parts, types)
    assert len(fig.axes) == 4 * 5
    assert fig.axes[5].get_xlabel().startswith("E_")  # the segment row's labels
    rows = tiny_bert.embeddings.token_type_embeddings.weight.detach()
    drawn = [ax.get_images()[0].get_array() for ax in fig.axes[15:]]
    assert all((d == 0).all() for d in drawn[:2])  # sentence A: no difference
    for d in drawn[2:]:  # sentence B: the table's row 1 minus row 0
        np.testing.assert_allclose(d, _grid(rows[1] - rows[0]), atol=1e-6)
    plt.close(fig)
