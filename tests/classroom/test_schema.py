"""The exercise files: every chapter's exercises as the book wants them, and clear errors for a broken file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.classroom.conftest import CHAPTERS
from tools.book.toc import ROOT, toc_pages
from tools.exercises.schema import ExerciseError, load_chapter, load_chapters

TOPIC_CHAPTERS = ["embedding_layer_at_a_glance", "token_embeddings", "segment_embeddings", "learned_positions",
                  "sum_and_layernorm", "sinusoidal_encodings", "t5_relative_positions", "one_layer_many_families"]


def test_every_topic_chapter_has_three_or_four_exercises_of_rising_difficulty():
    assert set(TOPIC_CHAPTERS) <= set(CHAPTERS)
    assert all((ROOT / "book" / f"{name}.ipynb").exists() for name in CHAPTERS), "an exercise file without chapter"
    for chapter in CHAPTERS.values():
        assert 3 <= len(chapter.exercises) <= 4, chapter.name
        kinds = [exercise.kind for exercise in chapter.exercises]
        assert kinds[0] == "number" and "function" in kinds and kinds[-1] in ("figure", "explain"), kinds
        assert [e.difficulty for e in chapter.exercises] == sorted(e.difficulty for e in chapter.exercises)
        assert any(test.hidden for exercise in chapter.exercises for test in exercise.tests), "some tests hidden"
        assert chapter.manual_points > 0 and all(exercise.objective for exercise in chapter.exercises)


def test_chapters_come_in_the_order_of_the_table_of_contents():
    pages = [Path(page).stem for page in toc_pages()]
    assert list(CHAPTERS) == [page for page in pages if page in CHAPTERS] != sorted(CHAPTERS)


def test_chapters_come_by_name_without_a_readable_table_of_contents(monkeypatch):
    def missing_toc():
        raise FileNotFoundError(ROOT / "_toc.yml")

    monkeypatch.setattr("tools.exercises.schema.toc_pages", missing_toc)
    assert [chapter.name for chapter in load_chapters(ROOT / "exercises")] == sorted(CHAPTERS)


# --------------------------------------------------------------------------------------------------------------
# Clear errors


def write_exercises(tmp_path, text: str, name: str = "demo") -> Path:
    path = tmp_path / f"{name}.yml"
    path.write_text(text)
    return path


GOOD = """
chapter: demo
title: Demo
prefix: demo
setup: |
  x = 1
exercises:
  - id: one
    title: One
    objective: read x
    kind: number
    difficulty: 1
    minutes: 2
    prompt: Set y to x.
    solution: |
      y = x
    tests:
      - points: 1
        visible: |
          assert y == 1
"""


def test_a_minimal_exercise_file_loads(tmp_path):
    chapter = load_chapter(write_exercises(tmp_path, GOOD))
    assert chapter.points == 1 and chapter.exercises[0].answer_source(markers=True) == \
        "### BEGIN SOLUTION\ny = x\n### END SOLUTION"


@pytest.mark.parametrize(("change", "message"), [
    (("chapter: demo", "chapter: other"), "'chapter' must be the file's stem"),
    (("kind: number", "kind: essay"), "'kind' must be one of"),
    (("points: 1", "points: 0"), "'points' must be a whole number from 1 to 20"),
    (("y = x\n", "y = = x\n"), "Python syntax error on line 1"),
    (("id: one", "id: One Two"), "'id' must match"),
    (("minutes: 2", "minutes: 2\n    hints: none"), "unknown keys ['hints']"),
    (("prompt: Set y to x.", "prompt: ''"), "'prompt' is missing or empty"),
    (("title: Demo", "title: [Demo"), "not valid YAML"),
])
def test_a_broken_exercise_file_gets_a_clear_error(tmp_path, change, message):
    with pytest.raises(ExerciseError, match=re.escape(message)):
        load_chapter(write_exercises(tmp_path, GOOD.replace(*change)))


def test_duplicate_exercise_ids_are_refused(tmp_path):
    exercise = GOOD[GOOD.index("  - id: one"):]
    with pytest.raises(ExerciseError, match="exercise ids must be unique"):
        load_chapter(write_exercises(tmp_path, GOOD + exercise))


def test_the_solution_continues_the_starter_with_its_indentation(tmp_path):
    text = GOOD.replace("    solution: |\n      y = x\n", "    starter: |\n      def f():\n          \"\"\"Doc.\"\"\"\n"
                        "    solution: |\n      return x\n")
    exercise = load_chapter(write_exercises(tmp_path, text)).exercises[0]
    assert exercise.answer_source() == 'def f():\n    """Doc."""\n    return x'
    assert "    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION" in exercise.answer_source(markers=True)


def test_code_after_two_blank_lines_runs_at_the_top_level(tmp_path):
    text = GOOD.replace("    solution: |\n      y = x\n", "    starter: |\n      def f():\n          \"\"\"Doc.\"\"\"\n"
                        "    solution: |\n      return x\n\n\n      y = f()\n")
    exercise = load_chapter(write_exercises(tmp_path, text)).exercises[0]
    namespace = {"x": 3}
    exec(exercise.answer_source(), namespace)  # y = f() must run, not sit in f's body after its return
    assert namespace["y"] == 3
    marked = {"x": 4}
    exec(exercise.answer_source(markers=True), marked)
    assert marked["y"] == 4 and exercise.answer_source(markers=True).endswith("y = f()\n### END SOLUTION")
