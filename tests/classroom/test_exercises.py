"""The exercises: nbgrader grades them as intended (points read from its gradebook), bad submissions are never a
silent zero, and the book's exercise cells match exercises/.

The grading tests build a course directory in a temporary folder with `nbgrader generate_assignment`, write
submissions the way students would (from the released student version), grade them with `nbgrader autograde`
and read the points back from nbgrader's gradebook. Two copies of the course are graded at the same time (two
cores): one with the four submissions of issue 9 and the bad inputs on one chapter, one with a solved and a
partly solved submission of every other chapter.
"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tools.classroom.exercises import (
    ExerciseError,
    autograde,
    book_cells,
    build_assignments,
    check_book,
    fill_answers,
    load_chapter,
    load_chapters,
    main,
    read_scores,
    run_nbgrader,
    sync_notebook,
    teachers_table,
)

ROOT = Path(__file__).parents[2]
CHAPTERS = {chapter.name: chapter for chapter in load_chapters(ROOT / "exercises")}
MAIN = "token_embeddings"  # the chapter on which every scenario runs
TOPIC_CHAPTERS = ["embedding_layer_at_a_glance", "token_embeddings", "segment_embeddings", "learned_positions",
                  "sum_and_layernorm", "sinusoidal_encodings", "one_layer_many_families"]


# --------------------------------------------------------------------------------------------------------------
# Submissions, written into nbgrader's layout submitted/<student>/<chapter>/<chapter>.ipynb


def released(course: Path, chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)


def submit(course: Path, chapter: str, student: str, notebook=None, *, name: str | None = None,
           text: str | None = None) -> None:
    folder = course / "submitted" / student / chapter
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{chapter}.ipynb")
    path.write_text(text if text is not None else nbformat.writes(notebook))


def solutions(chapter) -> dict[str, str]:
    answers = {exercise.id: exercise.solution for exercise in chapter.exercises}
    answers.update({exercise.written_id: exercise.manual.answer for exercise in chapter.exercises if exercise.manual})
    return answers


def partly_solved(chapter) -> tuple[dict[str, str | None], dict[str, float]]:
    """The first exercise solved, every other one answered with its declared half-right answer (or left blank).

    Returns the answers and the points each test cell deserves, from the exercise file, not from nbgrader.
    """
    first, *rest = chapter.exercises
    answers = {first.id: first.solution}
    deserved = {first.test_id(n): test.points for n, test in enumerate(first.tests, start=1)}
    for exercise in rest:
        answers[exercise.id] = exercise.partial.solution if exercise.partial else None
        passes = exercise.partial.passes if exercise.partial else ()
        deserved.update({exercise.test_id(n): test.points if n in passes else 0
                         for n, test in enumerate(exercise.tests, start=1)})
    return answers, deserved


def auto_cells(score: dict) -> dict[str, float]:
    """Autograded points per test cell, from the gradebook (written answers left out)."""
    return {name: points for name, (points, _) in score["cells"].items() if not name.endswith("-written")}


# --------------------------------------------------------------------------------------------------------------
# One course, generated once; two copies graded in parallel


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    build_assignments(root, ROOT / "exercises")
    return root


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """The main chapter's autograde report, the other chapters' gradebook scores, the plain nbgrader run, the dirs."""
    main_course = tmp_path_factory.mktemp("main") / "course"
    others = tmp_path_factory.mktemp("others") / "course"
    shutil.copytree(course, main_course)
    shutil.copytree(course, others)

    chapter = CHAPTERS[MAIN]
    submit(main_course, MAIN, "solution", fill_answers(released(course, MAIN), chapter, solutions(chapter)))
    submit(main_course, MAIN, "unchanged", released(course, MAIN))
    submit(main_course, MAIN, "partial", fill_answers(released(course, MAIN), chapter, partly_solved(chapter)[0]))
    failing = dict(solutions(chapter), **{chapter.exercises[1].id: "raise RuntimeError('an exception in exercise 2')"})
    submit(main_course, MAIN, "exception", fill_answers(released(course, MAIN), chapter, failing))
    deleted = fill_answers(released(course, MAIN), chapter, solutions(chapter))
    deleted.cells = [c for c in deleted.cells if c.metadata["nbgrader"]["grade_id"] != chapter.exercises[1].test_id(1)]
    submit(main_course, MAIN, "deleted-test", deleted)
    solved_text = nbformat.writes(fill_answers(released(course, MAIN), chapter, solutions(chapter)))
    submit(main_course, MAIN, "renamed", name=f"{MAIN} (1).ipynb", text=solved_text)
    submit(main_course, MAIN, "broken-json", text=solved_text[: len(solved_text) // 2])
    no_setup = fill_answers(released(course, MAIN), chapter, solutions(chapter))
    no_setup.cells = [c for c in no_setup.cells if c.metadata["nbgrader"]["grade_id"] != "setup"]
    submit(main_course, MAIN, "deleted-setup", no_setup)

    rest = [name for name in CHAPTERS if name != MAIN]
    beside_main = rest[-1]  # graded in the main course after the main chapter: two equal halves of the work
    for name in rest:
        where, other = (main_course if name == beside_main else others), CHAPTERS[name]
        submit(where, name, "solution", fill_answers(released(course, name), other, solutions(other)))
        submit(where, name, "partial", fill_answers(released(course, name), other, partly_solved(other)[0]))
    # plain nbgrader, without the project's checks, on the two damaged files
    submit(others, MAIN, "raw-renamed", name=f"{MAIN} (1).ipynb", text=solved_text)
    submit(others, MAIN, "raw-broken-json", text=solved_text[: len(solved_text) // 2])

    def grade_main():
        report = autograde(main_course, MAIN)  # the project's command: checks, then nbgrader autograde
        run_nbgrader(main_course, "autograde", beside_main, "--force")
        return report, read_scores(main_course, beside_main)

    def grade_others():
        result = run_nbgrader(others, "autograde", "*", "--force", check=False)  # every chapter in one run
        return {name: read_scores(others, name) for name in CHAPTERS if name != beside_main}, result

    with ThreadPoolExecutor(max_workers=2) as pool:
        main_run, other_run = pool.submit(grade_main), pool.submit(grade_others)
        report, beside = main_run.result()
        other_scores, raw = other_run.result()
    other_scores[beside_main] = beside
    return SimpleNamespace(report=report, others=other_scores, raw=raw, main_course=main_course, others_course=others)


# --------------------------------------------------------------------------------------------------------------
# The exercise files and the generated notebooks


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


def test_student_version_has_no_solutions_and_no_hidden_tests(course):
    for name, chapter in CHAPTERS.items():
        student = released(course, name)
        text = "\n".join(cell.source for cell in student.cells)
        cells = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in student.cells}
        given = chapter.setup + "".join(e.starter + e.prompt + "".join(t.visible for t in e.tests)
                                        for e in chapter.exercises)  # what students may see
        for exercise in chapter.exercises:
            answer = cells[exercise.answer_id]
            assert "raise NotImplementedError()" in answer.source and "BEGIN SOLUTION" not in answer.source
            assert answer.source.startswith(exercise.starter.rstrip("\n")), "the starter code is kept"
            solution_lines = [line.strip() for line in exercise.solution.splitlines()
                              if len(line.strip()) > 25 and line.strip() not in given]
            assert solution_lines and not any(line in text for line in solution_lines), (name, exercise.id)
            for number, test in enumerate(exercise.tests, start=1):
                cell = cells[exercise.test_id(number)]
                assert cell.metadata["nbgrader"]["points"] == test.points and cell.metadata["nbgrader"]["locked"]
                if test.visible.strip():
                    assert test.visible.strip() in cell.source  # visible tests are kept
                hidden = [line.strip() for line in test.hidden.splitlines()
                          if len(line.strip()) > 25 and line.strip() not in given]
                assert not any(line in text for line in hidden), (name, exercise.test_id(number))
                assert "BEGIN HIDDEN TESTS" not in cell.source
            if exercise.manual:
                assert cells[exercise.written_id].source == "YOUR ANSWER HERE"
                assert exercise.manual.answer.strip()[:40] not in text


def test_source_version_holds_the_solutions_and_hidden_tests_between_nbgrader_markers(course):
    source = nbformat.read(course / "source" / MAIN / f"{MAIN}.ipynb", as_version=4)
    solution_cells = [c for c in source.cells if c.metadata["nbgrader"]["solution"] and c.cell_type == "code"]
    assert all("### BEGIN SOLUTION" in c.source and "### END SOLUTION" in c.source for c in solution_cells)
    assert any("### BEGIN HIDDEN TESTS" in c.source for c in source.cells)
    setup = next(c for c in source.cells if c.metadata["nbgrader"]["grade_id"] == "setup")
    assert setup.metadata["nbgrader"]["locked"] and not setup.metadata["nbgrader"]["solution"]


def test_lms_zip_holds_the_student_version(course):
    import zipfile

    for name in CHAPTERS:
        with zipfile.ZipFile(course / "lms" / f"{name}.zip") as archive:
            assert sorted(archive.namelist()) == [f"{name}/README.md", f"{name}/{name}.ipynb"]
            assert json.loads(archive.read(f"{name}/{name}.ipynb")) == json.loads(
                (course / "release" / name / f"{name}.ipynb").read_text())


# --------------------------------------------------------------------------------------------------------------
# The four submissions of issue 9, points from nbgrader's gradebook


def test_solution_version_gets_full_marks_in_the_main_chapter(graded):
    report = graded.report
    score = report.scores["solution"]
    chapter = CHAPTERS[MAIN]
    assert score["auto_score"] == score["max_auto_score"] == chapter.auto_points
    assert score["max_score"] == chapter.points and score["needs_manual_grade"]  # the written answer awaits a teacher
    assert all(points == maximum for name, (points, maximum) in score["cells"].items() if not name.endswith("written"))


@pytest.mark.parametrize("name", [name for name in CHAPTERS if name != MAIN])
def test_solution_version_gets_full_marks(graded, name):
    score = graded.others[name]["solution"]
    assert score["graded"]
    assert score["auto_score"] == score["max_auto_score"] == CHAPTERS[name].auto_points, score["cells"]


@pytest.mark.parametrize("name", list(CHAPTERS))
def test_the_solution_runs_without_an_error_in_any_cell(graded, name):
    autograded = [course / "autograded" / "solution" / name / f"{name}.ipynb"
                  for course in (graded.main_course, graded.others_course)]
    (path,) = [path for path in autograded if path.exists()]
    cells = nbformat.read(path, as_version=4).cells
    failed = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in cells
              if cell.cell_type == "code" and any(output.output_type == "error" for output in cell.outputs)]
    assert failed == [], f"{name}: cells that raised"
    assert all(cell.execution_count for cell in cells if cell.cell_type == "code")  # every cell ran


def test_unchanged_student_version_gets_zero_without_crashing(graded):
    report = graded.report
    score = report.scores["unchanged"]
    assert report.returncode == 0, report.log  # nbgrader itself ran through
    assert score["graded"] and score["score"] == 0 and score["max_score"] == CHAPTERS[MAIN].points
    assert all(points == 0 for points, _ in score["cells"].values())  # every cell graded 0, none left unscored
    assert not score["needs_manual_grade"]  # an untouched written answer is "no response": 0 without a teacher


def test_partly_solved_submission_gets_exactly_its_partial_marks(graded):
    answers, deserved = partly_solved(CHAPTERS[MAIN])
    score = graded.report.scores["partial"]
    assert auto_cells(score) == deserved
    assert 0 < score["auto_score"] == sum(deserved.values()) < CHAPTERS[MAIN].auto_points


@pytest.mark.parametrize("name", [name for name in CHAPTERS if name != MAIN])
def test_each_chapters_half_right_answers_earn_exactly_the_declared_points(graded, name):
    """Every exercise's `partial` answer passes exactly the tests it declares: the hidden tests catch real mistakes."""
    _, deserved = partly_solved(CHAPTERS[name])
    assert auto_cells(graded.others[name]["partial"]) == deserved


