"""helpers.scratch: the hand-built layer is transformers' BertEmbeddings, bit for bit, forward and backward."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings

from helpers.scratch import POSITION_KINDS, ScratchEmbeddings

TINY = BertConfig(vocab_size=50, hidden_size=16, max_position_embeddings=12, type_vocab_size=2)


def pair(config=TINY):
    """A random transformers BertEmbeddings and a ScratchEmbeddings holding the same weights, both in eval mode."""
    torch.manual_seed(0)
    reference = BertEmbeddings(config).eval()
    mine = ScratchEmbeddings(config.vocab_size, config.hidden_size, config.max_position_embeddings,
                             config.type_vocab_size, eps=config.layer_norm_eps,
                             dropout=config.hidden_dropout_prob).eval()
    mine.load_state_dict(reference.state_dict())  # strict: the same names and shapes, nothing left over
    return reference, mine


def padded_batch(vocab_size=50, length=7):
    """(3, length) ids with trailing [PAD] (id 0) and segment B in the second half."""
    ids = torch.randint(1, vocab_size, (3, length), generator=torch.Generator().manual_seed(0))
    ids[1, -2:] = 0
    ids[2, -3:] = 0
    types = torch.zeros_like(ids)
    types[:, length // 2:] = 1
    return ids, types


def test_the_scratch_layer_is_bert_embeddings_with_the_same_weights():
    reference, mine = pair()
    ids, types = padded_batch()
    assert torch.equal(mine(ids, types), reference(input_ids=ids, token_type_ids=types))
    assert torch.equal(mine(ids), reference(input_ids=ids))  # default segment A


def test_bert_base_shapes_and_names():
    mine = ScratchEmbeddings(30522, 768)
    reference = BertEmbeddings(BertConfig())
    shapes = {name: tuple(p.shape) for name, p in reference.named_parameters()}
    assert {name: tuple(p.shape) for name, p in mine.named_parameters()} == shapes
    assert mine.word_embeddings.padding_idx == reference.word_embeddings.padding_idx == 0
    assert mine.LayerNorm.eps == reference.LayerNorm.eps and mine.dropout.p == reference.dropout.p


def test_train_mode_draws_the_same_dropout_masks_under_one_seed():
    reference, mine = pair()
    reference.train(), mine.train()
    ids, types = padded_batch()
    torch.manual_seed(1)
    expected = reference(input_ids=ids, token_type_ids=types)
    torch.manual_seed(1)
    got = mine(ids, types)
    assert torch.equal(got, expected)
    assert (got == 0).any()  # dropout did zero something: the masks were compared, not skipped


def test_gradients_of_every_table_match_transformers():
    reference, mine = pair()
    ids, types = padded_batch()
    weights = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(2))
    (reference(input_ids=ids, token_type_ids=types) * weights).sum().backward()
    (mine(ids, types) * weights).sum().backward()
    grads = dict(reference.named_parameters())
    for name, parameter in mine.named_parameters():
        assert torch.equal(parameter.grad, grads[name].grad), name
    assert not mine.word_embeddings.weight.grad[0].any()  # padding_idx blocks the [PAD] row's gradient


def test_the_packaged_checkpoint_loads_by_name(packaged):
    model, tokenizer = packaged
    config = model.config
    mine = ScratchEmbeddings(config.vocab_size, config.hidden_size, config.max_position_embeddings,
                             config.type_vocab_size, eps=config.layer_norm_eps).eval()
    mine.load_state_dict(model.embeddings.state_dict())
    encoded = tokenizer(["I am Sinan", "this is a test sentence"], ["We lived above the clouds", "She is Zoe"],
                        padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(mine(encoded["input_ids"], encoded["token_type_ids"]),
                           model.embeddings(input_ids=encoded["input_ids"], token_type_ids=encoded["token_type_ids"]))


def test_sinusoid_is_a_fixed_buffer_equal_to_distilberts_table():
    mine = ScratchEmbeddings(50, 16, max_positions=12, positions="sinusoid")
    expected = torch.empty(12, 16)
    create_sinusoidal_embeddings(12, 16, expected)  # transformers' own interleaved sin/cos table
    # float64 numpy formula rounded once to float32 on both sides: equal to float32 rounding of values <= 1
    torch.testing.assert_close(mine.position_table, expected, rtol=0, atol=4 * torch.finfo(torch.float32).eps)
    assert "position_table" not in mine.state_dict() and not hasattr(mine, "position_embeddings")
    assert sum(p.numel() for p in mine.parameters()) == 50 * 16 + 2 * 16 + 2 * 16


@pytest.mark.parametrize("kind", POSITION_KINDS)
def test_one_argument_changes_only_the_position_part(kind):
    torch.manual_seed(0)
    mine = ScratchEmbeddings(50, 16, max_positions=12, positions=kind).eval()
    ids = torch.randint(1, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    out = mine(ids)
    summed = mine.word_embeddings(ids) + mine.token_type_embeddings(torch.zeros_like(ids))
    position = {"learned": lambda: mine.position_embeddings.weight[:9], "sinusoid": lambda: mine.position_table[:9],
                "none": lambda: torch.zeros(9, 16)}[kind]()
    expected = torch.nn.functional.layer_norm(summed + position, (16,), mine.LayerNorm.weight, mine.LayerNorm.bias,
                                              mine.LayerNorm.eps)
    assert torch.equal(out, expected)


def test_without_positions_the_layer_cannot_see_order():
    mine = ScratchEmbeddings(50, 16, positions="none").eval()
    ids = torch.randint(1, 50, (1, 9), generator=torch.Generator().manual_seed(4))
    order = torch.randperm(9, generator=torch.Generator().manual_seed(5))
    assert torch.equal(mine(ids[:, order]), mine(ids)[:, order])
    learned = ScratchEmbeddings(50, 16).eval()
    assert not torch.equal(learned(ids[:, order]), learned(ids)[:, order])


@pytest.mark.parametrize("kwargs, error, words", [
    ({"positions": "rope"}, ValueError, "positions must be one of"),
    ({"positions": None}, TypeError, "positions must be one of"),
    ({"vocab_size": 10.0}, TypeError, "vocab_size"),
    ({"hidden_size": 0}, ValueError, "hidden_size"),
    ({"hidden_size": 5, "positions": "sinusoid"}, ValueError, "even"),
    ({"dropout": 1.0}, ValueError, "below 1"),
    ({"eps": 0}, ValueError, "eps"),
    ({"pad_id": 10}, ValueError, "pad_id"),
    ({"vocab_size": 10**9, "hidden_size": 10**3}, ValueError, "memory"),
])
def test_bad_constructor_arguments_are_refused_clearly(kwargs, error, words):
    arguments = {"vocab_size": 10, "hidden_size": 4, **kwargs}
    with pytest.raises(error, match=words):
        ScratchEmbeddings(**arguments)


@pytest.mark.parametrize("ids, types, error, words", [
    (torch.tensor([[1.0, 2.0]]), None, TypeError, "integer ids"),
    (torch.tensor([1, 2]), None, ValueError, r"\(batch, length\)"),
    (torch.tensor([[1, 10]]), None, ValueError, r"0\.\.9"),
    (torch.tensor([[1, 2]]), torch.tensor([[0, 2]]), ValueError, r"token_type_ids must lie in 0\.\.1"),
    (torch.tensor([[1, 2]]), torch.tensor([[0, 1, 1]]), ValueError, "shape of input_ids"),
    (torch.ones(1, 13, dtype=torch.long), None, ValueError, "longer than the 12 rows"),
])
def test_bad_inputs_are_refused_clearly(ids, types, error, words):
    mine = ScratchEmbeddings(10, 4, max_positions=12)
    with pytest.raises(error, match=words):
        mine(ids, types)


def test_no_positions_has_no_length_limit():
    mine = ScratchEmbeddings(10, 4, max_positions=12, positions="none")
    assert mine.max_positions is None and mine(torch.ones(1, 40, dtype=torch.long)).shape == (1, 40, 4)
