"""A simulated class graded end to end in the sandbox: each kind of submission gets the grade and status it deserves."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.classroom.attacks import ATTACKS, BASELINE, SAME_AS_KIND
from tests.classroom.conftest import ATTACK, CELL_TIMEOUT, MAIN, sha
from tests.classroom.simulated import CHAPTER, kinds, solutions
from tools.classroom.__main__ import main
from tools.classroom.nbgrader.grading import fill_answers, read_scores
from tools.classroom.policy import sandbox, warm
from tools.classroom.run.classgrade import grade_class, read_records
from tools.classroom.run.export import gradebook_rows, write_gradebook
from tools.environment import ROOT, venv_environment
from tools.exercises.schema import ExerciseError
from tools.testing.checkout import copy_checkout


@pytest.mark.parametrize("student", list(kinds(Path("/course"))))
def test_each_kind_of_submission_gets_the_status_and_points_it_deserves(graded_class, student):
    kind, record = graded_class.kinds[student], graded_class.records[student]
    assert record.status in (kind["status"] if isinstance(kind["status"], tuple) else (kind["status"],)), record
    assert kind.get("reason", "") in record.reason, record.reason
    assert any(kind["flag"] in flag for flag in record.flags) if "flag" in kind else True, record.flags
    if kind["points"] is not None:
        assert graded_class.scores[student]["auto_score"] == kind["points"], graded_class.scores[student]["cells"]
    row = next(row for row in gradebook_rows(graded_class.root, MAIN) if row["student"] == student)
    assert row["status"] == record.status
    assert row["autograded"] == ("" if kind["points"] is None else f"{kind['points']:g}")  # no score, not a 0


def test_a_dead_kernel_costs_only_the_cells_after_it(graded_class):
    record = graded_class.records["crasher"]
    later = [CHAPTER.exercises[1].test_id(1), CHAPTER.exercises[1].test_id(2), CHAPTER.exercises[2].answer_id]
    assert all(cell in record.not_graded_cells for cell in later), record.not_graded_cells
    assert CHAPTER.exercises[0].test_id(1) not in record.not_graded_cells


def _outputs(root: Path, student: str, grade_id: str) -> str:
    notebook = nbformat.read(root / "autograded" / student / MAIN / f"{MAIN}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "".join(out.get("text", "") + out.get("evalue", "") for out in cell.outputs)


def test_student_code_cannot_read_or_write_outside_its_folder_nor_reach_the_network(graded_class):
    root = graded_class.root
    seen = _outputs(root, "file-writer", CHAPTER.exercises[0].answer_id)
    assert "'env': []" in seen  # no NBGRADER_EXECUTION: the kernel cannot tell it is being graded
    assert "BEGIN HIDDEN TESTS" not in seen and "c.CourseDirectory" not in seen and "correct" not in seen
    assert "root:" not in seen  # /etc/shadow is not there
    assert seen.count("FileNotFoundError") + seen.count("OSError") >= 10, seen  # every read and write refused
    assert "'yes'" not in seen, seen  # no write and no connection succeeded
    for path in (root / "outside.txt", root.parent / "outside.txt", Path.home() / "outside.txt", Path("/outside.txt"),
                 ROOT / "helpers" / "outside.py"):
        assert not path.exists(), path


def test_a_submission_cannot_change_the_course_configuration(graded_class):
    assert sha(graded_class.root / "nbgrader_config.py") == graded_class.config
    assert not (graded_class.root / "pwned").exists()
    assert "could not tamper" in _outputs(graded_class.root, "config-tamperer", CHAPTER.exercises[0].answer_id)


def test_the_export_has_a_status_column_and_never_a_zero_for_no_score(graded_class, tmp_path):
    rows = write_gradebook(graded_class.root, MAIN, tmp_path / "grades.csv")
    assert {row["student"] for row in rows} == set(graded_class.records) == set(graded_class.kinds) | {
        ATTACK + name for name in ATTACKS if name not in SAME_AS_KIND}  # the rest are graded as their kind
    text = (tmp_path / "grades.csv").read_text()
    assert text.splitlines()[0].startswith("student,status,reason,score")
    for row in rows:
        if row["status"] in ("not graded", "refused"):
            assert row["score"] == row["autograded"] == "" and row["reason"], row


def test_regrading_skips_unchanged_submissions_and_keeps_hand_grades(graded_class):
    from nbgrader.api import Gradebook

    root, written = graded_class.root, CHAPTER.exercises[2].written_id
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "bert-first-vectors") as gradebook:
        grade = gradebook.find_grade(written, MAIN, MAIN, "correct")
        grade.manual_score = 2.0
        gradebook.db.commit()
    lines = []
    again = grade_class(root, MAIN, workers=2, cell_timeout=CELL_TIMEOUT, log=lines.append)
    assert lines[0].startswith(f"{MAIN}: grading 0 submissions")
    assert {s: r.seconds for s, r in again.items()} == {s: r.seconds for s, r in graded_class.records.items()}
    assert read_scores(root, MAIN)["correct"]["score"] == CHAPTER.auto_points + 2  # the hand grade is kept


def test_a_broken_grading_environment_fails_before_grading_anyone(bwrap, course, tmp_path, monkeypatch, capsys):
    root = tmp_path / "course"
    shutil.copytree(course, root)
    folder = root / "submitted" / "someone" / MAIN
    folder.mkdir(parents=True)
    nbformat.write(fill_answers(nbformat.read(root / "release" / MAIN / f"{MAIN}.ipynb", as_version=4), CHAPTER,
                                solutions()), folder / f"{MAIN}.ipynb")
    original = sandbox._mounts  # every sandbox's: the kernel's, the kernel zygote's, the trusted process's
    torch_dir = Path(__import__("torch").__file__).parent

    def without_torch(scratch, read_only):
        return original(scratch, read_only) + ["--tmpfs", str(torch_dir)]  # torch's folder is empty in there

    monkeypatch.setattr(sandbox, "_mounts", without_torch)
    warm.stop_all()  # a warm server (and its kernel zygote) started before the break would not see it
    with pytest.raises(ExerciseError, match="grading environment is broken"):
        grade_class(root, MAIN, log=lambda line: None)
    assert read_records(root, MAIN) == {}
    assert main(["grade", MAIN, "--course-dir", str(root)]) == 2
    err = capsys.readouterr().err  # the install cell's `import helpers` meets the missing torch first
    assert "ImportError" in err or "ModuleNotFoundError" in err, err


def test_a_checkout_under_tmp_with_a_space_and_the_venv_elsewhere_grades_a_submission(bwrap, course, tmp_path):
    """The project copied under /tmp into a folder whose name has a space; its venv is this one, outside the copy."""
    parent = Path(tempfile.mkdtemp(prefix="a checkout ", dir="/tmp"))
    try:
        checkout = copy_checkout(parent / "bert")
        root = checkout / "_build" / "assignments"
        shutil.copytree(course, root)  # a course moves with its checkout: its config names no path
        handed_in = checkout / "handed in" / "someone.ipynb"
        handed_in.parent.mkdir()
        nbformat.write(fill_answers(nbformat.read(root / "release" / MAIN / f"{MAIN}.ipynb", as_version=4),
                                    CHAPTER, solutions()), handed_in)
        output = checkout / "results.json"
        result = subprocess.run([sys.executable, "-m", "tools.classroom", "grade-one", MAIN, str(handed_in),
                                 "--output", str(output), "--course-dir", str(root), "--gradescope",
                                 str(checkout / "gradescope.json"), "--prairielearn", str(checkout / "pl.json")],
                                cwd=checkout, env=venv_environment(), capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, result.stdout + result.stderr
        results = json.loads(output.read_text())
        assert (results["student"], results["status"], results["reason"]) == ("someone", "graded", "")
        assert results["kernel"] == ("forked" if os.geteuid() == 0 else "fresh")  # its helpers/ lie under /tmp
        deserved = {exercise.test_id(n): test.points for exercise in CHAPTER.exercises
                    for n, test in enumerate(exercise.tests, start=1)}  # from the exercise file, not the grader
        assert {name: results["points"][name] for name in deserved} == deserved
        gradescope, prairie = (json.loads((checkout / name).read_text()) for name in ("gradescope.json", "pl.json"))
        assert {test["name"]: test["score"] for test in gradescope["tests"] if test["name"] in deserved} == deserved
        assert gradescope["score"] == results["auto_score"] and all(
            test["status"] == "passed" for test in gradescope["tests"] if test["name"] in deserved)
        assert prairie["gradable"] and prairie["score"] == results["auto_score"] / results["max_auto_score"]
        assert {test["name"]: test["points"] for test in prairie["tests"] if test["name"] in deserved} == deserved
        assert results["versions"]["torch"] == __import__("torch").__version__
        assert read_records(root, MAIN)["someone"].status == "graded"  # the class command's record, too
        assert not Path(sys.executable).is_relative_to(checkout)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.parametrize("student", ["leak-caller", "leak-echo"])
def test_feedback_carries_no_hidden_check_by_any_output(graded_class, student):
    """A right answer that prints its caller's source, or a hook that echoes every cell: no output holds a hidden check.

    The hidden checks run in a process of their own: the student's kernel never sees them, so neither the graded
    notebook's outputs nor the feedback (HTML, outputs and metadata) can hold one.
    """
    import html
    import re

    from tools.exercises.course import run_nbgrader

    run_nbgrader(graded_class.root, "generate_feedback", MAIN, "--student", student, "--force")
    graded = nbformat.read(graded_class.root / "autograded" / student / MAIN / f"{MAIN}.ipynb", as_version=4)
    outputs = json.dumps([cell.get("outputs", []) for cell in graded.cells]) + json.dumps(graded.metadata)
    page = (graded_class.root / "feedback" / student / MAIN / f"{MAIN}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    submitted = nbformat.read(graded_class.root / "submitted" / student / MAIN / f"{MAIN}.ipynb", as_version=4)
    shown = "\n".join(cell.source for cell in submitted.cells)  # what the student wrote or was given
    hidden = {line.strip() for e in CHAPTER.exercises for t in e.tests for line in t.hidden.splitlines()}
    hidden = {line for line in hidden if len(line) > 25 and line not in shown}
    assert hidden
    assert not [line for line in hidden if json_escaped(line) in outputs]
    assert not [line for line in hidden if line in text or html.escape(line) in page]
    assert graded_class.scores[student]["auto_score"] == CHAPTER.auto_points  # the tricks ran; the answers count
    if student == "leak-echo":  # the hooks ran: the post_run_cell one printed after each later cell
        printed = [out for cell in graded.cells[1:] for out in cell.get("outputs", []) if out.get("name") == "stdout"]
        assert len(printed) >= 2, printed


def json_escaped(line: str) -> str:
    """How a line appears inside the graded notebook's JSON."""
    import json

    return json.dumps(line)[1:-1]


