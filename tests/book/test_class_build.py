"""make book-class: the book a class gets shows every exercise, no solution and no way to download one."""

from __future__ import annotations

import re

import pytest

from tests.book.conftest import require_built_book
from tools.book.class_build import CLASS_HTML, class_config
from tools.book.toc import ROOT, is_notebook, toc_pages

CHAPTERS = [page for page in toc_pages() if is_notebook(page) and (ROOT / "exercises" / f"{page[5:]}.yml").exists()]


def test_class_config_hides_solutions_and_sources_and_keeps_the_books_cache():
    config = class_config()
    assert config["sphinx"]["config"]["hide_solutions"] is True
    assert config["sphinx"]["config"]["html_copy_source"] is False
    assert config["html"]["use_download_button"] is False and config["launch_buttons"] == {}
    assert config["execute"]["cache"] == str(ROOT / "_build" / ".jupyter_cache")
    assert all(path.startswith("/") for path in config["sphinx"]["local_extensions"].values())


def _class_html():
    return require_built_book(CLASS_HTML, "book-class")


@pytest.mark.parametrize("page", CHAPTERS)
def test_class_pages_have_every_exercise_and_no_solution(page):
    book, class_book = require_built_book(), _class_html()
    full, handed_out = (folder.joinpath(f"{page}.html").read_text() for folder in (book, class_book))
    exercises = re.compile(r'<div class="exercise admonition" id="([^"]+)">')
    exercise_titles = exercises.findall(full)
    assert exercise_titles and exercises.findall(handed_out) == exercise_titles
    assert full.count('class="solution') >= len(exercise_titles)  # the reader's book has them: the check can fail
    assert 'class="solution' not in handed_out and "Solution to" not in handed_out
    assert not re.search(r'href="[^"]*\.ipynb"', handed_out), "a notebook download would hold the solutions"


def test_class_book_copies_no_page_sources():
    assert not (_class_html() / "_sources").exists()


def test_the_class_intro_offers_no_pdf_the_readers_does():
    """The whole-book PDF prints every solution unfolded: a class gets no link to it."""
    reader, handed_out = (folder.joinpath("book", "intro.html").read_text() for folder in (require_built_book(),
                                                                                            _class_html()))
    assert 'href="../bert-first-vectors.pdf"' in reader  # the check can fail
    assert "bert-first-vectors.pdf" not in handed_out
