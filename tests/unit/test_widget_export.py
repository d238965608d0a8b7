"""The live widget's exported graph (make widget) run by Python's onnxruntime against transformers: model.embeddings'
three tables, their sum and LayerNorm, and the full BertModel, on the chapters' own sentences, in every position mode.
Bounds come from the weight format (tools/widget/tolerance.py); what was measured is printed beside them."""

from __future__ import annotations

import os

import numpy as np
import pytest

from helpers.checkpoint import load_bert
from tools.widget import compare
from tools.widget.export import FORMAT, onnx_path
from tools.widget.model import blinded
from tools.widget.tolerance import layernorm_bound, stored_row_bound, sum_bound

IN_CI = os.environ.get("CI", "").lower() == "true"
COSINE_SHOWN = 0.5e-3  # the widget shows the cosine to 3 decimals: the format must not move that digit by one


def _session(fmt: str):
    onnxruntime = pytest.importorskip("onnxruntime")
    path = onnx_path(fmt)
    if not path.exists():
        reason = f"{path.name} is not built: run `make widget` (make test does)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def checked():
    """(onnx, torch, text) for every chapter text and position mode, from the shipped format."""
    session = _session(FORMAT)
    bert, tokenizer = load_bert()
    blind = blinded(bert)
    runs = [(*compare.both(session, bert, blind, tokenizer, a, b, mode), f"{a!r}/{b!r}/{mode}")
            for a, b in compare.CHAPTER_TEXTS for mode in compare.MODES]
    return bert, runs


def _excess(found: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> float:
    """How far the worst element goes past its bound (<= 0: within), printed with the largest difference."""
    return float((np.abs(found - expected) - bound).max())


def test_tables_sum_and_layernorm_within_the_formats_rounding(checked):
    bert, runs = checked
    tables = bert.embeddings
    gamma = tables.LayerNorm.weight.detach().numpy()
    worst = {}
    for ours, theirs, text in runs:
        bounds = {name: stored_row_bound(FORMAT, theirs[name], theirs[name]) for name in ("word", "position")}
        bounds["segment"] = np.zeros_like(theirs["segment"])  # 2 rows: too small to convert, kept float32
        bounds["summed"] = sum_bound([theirs[n] for n in bounds], list(bounds.values()))
        bounds["normed"] = layernorm_bound(theirs["summed"], bounds["summed"], gamma, theirs["normed"])
        for name, bound in bounds.items():
            excess = _excess(ours[name], theirs[name], bound)
            assert excess <= 0, f"{text}: {name} is {excess:.2e} past the {FORMAT} bound"
            worst[name] = max(worst.get(name, 0.0), float(np.abs(ours[name] - theirs[name]).max()))
    print(f"{FORMAT} vs torch, largest |difference|:", {k: f"{v:.1e}" for k, v in worst.items()})
    assert worst["word"] > 0 or FORMAT == "fp32", "the rounded tables were compared with themselves"


def test_cosine_of_the_two_sentences_keeps_its_shown_digits(checked):
    _, runs = checked
    pairs = [(ours["cosine"], theirs["cosine"], text) for ours, theirs, text in runs if "cosine" in ours]
    assert len(pairs) == 3 * 5, "five chapter pairs, three position modes"
    worst = max(abs(a - b) for a, b, _ in pairs)
    print(f"{FORMAT}: largest cosine difference {worst:.1e} (shown to 3 decimals: at most {COSINE_SHOWN})")
    assert worst < COSINE_SHOWN


def test_fp32_graph_is_the_model():
    """The export itself, before any rounding: rows equal, the rest within float32's reductions (384 terms, 6
    layers of them for the last hidden state)."""
    session = _session("fp32")
    bert, tokenizer = load_bert()
    blind = blinded(bert)
    hidden = bert.config.hidden_size
    eps = 2.0**-24
    for a, b in compare.CHAPTER_TEXTS[7:9]:
        for mode in compare.MODES:
            ours, theirs = compare.both(session, bert, blind, tokenizer, a, b, mode)
            for name in ("word", "segment", "position", "summed"):
                np.testing.assert_array_equal(ours[name], theirs[name], err_msg=f"{a}/{mode}: {name}")
            for name, depth in (("normed", 1), ("hidden", bert.config.num_hidden_layers)):
                bound = depth * hidden * eps * np.abs(theirs[name]).max()
                assert np.abs(ours[name] - theirs[name]).max() <= bound, f"{a}/{mode}: {name}"


def test_shuffle_is_a_permutation_and_moves_tokens():
    for n in range(2, 40):
        order = compare.shuffled(n)
        assert sorted(order) == list(range(n))
    assert compare.shuffled(8) != list(range(8))
    with pytest.raises(ValueError, match="not one of"):
        compare.positions(5, "reversed")


def test_the_bounds_tell_the_formats_apart():
    """fp16's bound holds for fp16-rounded rows and fails for int8-rounded ones: it can fail, and it is not loose."""
    from tools.widget.formats import FORMATS

    rows = np.random.default_rng(0).normal(0, 0.05, size=(8, 384)).astype(np.float32)
    as_fp16 = rows.astype(np.float16).astype(np.float32)
    scale = np.abs(rows).max(axis=1, keepdims=True) / 127
    as_int8 = (np.rint(rows / scale) * scale).astype(np.float32)
    assert (np.abs(as_fp16 - rows) <= stored_row_bound("fp16", rows)).all()
    assert (np.abs(as_int8 - rows) > stored_row_bound("fp16", rows)).any()
    assert (np.abs(as_int8 - rows) <= stored_row_bound("int8", rows, rows) + 1e-9).all()
    assert (stored_row_bound("fp32", rows) == 0).all()
    for bad in ("bf16", "int4"):
        assert bad not in FORMATS
        with pytest.raises(ValueError, match="not one of"):
            stored_row_bound(bad, rows)
    with pytest.raises(ValueError, match="per-row scales"):
        stored_row_bound("int8", rows)


def test_convert_refuses_an_unknown_format():
    from onnx import helper

    from tools.widget.formats import convert

    empty = helper.make_model(helper.make_graph([], "empty", [], []))
    with pytest.raises(ValueError, match="weight format 'bf16' is not one of"):
        convert(empty, "bf16")