def test_feedback_says_not_graded_where_nothing_was_earned_and_names_the_cap(graded_class):
    """The real run: the crasher's cells after its crash say "not graded", the renamed notebook's page its reason;
    every record names the process cap that bound its sandbox (as root: the sandbox's own uid) and its kernel's
    kind (as root: forked by the kernel zygote)."""
    from tools.classroom.run.feedback import write_feedback

    rows = {row["student"]: row for row in write_feedback(graded_class.root, MAIN, ["crasher", "renamed"])}
    crasher, renamed = (row["page"].read_text() for row in (rows["crasher"], rows["renamed"]))
    missed = graded_class.records["crasher"].not_graded_cells
    assert missed and all(f'name="{grade_id}"' not in crasher for grade_id in missed)  # no "Score: 0.0 / 2.0"
    assert "Partly graded" in crasher and "the kernel died" in crasher
    assert "Not graded (refused): " in renamed and "Score" not in renamed
    caps = {record.process_cap for record in graded_class.records.values() if record.status != "refused"}
    assert caps and not any(cap.startswith("none") or not cap for cap in caps), caps
    kernels = {record.kernel for record in graded_class.records.values() if record.status != "refused"}
    assert kernels == {"forked" if os.geteuid() == 0 else "fresh"}, kernels  # a root grader forks every kernel


