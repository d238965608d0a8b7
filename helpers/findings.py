"""Findings: claims about trained weights, stated for the checkpoint that ran (every chapter; "What holds").

An architectural fact (a shape, a bit-exact sum, a buffer, a gradient) is asserted: it holds for every BERT. What
trained weights show (row 0 has the largest norm, `bad` is near `good`) holds for the checkpoint that was measured
and may not for another. `finding(...)` states such a claim: it picks the sentence for "holds" or "does not hold",
glues the sentence, the verdict and the measured value for the prose (the glued outputs are the record the page
"What holds for this checkpoint" is built from), and never stops the book.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["finding"]

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
VERDICTS = {True: "holds", False: "does not hold"}


@dataclass(frozen=True)
class Finding:
    """One claim about trained weights as measured on the checkpoint that ran."""

    name: str
    holds: bool
    value: str
    sentence: str

    @property
    def verdict(self) -> str:
        """'holds' or 'does not hold'."""
        return VERDICTS[self.holds]

    def __repr__(self) -> str:
        return f"Finding {self.name!r} {self.verdict} for this checkpoint ({self.value}): {self.sentence}"


def format_value(value, digits: int = 2) -> str:
    """A measured value as the prose shows it: numbers to `digits` significant digits, anything else as str."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # a 0-d tensor or numpy scalar
        value = value.item()
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.{digits}g}"
    return str(value)  # ints, words, True/False, nan and inf as they are


def _check(name, claim, contrary, digits) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"a finding's name is a lower-case identifier such as 'pad_row_nonzero', got {name!r}")
    for label, text in (("claim", claim), ("contrary", contrary)):
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"{label} must be the sentence the prose shows, got {text!r}")
    if not isinstance(digits, int) or not 1 <= digits <= 6:
        raise ValueError(f"digits must be an int from 1 to 6 (significant digits), got {digits!r}")


def finding(name: str, holds, value, claim: str, contrary: str, digits: int = 2) -> Finding:
    """State a finding: glue `name` (the sentence), `name_verdict` and `name_value`; return it.

    `claim` is the sentence when the measurement supports it, `contrary` when it does not; either may use
    `{value}`. A measurement that cannot be judged (`holds` is not a plain truth value) counts as not holding.
    """
    _check(name, claim, contrary, digits)
    try:
        holds = bool(holds)
    except (TypeError, ValueError, RuntimeError):  # e.g. a tensor of several values: not a verdict
        holds = False
    text = format_value(value, digits)
    result = Finding(name, holds, text, (claim if holds else contrary).format(value=text))
    _glue(result)
    return result


def _glue(result: Finding) -> None:
    """Glue the sentence, verdict and value for `{glue:text}` roles (silently outside a notebook build)."""
    try:
        from myst_nb import glue
    except ImportError:  # a reader's Python without myst-nb: nothing to glue into
        return
    glue(result.name, result.sentence, display=False)
    glue(f"{result.name}_verdict", result.verdict, display=False)
    glue(f"{result.name}_value", result.value, display=False)

