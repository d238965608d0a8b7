"""The book: the chapters' exercise cells and the teachers' table match exercises/, and syncing them is safe."""

from __future__ import annotations

import nbformat
import pytest

from tests.classroom.conftest import CHAPTERS, MAIN
from tools.book.toc import ROOT
from tools.exercises.book_sync import book_cells, check_book, sync_notebook, teachers_table
from tools.exercises.schema import ExerciseError


def notebook_with_try_it(extra_before: str = "") -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell(extra_before + "## Try it\n\n1. Something."),
    ])


def test_sync_replaces_the_try_it_section_and_is_idempotent():
    chapter = CHAPTERS[MAIN]
    notebook, action = sync_notebook(notebook_with_try_it(), chapter)
    assert "replaced the '## Try it' section" in action
    assert [c.source for c in notebook.cells[2:]] == [c.source for c in book_cells(chapter)]
    assert notebook.cells[0].source == "# Title" and notebook.cells[1].source == "x = 1"
    again, action = sync_notebook(nbformat.reads(nbformat.writes(notebook), as_version=4), chapter)
    assert "replaced the generated exercise cells" in action
    assert nbformat.writes(again) == nbformat.writes(notebook)


def test_sync_keeps_what_precedes_try_it_in_the_same_cell():
    notebook, _ = sync_notebook(notebook_with_try_it("```{note}\nKeep me.\n```\n\n"), CHAPTERS[MAIN])
    assert notebook.cells[2].source == "```{note}\nKeep me.\n```"
    assert notebook.cells[3].source.startswith("## Exercises")


def test_sync_refuses_a_notebook_with_both_try_it_and_exercises():
    notebook, _ = sync_notebook(notebook_with_try_it(), CHAPTERS[MAIN])
    notebook.cells.append(nbformat.v4.new_markdown_cell("## Try it\n\n1. New prompt."))
    with pytest.raises(ExerciseError, match="both generated exercise cells and a '## Try it' cell"):
        sync_notebook(notebook, CHAPTERS[MAIN])


def test_book_cells_use_sphinx_exercise_with_unique_labels_and_folded_solutions():
    labels = []
    for chapter in CHAPTERS.values():
        for exercise, cell in zip(chapter.exercises, book_cells(chapter)[1:], strict=False):
            label = chapter.label(exercise)
            labels.append(label)
            assert cell.source.startswith(f"````{{exercise}} {exercise.title}\n:label: {label}\n")
            assert f"````{{solution}} {label}\n:class: dropdown\n" in cell.source
            assert f"**Learning objective:** {exercise.objective}" in cell.source
            assert cell.metadata["tags"] == ["exercises"]
    assert len(labels) == len(set(labels))


def test_teachers_table_lists_every_chapter_with_time_points_and_hand_grading():
    table = teachers_table(list(CHAPTERS.values()))
    for chapter in CHAPTERS.values():
        assert f"| `{chapter.name}` |" in table and f"about {chapter.minutes} min | {chapter.points} |" in table
        for exercise in chapter.exercises:
            assert exercise.objective in table
            if exercise.manual:
                assert f"*Grading “{exercise.title}” by hand ({exercise.manual_points} points):*" in table


@pytest.mark.parametrize("name", list(CHAPTERS))
def test_chapter_exercise_cells_are_in_sync_with_exercises(name):
    """Fails until `python -m tools.classroom sync-book` has written the chapter's exercise cells."""
    problems = [p for p in check_book(teachers_page=None) if f"/{name}.ipynb" in p]
    assert not problems, "\n".join(problems)


def test_teachers_page_is_in_sync_with_exercises():
    problems = [p for p in check_book(teachers_page=ROOT / "book" / "teachers.md") if "teachers.md" in p]
    assert not problems, "\n".join(problems)
