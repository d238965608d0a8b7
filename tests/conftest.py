"""Shared fixtures: the packaged checkpoint and two random BERTs (bert-base shapes, tiny)."""

from __future__ import annotations

import os

# Tests never reach a model hub: fail fast instead of retrying a connection.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import pytest
import torch
from transformers import BertConfig, BertModel

from helpers import load_bert
from tests.book_site import book_url  # noqa: F401  (a fixture: the built book served on localhost)

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, type_vocab_size=3)


@pytest.fixture(scope="session")
def packaged():
    """(model, tokenizer) of the packaged checkpoint, loaded offline; never mutate the model."""
    return load_bert()


@pytest.fixture(scope="session")
def bert_base_random():
    """A randomly initialised BertModel with bert-base-uncased's shapes, in eval mode."""
    torch.manual_seed(0)
    return BertModel(BertConfig()).eval()


@pytest.fixture(scope="session")
def tiny_bert():
    """A tiny random BertModel (3 token types, 64 positions), in eval mode."""
    torch.manual_seed(0)
    return BertModel(BertConfig(**TINY)).eval()


@pytest.fixture(params=["packaged", "bert_base_random", "tiny_bert"])
def any_bert(request):
    """Each of the three models in turn."""
    if request.param == "packaged":
        return request.getfixturevalue("packaged")[0]
    return request.getfixturevalue(request.param)
