"""The positive control for order use (helpers.pretraining_controls)."""

from __future__ import annotations

import itertools

import pytest
import torch

from helpers.checkpoint import load_bert
from helpers.pretraining import PretrainConfig, compact_tokenizer, pretrain, tiny_bert, windows
from helpers.pretraining_controls import aligned_stream, order_use_of, train_aligned

DOCS = ["The number of features seen during fit.", "Gaussian process regression (GPR) with a kernel.",
        "Linnerud: exercise and physiological variables, twenty middle-aged men."]
SMALL = PretrainConfig(hidden=16, heads=2, length=16, table_rows=32, batch_size=4, checkpoints=(0, 3),
                       held_out_masks=2)


@pytest.fixture(scope="module")
def small_corpus():
    compact, ids = compact_tokenizer(load_bert()[1], DOCS * 8)
    return compact, torch.tensor(list(itertools.chain.from_iterable(ids)))


def test_aligned_windows_hold_the_same_distinct_tokens_in_the_same_places():
    stream = aligned_stream(5, 40, SMALL, seed=1)
    width = SMALL.length - 2
    assert len(stream) == 5 * width
    rows = windows(stream, width * torch.arange(5), SMALL.length, cls_id=2, sep_id=3)
    assert (rows == rows[0]).all()  # position i holds one token in every window
    body = rows[0, 1:-1]
    assert len(set(body.tolist())) == width and 5 <= int(body.min()) and int(body.max()) < 40  # no special id
    assert not torch.equal(aligned_stream(1, 40, SMALL, seed=2), aligned_stream(1, 40, SMALL, seed=1))
    with pytest.raises(ValueError):
        aligned_stream(0, 40, SMALL)
    with pytest.raises(ValueError, match="vocab_size"):
        aligned_stream(1, 5 + width - 1, SMALL)  # too few ids for L - 2 distinct tokens


def test_order_use_of_is_the_sweeps_order_use(small_corpus):
    compact, stream = small_corpus
    held = stream[-8 * 14:]
    records = pretrain(stream[:-8 * 14], held, compact, SMALL, seed=4, stop=0)[1]  # the untrained model's record
    model = tiny_bert(len(compact), SMALL, seed=4)
    assert abs(order_use_of(model, held, compact, SMALL) - records[0]["order_use"]) < 1e-5
    rows = model.bert.embeddings.position_embeddings.weight
    with torch.no_grad():
        rows[1:SMALL.length - 1] = rows[1:SMALL.length - 1].mean(dim=0)
    assert abs(order_use_of(model, held, compact, SMALL)) < 1e-5  # no distinct rows, no order to read


def test_a_model_trained_where_only_position_predicts_reads_order(small_corpus):
    compact, _ = small_corpus
    config = PretrainConfig()
    held = aligned_stream(20, len(compact), config)
    untrained = order_use_of(tiny_bert(len(compact), config, seed=0), held, compact, config)
    reader = order_use_of(train_aligned(compact, config, steps=200), held, compact, config)
    # without order a masked token is one of the window's ~4.5 masked ids (about log 4.5 = 1.5 nats); with it, known
    assert abs(untrained) < 0.05 and reader > 0.5, (untrained, reader)
    with pytest.raises(ValueError):
        train_aligned(compact, config, steps=config.warmup)
