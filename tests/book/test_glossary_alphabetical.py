"""book/glossary.md lists its entries in alphabetical order (case ignored), so a reader finds a term by its name."""

from __future__ import annotations

from itertools import pairwise

from tests.book.test_glossary_order import glossary_entries
from tools.environment import ROOT


def alphabetical(terms: list[str]) -> bool:
    """Whether the terms are in dictionary order, upper and lower case alike."""
    return all(a.casefold() <= b.casefold() for a, b in pairwise(terms))


def test_the_glossary_is_in_alphabetical_order():
    terms = list(glossary_entries((ROOT / "book" / "glossary.md").read_text()))
    assert len(terms) > 1
    misplaced = [f"{a!r} before {b!r}" for a, b in pairwise(terms) if a.casefold() > b.casefold()]
    assert not misplaced, f"glossary out of alphabetical order: {misplaced}"


def test_the_check_sees_case_blind_order():
    assert alphabetical(["ALiBi", "attention", "LayerNorm", "padding index", "WordPiece"])
    assert not alphabetical(["WordPiece", "token id"])  # the old, taught order failed here
    assert not alphabetical(["token id", "TF-IDF"])
