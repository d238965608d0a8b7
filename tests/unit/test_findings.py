"""helpers.findings: the sentence follows the measurement, the cell shows it, the prose gets three glued keys."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers
from helpers import findings


@pytest.fixture
def glued(monkeypatch):
    """What finding() glues: {key: (value, display)} through myst_nb.glue, captured."""
    import myst_nb

    calls = {}
    monkeypatch.setattr(myst_nb, "glue", lambda key, value, display=True: calls.update({key: (value, display)}))
    return calls


def test_the_sentence_and_verdict_follow_the_measurement(glued):
    pad_norm = torch.tensor(0.7712)
    here = findings.judge("pad_row_nonzero", pad_norm > 0.1, pad_norm, claim="The [PAD] row has norm {value}.",
                            contrary="Here the [PAD] row is zero ({value}).")
    assert (here.holds, here.verdict, here.value) == (True, "holds", "0.77")
    assert here.sentence == "The [PAD] row has norm 0.77."
    assert findings.finding("pad_row_nonzero", bool(pad_norm > 0.1), pad_norm, claim="The [PAD] row has norm "
                            "{value}.", contrary="Here the [PAD] row is zero ({value}).") is None
    assert glued == {"pad_row_nonzero": ("The [PAD] row has norm 0.77.", False),
                     "pad_row_nonzero_verdict": ("holds", False), "pad_row_nonzero_value": ("0.77", False)}
    findings.finding("pad_row_nonzero", torch.tensor(0.0) > 0.1, 0.0, claim="{value}", contrary="zero: {value}")
    assert (glued["pad_row_nonzero"][0], glued["pad_row_nonzero_verdict"][0]) == ("zero: 0", "does not hold")


@pytest.mark.parametrize("value, digits, shown", [
    (59.4321, 2, "59"), (59.4321, 3, "59.4"), (4.77e-07, 1, "5e-07"), (np.float32(0.25), 2, "0.25"),
    (torch.tensor(3), 2, "3"), (12345, 2, "12345"), ("bad, worse", 2, "bad, worse"), (True, 2, "True"),
    (math.nan, 2, "nan"), (math.inf, 2, "inf"),
])
def test_values_are_shown_to_the_claims_precision(value, digits, shown):
    assert findings.format_value(value, digits) == shown
    assert findings.format_value(value, digits) == (format(float(value), f".{digits}g")
                                                    if isinstance(value, float) and math.isfinite(value) else shown)


@pytest.mark.parametrize("holds", [torch.tensor([True, False]), torch.tensor(0.7), 0.9, 1, "yes", None,
                                   np.array([True, True])])
def test_a_verdict_that_is_not_a_truth_value_is_a_type_error(holds, glued):
    with pytest.raises(TypeError, match="holds must be a verdict"):
        findings.finding("ambiguous", holds, float("nan"), claim="yes", contrary="no ({value})")
    assert glued == {}  # nothing glued for a slip


@pytest.mark.parametrize("holds, expected", [(True, True), (np.bool_(False), False), (np.float64(2) > 1, True),
                                             (torch.tensor(True), True), (torch.tensor([False]), False)])
def test_plain_truth_values_are_verdicts(holds, expected):
    assert findings.judge("ok", holds, 1, claim="c", contrary="d").holds is expected


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(name="Row 0"), ValueError, "lower-case identifier"), (dict(name=3), ValueError, "got 3"),
    (dict(claim=""), TypeError, "claim must be the sentence"), (dict(contrary=None), TypeError, "got None"),
    (dict(digits=0), ValueError, "digits must be"),
])
def test_an_authors_slip_is_a_clear_error(kwargs, error, words):
    arguments = dict(name="ok", holds=True, value=1, claim="c", contrary="d", digits=2) | kwargs
    with pytest.raises(error, match=words):
        findings.finding(**arguments)


def test_the_printed_line_holds_the_glued_sentence_verbatim(glued):
    long = "the median position row's norm is {value} times the token row's, " * 3
    result = findings.judge("row_zero_largest", False, 0.5, claim="yes", contrary=long)
    assert repr(result) == f"Finding row_zero_largest (does not hold): {long.format(value='0.5')}"
    assert helpers.finding is findings.finding


def test_the_finding_is_printed_as_the_cells_output(glued, capsys):
    findings.finding("pad_row_nonzero", True, 0.77, claim="norm {value}", contrary="zero")
    assert capsys.readouterr().out == "Finding pad_row_nonzero (holds): norm 0.77\n"
