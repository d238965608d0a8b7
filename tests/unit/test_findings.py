"""helpers.findings: the sentence follows the measurement, the prose gets three glued keys, nothing ever raises."""

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
    here = findings.finding("pad_row_nonzero", pad_norm > 0.1, pad_norm, claim="The [PAD] row has norm {value}.",
                            contrary="Here the [PAD] row is zero ({value}).")
    assert (here.holds, here.verdict, here.value) == (True, "holds", "0.77")
    assert here.sentence == "The [PAD] row has norm 0.77."
    assert glued == {"pad_row_nonzero": ("The [PAD] row has norm 0.77.", False),
                     "pad_row_nonzero_verdict": ("holds", False), "pad_row_nonzero_value": ("0.77", False)}
    there = findings.finding("pad_row_nonzero", torch.tensor(0.0) > 0.1, 0.0, claim="{value}", contrary="zero: {value}")
    assert (there.holds, there.sentence, glued["pad_row_nonzero_verdict"][0]) == (False, "zero: 0", "does not hold")


@pytest.mark.parametrize("value, digits, shown", [
    (59.4321, 2, "59"), (59.4321, 3, "59.4"), (4.77e-07, 1, "5e-07"), (np.float32(0.25), 2, "0.25"),
    (torch.tensor(3), 2, "3"), (12345, 2, "12345"), ("bad, worse", 2, "bad, worse"), (True, 2, "True"),
    (math.nan, 2, "nan"), (math.inf, 2, "inf"),
])
def test_values_are_shown_to_the_claims_precision(value, digits, shown):
    assert findings.format_value(value, digits) == shown
    assert findings.format_value(value, digits) == (format(float(value), f".{digits}g")
                                                    if isinstance(value, float) and math.isfinite(value) else shown)


def test_a_measurement_that_cannot_be_judged_does_not_hold_and_does_not_raise(glued):
    several = torch.tensor([True, False])  # bool() of it raises in torch: a slip, not a verdict
    result = findings.finding("ambiguous", several, float("nan"), claim="yes", contrary="no ({value})")
    assert (result.holds, result.sentence) == (False, "no (nan)")


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(name="Row 0"), ValueError, "lower-case identifier"), (dict(name=3), ValueError, "got 3"),
    (dict(claim=""), TypeError, "claim must be the sentence"), (dict(contrary=None), TypeError, "got None"),
    (dict(digits=0), ValueError, "digits must be"),
])
def test_an_authors_slip_is_a_clear_error(kwargs, error, words):
    arguments = dict(name="ok", holds=True, value=1, claim="c", contrary="d", digits=2) | kwargs
    with pytest.raises(error, match=words):
        findings.finding(**arguments)


def test_the_repr_a_cell_shows_names_the_verdict(glued):
    shown = repr(findings.finding("row_zero_largest", False, 0.5, claim="yes", contrary="no"))
    assert shown == "Finding 'row_zero_largest' does not hold for this checkpoint (0.5): no"
    assert helpers.finding is findings.finding
