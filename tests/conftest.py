"""Shared fixtures: the packaged checkpoint and two random BERTs (bert-base embedding shapes, tiny).

torch and transformers load inside the fixtures: the xdist controller, which runs no test, never imports them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tools.environment import ONE_THREAD, offline_environment

# Tests never reach a model hub: fail fast instead of retrying a connection (before helpers loads transformers).
# One OpenMP thread per test worker, as `make unit` sets it, unless the caller chose otherwise (before torch loads).
os.environ.update(offline_environment())
for name, value in ONE_THREAD.items():
    os.environ.setdefault(name, value)

import helpers  # noqa: E402

if TYPE_CHECKING:
    from transformers import BertModel

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, type_vocab_size=3)


def random_bert(**config) -> BertModel:
    """A BertModel with random weights (seed 0) in eval mode."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(**config)).eval()


@pytest.fixture(scope="session")
def packaged():
    """(model, tokenizer) of the packaged checkpoint, loaded offline; never mutate the model."""
    return helpers.load_bert()


@pytest.fixture(scope="session")
def bert_base_random():
    """A random BertModel with bert-base-uncased's embedding layer and one encoder layer (not 12), in eval mode.

    The embedding tests never reach past the first layer; eleven more would cost each test worker 330 MB.
    """
    return random_bert(num_hidden_layers=1)


@pytest.fixture(scope="session")
def tiny_bert():
    """A tiny random BertModel (3 token types, 64 positions), in eval mode."""
    return random_bert(**TINY)


@pytest.fixture(params=["packaged", "bert_base_random", "tiny_bert"])
def any_bert(request):
    """Each of the three models in turn."""
    if request.param == "packaged":
        return request.getfixturevalue("packaged")[0]
    return request.getfixturevalue(request.param)
