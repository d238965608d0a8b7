"""The book's math: MathML Core written at build time (tools/book/sphinx_mathml.py), drawn by the browser itself.

The styled letters are checked against the code points of Unicode's Mathematical Alphanumeric Symbols and
Letterlike Symbols charts, the spaces against MathML 3's named lengths (thinmathspace = 3/18 em)."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from tests.book.test_pdf import numbered_titles, outline_entries, plain
from tests.book.test_pdf import pdf as book_pdf  # noqa: F401  (the fixture: the PDF, read with pypdf)
from tools.book.sphinx_mathml import MATHML, mathml
from tools.book.toc import toc_pages

FORMULA_PAGE = "book/sum_and_layernorm"  # the LayerNorm formula the PDF must print as math


@pytest.mark.parametrize(("tex", "letter"), [
    (r"\mathcal N", "\U0001d4a9"),  # MATHEMATICAL SCRIPT CAPITAL N
    (r"\mathcal{B}", "\u212c"),  # SCRIPT CAPITAL B lives in Letterlike Symbols
    (r"\mathbb{R}", "\u211d"),
    (r"\mathbf{x}", "\U0001d431"),
    (r"\boldsymbol{x}", "\U0001d499"),  # MATHEMATICAL BOLD ITALIC SMALL X
])
def test_a_styled_letter_becomes_its_unicode_letter_without_mathvariant(tex, letter):
    markup = mathml(tex, "inline")
    assert letter in markup and "mathvariant" not in markup, markup


def test_upright_letters_keep_mathvariant_normal_which_mathml_core_draws():
    assert mathml(r"\mathrm{LN}", "inline").count('mathvariant="normal"') == 2


def test_named_spaces_become_lengths():
    assert 'width="0.167em"' in mathml(r"a\,b", "inline")
    assert 'width="-0.167em"' in mathml(r"\sin\!x", "inline")


def test_display_is_written_on_the_math_element_in_mathmls_namespace():
    root = ElementTree.fromstring(mathml(r"\frac{a}{b}", "block"))
    assert root.tag == f"{{{MATHML}}}math" and root.get("display") == "block"
    assert [child.tag.split("}")[1] for child in root.iter() if child.tag.endswith("frac")] == ["mfrac"]


def test_a_style_mathml_core_cannot_draw_is_a_clear_error():
    with pytest.raises(ValueError, match=r"\\mathcal\{\\sigma\}.*as script"):
        mathml(r"\mathcal{\sigma}", "inline")


def test_every_formula_is_drawn_natively_as_mathml(visited):
    formulas = {stem: visited[stem].drawn for stem in toc_pages()}  # DRAWN at 1280 px (tests/book/conftest.py)
    assert sum(map(len, formulas.values())) >= 100  # the check sees the book's formulas
    bad = {stem: [f["tex"] for f in found if not (f["native"] and f["drawn"]) or f["raw"]]
           for stem, found in formulas.items()}
    assert {stem: texts for stem, texts in bad.items() if texts} == {}


def test_the_pdf_prints_the_math_as_math(book_pdf):  # noqa: F811  (pytest passes the fixture imported above)
    """Chromium prints MathML as text in math italic (U+1D400 on): the LayerNorm formula, and no TeX beside it."""
    chapter = plain(numbered_titles()[toc_pages()[1:].index(FORMULA_PAGE)])  # from its chapter's first page on
    start = min(book_pdf.get_destination_page_number(entry) for entry in outline_entries(book_pdf)
                if plain(entry.title) == chapter)
    pages = (page.extract_text() for page in book_pdf.pages[start:])
    text = next((text for text in pages if "LayerNorm by hand" in text and "works on each token" in text), "")
    assert "\U0001d707 = 1 \U0001d43b \u2211" in text  # mu = 1/H sum, from sum_and_layernorm's display math
    assert "\u221a\U0001d70e2 + \U0001d700" in text  # sqrt(sigma^2 + epsilon)
    assert not any(tex in text for tex in (r"\frac", r"\sqrt", r"\(", r"\["))
