"""Grading: nbgrader gives the points intended (read from its gradebook); a bad submission is never a silent zero."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tests.classroom.conftest import CHAPTERS, MAIN, released
from tools.classroom.__main__ import main
from tools.classroom.nbgrader.grading import fill_answers, read_scores
from tools.exercises.course import run_nbgrader

# --------------------------------------------------------------------------------------------------------------
# Submissions, written into nbgrader's layout submitted/<student>/<chapter>/<chapter>.ipynb


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


def partly_solved(chapter) -> dict[str, str | None]:
    """The answers: the first exercise solved, the others half right (their `partial` answer) or left blank."""
    first, *rest = chapter.exercises
    return {first.id: first.solution, **{e.id: e.partial.solution if e.partial else None for e in rest}}


def deserved(chapter, answers: dict[str, str | None]) -> dict[str, float]:
    """The points each test cell deserves: all for a model solution, the declared tests for a `partial` answer."""
    points = {}
    for exercise in chapter.exercises:
        answer = answers.get(exercise.id)
        passes = range(1, len(exercise.tests) + 1) if answer == exercise.solution else \
            exercise.partial.passes if exercise.partial and answer == exercise.partial.solution else ()
        points.update({exercise.test_id(n): test.points if n in passes else 0
                       for n, test in enumerate(exercise.tests, start=1)})
    return points


def auto_cells(score: dict) -> dict[str, float]:
    """Autograded points per test cell, from the gradebook (written answers left out)."""
    return {name: points for name, (points, _) in score["cells"].items() if not name.endswith("-written")}


# --------------------------------------------------------------------------------------------------------------
# The main chapter's submissions are graded once per session with the simulated class (`graded_class`, in
# conftest.py: the project's `grade` command). Every other chapter gets a solved and a partly solved submission,
# graded here by plain `nbgrader autograde` in the course directory (the sandbox is in its config), together with
# two damaged files that plain nbgrader meets without the project's checks.


@pytest.fixture(scope="module")
def others(course, tmp_path_factory):
    """The other chapters' gradebook scores, the plain nbgrader run, and its course directory."""
    root = tmp_path_factory.mktemp("others") / "course"
    shutil.copytree(course, root)
    for name in CHAPTERS:
        if name != MAIN:
            chapter = CHAPTERS[name]
            submit(root, name, "solution", fill_answers(released(course, name), chapter, solutions(chapter)))
            submit(root, name, "partial", fill_answers(released(course, name), chapter, partly_solved(chapter)))
    solved_text = nbformat.writes(fill_answers(released(course, MAIN), CHAPTERS[MAIN], solutions(CHAPTERS[MAIN])))
    submit(root, MAIN, "raw-renamed", name=f"{MAIN} (1).ipynb", text=solved_text)
    submit(root, MAIN, "raw-broken-json", text=solved_text[: len(solved_text) // 2])
    result = run_nbgrader(root, "autograde", "*", "--force", check=False)  # every chapter in one run
    return SimpleNamespace(scores={name: read_scores(root, name) for name in CHAPTERS}, raw=result, root=root)


def _autograded(graded_class, others, name: str) -> Path:
    """The solved submission of a chapter as nbgrader saved it after grading."""
    if name == MAIN:
        return graded_class.root / "autograded" / "correct" / MAIN / f"{MAIN}.ipynb"
    return others.root / "autograded" / "solution" / name / f"{name}.ipynb"


# --------------------------------------------------------------------------------------------------------------
# The four submissions of issue 9, points from nbgrader's gradebook


def test_solution_version_gets_full_marks_in_the_main_chapter(graded_class):
    score = graded_class.scores["correct"]
    chapter = CHAPTERS[MAIN]
    assert graded_class.records["correct"].status == "graded"
    assert score["auto_score"] == score["max_auto_score"] == chapter.auto_points
    assert score["max_score"] == chapter.points and score["needs_manual_grade"]  # the written answer awaits a teacher
    assert all(points == maximum for name, (points, maximum) in score["cells"].items() if not name.endswith("written"))


@pytest.mark.parametrize("name", [name for name in CHAPTERS if name != MAIN])
def test_solution_version_gets_full_marks(others, name):
    score = others.scores[name]["solution"]
    assert score["graded"]
    assert score["auto_score"] == score["max_auto_score"] == CHAPTERS[name].auto_points, score["cells"]


@pytest.mark.parametrize("name", list(CHAPTERS))
def test_the_solution_runs_without_an_error_in_any_cell(graded_class, others, name):
    cells = nbformat.read(_autograded(graded_class, others, name), as_version=4).cells
    failed = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in cells
              if cell.cell_type == "code" and any(output.output_type == "error" for output in cell.outputs)]
    assert failed == [], f"{name}: cells that raised"
    assert all(cell.execution_count for cell in cells if cell.cell_type == "code")  # every cell ran


def test_unchanged_student_version_gets_zero_without_crashing(graded_class):
    score = graded_class.scores["blank"]
    assert graded_class.records["blank"].status == "graded", graded_class.records["blank"]
    assert score["graded"] and score["score"] == 0 and score["max_score"] == CHAPTERS[MAIN].points
    assert all(points == 0 for points, _ in score["cells"].values())  # every cell graded 0, none left unscored
    assert not score["needs_manual_grade"]  # an untouched written answer is "no response": 0 without a teacher


def test_partly_solved_submission_gets_exactly_its_partial_marks(graded_class):
    points = deserved(CHAPTERS[MAIN], graded_class.kinds["partial"]["answers"])
    score = graded_class.scores["partial"]
    assert auto_cells(score) == points
    assert 0 < score["auto_score"] == sum(points.values()) < CHAPTERS[MAIN].auto_points


@pytest.mark.parametrize("name", [name for name in CHAPTERS if name != MAIN])
def test_each_chapters_half_right_answers_earn_exactly_the_declared_points(others, name):
    """Every exercise's `partial` answer passes exactly the tests it declares: the hidden tests catch real mistakes."""
    points = deserved(CHAPTERS[name], partly_solved(CHAPTERS[name]))
    assert auto_cells(others.scores[name]["partial"]) == points


def test_exception_in_one_exercise_keeps_the_other_exercises_marks(graded_class):
    chapter = CHAPTERS[MAIN]
    broken = chapter.exercises[1]
    assert "raise RuntimeError" in graded_class.kinds["raising"]["answers"][broken.id]
    score = graded_class.scores["raising"]
    cells = auto_cells(score)
    assert all(cells[broken.test_id(n)] == 0 for n in range(1, len(broken.tests) + 1))
    assert score["auto_score"] == chapter.auto_points - broken.auto_points > 0


# --------------------------------------------------------------------------------------------------------------
# Bad input: never a silent zero


def test_deleted_test_cell_is_restored_by_nbgrader_and_graded(graded_class):
    cell = CHAPTERS[MAIN].exercises[1].test_id(1)
    record = graded_class.records["deleted-test"]
    assert graded_class.scores["deleted-test"]["auto_score"] == CHAPTERS[MAIN].auto_points
    assert cell in graded_class.scores["deleted-test"]["cells"]  # graded, from the source version
    assert any(cell in flag and "puts it back" in flag for flag in record.flags), record.flags


@pytest.mark.parametrize(("student", "message"), [
    ("renamed", f"expected {MAIN}.ipynb, found {MAIN} (1).ipynb"),
    ("broken-json", "not a readable notebook (NotJSONError"),
    ("deleted-setup", "setup cell was deleted"),
])
def test_damaged_submission_is_refused_with_a_clear_message_and_no_score(graded_class, student, message):
    record = graded_class.records[student]
    assert record.status == "refused" and message in record.reason, record
    assert student not in read_scores(graded_class.root, MAIN)  # nbgrader never saw it: no 0 in the gradebook


def test_plain_nbgrader_fails_loudly_on_damaged_files_and_scores_shows_not_graded(others):
    raw = others.raw
    assert raw.returncode == 1  # nbgrader's own error
    log = raw.stdout + raw.stderr
    assert "Skipping unknown notebook" in log and "NotJSONError" in log
    for student in ("raw-renamed", "raw-broken-json"):
        assert others.scores[MAIN][student]["graded"] is False  # recorded by nbgrader with 0 points, flagged by us
    assert all(others.scores[name]["solution"]["graded"] for name in CHAPTERS if name != MAIN)


def test_grade_command_exits_non_zero_and_prints_the_reasons(course, tmp_path, capsys):
    root = tmp_path / "course"
    shutil.copytree(course, root)
    status = main(["autograde", MAIN, "--course-dir", str(root), "--student", "nobody"])
    out = capsys.readouterr().out
    assert status == 1 and "REFUSED" in out and "no notebook" in out


def test_feedback_shows_the_visible_checks_but_no_hidden_check_nor_its_traceback(graded_class):
    """What a student gets back names the failed checks without quoting the hidden code that would give answers away."""
    import html
    import re

    from tools.classroom.nbgrader.hide import HIDDEN_NOTE

    run_nbgrader(graded_class.root, "generate_feedback", MAIN, "--student", "partial", "--force")
    page = graded_class.root / "feedback" / "partial" / MAIN / f"{MAIN}.html"
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    exercises = CHAPTERS[MAIN].exercises
    shown = "\n".join(t.visible for e in exercises for t in e.tests) + CHAPTERS[MAIN].setup
    hidden = {line.strip() for e in exercises for t in e.tests for line in t.hidden.splitlines()}
    hidden = {line for line in hidden if len(line) > 25 and line not in shown}
    assert hidden and not [line for line in hidden if line in text]
    visible = [line.strip() for e in exercises for t in e.tests for line in t.visible.splitlines() if line.strip()]
    assert visible and all(line in text for line in visible)
    assert HIDDEN_NOTE in text  # the partial answer fails hidden checks: the student learns that, not their code
