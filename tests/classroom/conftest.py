"""The classroom tests' shared ground: the chapters' exercises and one nbgrader course generated from them."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools.book.toc import ROOT
from tools.classroom.course import build_assignments
from tools.classroom.schema import load_chapters

CHAPTERS = {chapter.name: chapter for chapter in load_chapters(ROOT / "exercises")}
MAIN = "token_embeddings"  # the chapter on which every scenario runs


def released(course: Path, chapter: str) -> nbformat.NotebookNode:
    """The student version of a chapter's notebook, as `nbgrader generate_assignment` released it."""
    return nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)


@pytest.fixture(scope="session")
def course(tmp_path_factory) -> Path:
    """A course directory with every chapter's assignment generated; copy it before writing into it."""
    root = tmp_path_factory.mktemp("course")
    build_assignments(root, ROOT / "exercises")
    return root