def test_output_is_capped_before_it_is_written(graded_class):
    from tools.classroom.nbgrader.execute import CELL_OUTPUT_CAP

    path = graded_class.root / "autograded" / "output-bomb" / MAIN / f"{MAIN}.ipynb"
    assert path.stat().st_size < 2 * CELL_OUTPUT_CAP  # 5 MB printed; at most the cell's first 1 MB kept
    assert 0 < len(_outputs(graded_class.root, "output-bomb", CHAPTER.exercises[0].answer_id)) <= CELL_OUTPUT_CAP
    assert any("cut at the grader's cap" in flag for flag in graded_class.records["output-bomb"].flags)


# --------------------------------------------------------------------------------------------------------------
# Issue 32's attacks (tests/classroom/attacks.py), graded with the class: none earns more than the honest answer it
# builds on, and the honest solution keeps full marks.


def _points(graded_class, name: str) -> float:
    return graded_class.scores[ATTACK + name]["auto_score"]


def test_the_honest_solution_gets_full_marks_and_the_blank_none(graded_class):
    assert _points(graded_class, "honest") == CHAPTER.auto_points
    assert _points(graded_class, "blank") == 0


@pytest.mark.parametrize("attack", sorted(BASELINE))
def test_an_attack_earns_no_more_than_the_honest_answer_it_builds_on(graded_class, attack):
    record = graded_class.records[ATTACK + attack]
    assert record.status == "graded", record
    assert _points(graded_class, attack) <= _points(graded_class, BASELINE[attack]), \
        graded_class.scores[ATTACK + attack]["cells"]


def test_tricks_that_beat_the_old_grader_earn_exactly_their_wrong_answers_points(graded_class):
    """The points of the honest wrong answers, from the exercise file: each trick is worth nothing on top."""
    full, pad, fifth = CHAPTER.auto_points, CHAPTER.exercises[0], CHAPTER.exercises[2]
    assert _points(graded_class, "wrong-norm") == full - pad.tests[1].points  # pad_norm's test lost
    assert _points(graded_class, "pad-five") == full - pad.auto_points  # both pad tests lost
    assert _points(graded_class, "zero-share") <= full - fifth.tests[1].points  # 0.0 is no share of these words


def test_a_fork_bomb_costs_its_exercise_only(graded_class):
    record = graded_class.records[ATTACK + "fork-bomb"]
    assert record.status == "graded" and record.seconds < 300, record
    assert _points(graded_class, "fork-bomb") <= CHAPTER.auto_points - CHAPTER.exercises[2].tests[1].points
