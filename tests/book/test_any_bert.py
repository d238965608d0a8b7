"""tools/book/any_bert.py: the two untrained checkpoints load as BERTs, and the findings page is read right."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, BertModel

from helpers.checkpoint import packaged_dir
from tools.book import any_bert


@pytest.mark.parametrize("kind, width, rows", [("width-96", 96, 512), ("width-96-table-128", 96, 128),
                                               ("fresh-packaged-shapes", 384, 512)])
def test_each_checkpoint_is_an_untrained_bert_with_the_packaged_tokenizer(tmp_path, kind, width, rows):
    directory = any_bert.make_checkpoint(kind, tmp_path)
    model = BertModel.from_pretrained(directory, local_files_only=True)
    trained = BertModel.from_pretrained(packaged_dir(), local_files_only=True)
    assert model.config.hidden_size == width
    assert model.config.vocab_size == trained.config.vocab_size
    assert model.config.max_position_embeddings == rows  # 128: a table that is not the packaged 512 rows
    assert model.embeddings.position_embeddings.num_embeddings == rows
    assert trained.config.max_position_embeddings == 512
    gamma = model.embeddings.LayerNorm.weight
    assert torch.equal(gamma, torch.ones_like(gamma))  # as BertModel initialises it: nothing was trained
    std = model.embeddings.word_embeddings.weight.std().item()
    assert abs(std - model.config.initializer_range) < 0.001  # N(0, 0.02), BERT's initialiser
    ids = AutoTokenizer.from_pretrained(directory)("I am Sinan")["input_ids"]
    assert ids == [101, 1045, 2572, 8254, 2319, 102]  # FACTS.md: the bert-base-uncased WordPiece ids


def test_an_unknown_kind_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'width-96', 'width-96-table-128', 'fresh-packaged-shapes', got 'gpt2'"):
        any_bert.make_checkpoint("gpt2", tmp_path)


def test_the_verdict_column_is_counted_not_the_stored_one():
    rows = [("a", "s1", "holds", "holds (1)"), ("b", "s2", "does not hold", "holds (2)"),
            ("c", "s3", "does not hold", "does not hold (3)")]
    html = "<table>" + "".join("<tr>" + "".join(f"<td><p>{cell}</p></td>" for cell in row) + "</tr>"
                               for row in rows) + "</table>"
    assert any_bert.verdict_counts(html) == {"holds": 1, "does not hold": 2, "rows": 3}