def test_exception_in_one_exercise_keeps_the_other_exercises_marks(graded):
    chapter = CHAPTERS[MAIN]
    broken = chapter.exercises[1]
    score = graded.report.scores["exception"]
    cells = auto_cells(score)
    assert all(cells[broken.test_id(n)] == 0 for n in range(1, len(broken.tests) + 1))
    assert score["auto_score"] == chapter.auto_points - broken.auto_points > 0


# --------------------------------------------------------------------------------------------------------------
# Bad input: never a silent zero


def test_deleted_test_cell_is_restored_by_nbgrader_and_graded(graded):
    report = graded.report
    cell = CHAPTERS[MAIN].exercises[1].test_id(1)
    assert report.scores["deleted-test"]["auto_score"] == CHAPTERS[MAIN].auto_points
    assert any(cell in warning and "puts it back" in warning for warning in report.warnings)
    assert f"Missing grade cell {cell}" in report.log  # nbgrader's own account of it


@pytest.mark.parametrize(("student", "message"), [
    ("renamed", f"expected {MAIN}.ipynb, found {MAIN} (1).ipynb"),
    ("broken-json", "not a readable notebook (NotJSONError"),
    ("deleted-setup", "setup cell was deleted"),
])
def test_damaged_submission_is_refused_with_a_clear_message_and_no_score(graded, student, message):
    report = graded.report
    assert not report.ok
    assert any(message in line for line in report.refused[student]), report.refused[student]
    assert student not in report.scores
    assert student not in read_scores(graded.main_course, MAIN)  # nbgrader never saw it: no 0 in the gradebook


def test_plain_nbgrader_fails_loudly_on_damaged_files_and_scores_shows_not_graded(graded):
    others, raw = graded.others, graded.raw
    assert raw.returncode == 1  # nbgrader's own error
    log = raw.stdout + raw.stderr
    assert "Skipping unknown notebook" in log and "NotJSONError" in log
    for student in ("raw-renamed", "raw-broken-json"):
        assert others[MAIN][student]["graded"] is False  # recorded by nbgrader with 0 points, flagged by us
    assert all(others[name]["solution"]["graded"] for name in others if name != MAIN)


def test_autograde_command_exits_non_zero_and_prints_the_reasons(course, capsys):
    status = main(["autograde", MAIN, "--course-dir", str(course), "--student", "nobody"])
    out = capsys.readouterr().out
    assert status == 1 and "NOT GRADED (nobody)" in out and "no notebook" in out


# --------------------------------------------------------------------------------------------------------------
# The exercise files: clear errors


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


# --------------------------------------------------------------------------------------------------------------
# The book


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
