"""tools/book/sphinx_line_breaks.py: inline code, math or a link and the punctuation after it end up in one span."""

from __future__ import annotations

from docutils import nodes
from docutils.utils import new_document

from tools.book.sphinx_line_breaks import glue_punctuation


def paragraph(*children) -> nodes.paragraph:
    document = new_document("test")
    para = nodes.paragraph("", "", *children)
    document += para
    glue_punctuation(None, document, "test")
    return para


def test_the_mark_after_code_joins_it_and_the_rest_stays():
    para = paragraph(nodes.Text("see "), nodes.literal("", "model.embeddings"), nodes.Text(": more"))
    assert [type(child) for child in para.children] == [nodes.Text, nodes.inline, nodes.Text]
    wrapper = para[1]
    assert wrapper["classes"] == ["no-break-before"] and wrapper.astext() == "model.embeddings:"
    assert isinstance(wrapper[0], nodes.literal) and para.astext() == "see model.embeddings: more"


def test_math_and_links_are_joined_and_nothing_else_moves():
    para = paragraph(nodes.math("", "x"), nodes.Text("."), nodes.Text(" "),
                     nodes.reference("", "paper", refuri="https://example.org"), nodes.Text(", and"),
                     nodes.literal("", "y"), nodes.Text(" no mark"), nodes.emphasis("", "z"), nodes.Text("."))
    assert [child.astext() for child in para.children] == ["x.", " ", "paper,", " and", "y", " no mark", "z", "."]
    assert [child["classes"] for child in para.children if isinstance(child, nodes.inline)] == [["no-break-before"]] * 2


def test_a_long_code_word_may_wrap_anywhere_and_a_short_one_not():
    path, name = nodes.literal("", "transformers/models/bert/modeling_bert.py"), nodes.literal("", "model.embeddings")
    paragraph(path, nodes.Text(" and "), name)
    assert path["classes"] == ["long-code"] and name["classes"] == []
