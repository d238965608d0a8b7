"""The precision appendix's helpers on a BERT whose position table is not 512 rows (384 here)."""

from __future__ import annotations

import copy

import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertEmbeddings

from helpers.layernorm import compare_on_device, precision_tolerance


def test_compare_on_device_runs_a_full_length_input_of_a_384_row_table():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=200, hidden_size=32, max_position_embeddings=384)
    layer = BertEmbeddings(config).eval()
    longest = config.max_position_embeddings  # what the appendix reads instead of 512
    ids = torch.randint(1, 200, (1, longest))
    types = torch.zeros_like(ids)
    assert compare_on_device(layer, ids, types, dtype=torch.float32) == 0.0
    with torch.no_grad():  # the reference: the same layer cast by hand
        reference = layer(ids, types)
        low = copy.deepcopy(layer).to(torch.bfloat16)(ids, types).float()
    difference = compare_on_device(layer, ids, types, dtype=torch.bfloat16)
    assert difference == float((low - reference).abs().max())
    scale = float(reference.abs().max())
    assert 0 < difference <= precision_tolerance(torch.bfloat16, scale, ulps=8)
