"""Grading: nbgrader gives the points intended (read from its gradebook); a bad submission is never a silent zero."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tests.classroom.conftest import CHAPTERS, MAIN, released
from tools.classroom.__main__ import main
from tools.classroom.course import run_nbgrader
from tools.classroom.grading import autograde, fill_answers, read_scores

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


def partly_solved(chapter) -> tuple[dict[str, str | None], dict[str, float]]:
    """The answers (the first exercise solved, the others half right or blank) and the points each test deserves."""
    # The points come from the exercise file, not from nbgrader; an exercise without a `partial` answer is left blank.
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
# Two copies of the course graded at the same time (two cores): one with the four submissions of issue 9 and the
# bad inputs on the main chapter, one with a solved and a partly solved submission of every other chapter. Students'
# submissions are written from the released student version, graded with `nbgrader autograde`, and the points read
# back from nbgrader's gradebook.


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


def test_grade_command_exits_non_zero_and_prints_the_reasons(course, tmp_path, capsys):
    root = tmp_path / "course"
    shutil.copytree(course, root)
    status = main(["autograde", MAIN, "--course-dir", str(root), "--student", "nobody"])
    out = capsys.readouterr().out
    assert status == 1 and "REFUSED" in out and "no notebook" in out


def test_feedback_shows_the_visible_checks_but_no_hidden_check_nor_its_traceback(graded):
    """What a student gets back names the failed checks without quoting the hidden code that would give answers away."""
    import html
    import re

    from tools.classroom.feedback import HIDDEN_NOTE

    run_nbgrader(graded.main_course, "generate_feedback", MAIN, "--student", "partial", "--force")
    page = graded.main_course / "feedback" / "partial" / MAIN / f"{MAIN}.html"
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    exercises = CHAPTERS[MAIN].exercises
    shown = "\n".join(t.visible for e in exercises for t in e.tests) + CHAPTERS[MAIN].setup
    hidden = {line.strip() for e in exercises for t in e.tests for line in t.hidden.splitlines()}
    hidden = {line for line in hidden if len(line) > 25 and line not in shown}
    assert hidden and not [line for line in hidden if line in text]
    visible = [line.strip() for e in exercises for t in e.tests for line in t.visible.splitlines() if line.strip()]
    assert visible and all(line in text for line in visible)
    assert HIDDEN_NOTE in text  # the partial answer fails hidden checks: the student learns that, not their code
