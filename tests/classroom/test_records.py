"""Records per submission as they finish: an interrupted class run resumes, and leaves no grading process behind;
what a worker returns is replayed into the gradebook only if it is the submission's notebook."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys

import pytest

from tests.classroom.conftest import MAIN, released
from tools.classroom.nbgrader.records import Record, read_records, real_error
from tools.classroom.policy import warm
from tools.classroom.run import classgrade, submission
from tools.classroom.run.classgrade import grade_class
from tools.classroom.run.submission import RUNNING, stop_children


def test_an_interrupted_run_keeps_what_finished_and_resumes_with_the_rest(course, tmp_path, monkeypatch):
    import nbformat

    root = tmp_path / "course"
    shutil.copytree(course, root)
    students = [f"student-{n}" for n in range(6)]
    for student in students:
        folder = root / "submitted" / student / MAIN
        folder.mkdir(parents=True)
        nbformat.write(released(root, MAIN), folder / f"{MAIN}.ipynb")
    calls = []

    def grade_student(course_dir, chapter, student, digest, notes, cell_timeout, trusted_server):
        calls.append(student)
        if len(calls) == 4:
            raise KeyboardInterrupt  # Ctrl-C while the fourth submission is graded
        return Record(student, "graded", digest=digest)

    monkeypatch.setattr(classgrade, "preflight", lambda course_dir, chapter: "")
    monkeypatch.setattr(submission, "grade_student", grade_student)
    monkeypatch.setattr(warm, "server_for", lambda notebook: "")  # no trusted server for grades made up here
    with pytest.raises(KeyboardInterrupt):
        grade_class(root, MAIN, workers=1, log=lambda line: None)
    assert sorted(read_records(root, MAIN)) == sorted(calls[:3])  # written as they finished
    done, calls[:] = list(calls[:3]), []
    grade_class(root, MAIN, workers=1, log=lambda line: None)
    assert sorted(calls) == sorted(set(students) - set(done))  # only the rest graded again
    assert sorted(read_records(root, MAIN)) == students


def test_stopping_ends_every_running_child_and_its_own_children():
    grandchild = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']).pid"
    child = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; print({grandchild}, flush=True); "
                              "time.sleep(300)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    grandchild = os.pidfd_open(int(child.stdout.readline()))  # held from here: its end is seen, never a reused pid
    RUNNING.add(child)
    try:
        stop_children()
    finally:
        RUNNING.discard(child)
    try:
        assert child.poll() is not None
        # the grandchild in the same session went too: its pidfd turns readable once it has exited
        assert select.select([grandchild], [], [], 5)[0], "the grandchild outlived the stop"
    finally:
        os.close(grandchild)


def test_the_reason_is_the_real_error_not_nbgrader_wrapper():
    log = ("[AutogradeApp | ERROR] There was an error processing assignment\nTraceback (most recent call last):\n"
           "  File \"x.py\", line 1, in <module>\nnbgrader.preprocessors.base.ValidationError: cell tok-pad-row-"
           "test-1 has points but is not a grade cell\n[AutogradeApp | ERROR] ...\n"
           "nbgrader.utils.NbGraderException: Please see the above traceback for details on the specific errors\n")
    assert real_error(log) == ("nbgrader.preprocessors.base.ValidationError: cell tok-pad-row-test-1 has points but "
                               "is not a grade cell")


def test_a_worker_count_below_one_is_refused_with_what_to_pass(course):
    from tools.exercises.schema import ExerciseError

    with pytest.raises(ExerciseError, match="--workers must be 1 or more, not 0"):
        grade_class(course, MAIN, workers=0, log=lambda line: None)


def test_a_notebook_from_a_worker_with_other_cells_is_not_saved_as_grades(course, tmp_path):
    """The replay checks the worker's notebook cell by cell against nbgrader's sanitized submission."""
    import nbformat

    from tools.classroom.run.cluster import ReplayOutputs

    notebook = released(course, MAIN)
    other = released(course, MAIN)
    other.cells[-1].source += "\n# a cell the student never had"
    nbformat.write(other, tmp_path / "ran.ipynb")
    with pytest.raises(ValueError, match="other cells than the submission"):
        ReplayOutputs(executed_path=str(tmp_path / "ran.ipynb")).preprocess(notebook, {})
    same = released(course, MAIN)
    code = next(cell for cell in same.cells if cell.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran on a worker\n")]
    nbformat.write(same, tmp_path / "ran.ipynb")
    replayed, _ = ReplayOutputs(executed_path=str(tmp_path / "ran.ipynb")).preprocess(released(course, MAIN), {})
    assert next(cell for cell in replayed.cells if cell.cell_type == "code").outputs == code.outputs


def test_the_other_platforms_shapes_carry_each_cells_points_and_a_not_graded_notebook_scores_nothing():
    from tools.classroom.run import platforms

    graded = {"status": "partly graded", "reason": "the kernel died", "flags": ["t2 ran past its time limit"],
              "points": {"t1": 2.0, "t2": 0.0, "written": None}, "max_points": {"t1": 2.0, "t2": 1.0, "written": 2.0},
              "timings": {"command_s": 12.4}}  # the written answer awaits hand grading: no test, no 0
    shape = platforms.gradescope(graded)
    assert shape["score"] == 2.0 and shape["execution_time"] == 12
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in shape["tests"]] == [
        ("t1", 2.0, 2.0, "passed"), ("t2", 0.0, 1.0, "failed")]
    assert shape["output"] == "partly graded; the kernel died; t2 ran past its time limit"
    prairie = platforms.prairielearn(graded)
    assert prairie["gradable"] and prairie["score"] == 2 / 3 and len(prairie["tests"]) == 2
    refused = {"status": "not graded", "reason": "nbgrader failed", "flags": [], "points": None, "max_points": None,
               "timings": {"command_s": 3.0}}
    assert platforms.gradescope(refused)["score"] == 0 and platforms.gradescope(refused)["tests"] == []
    assert not platforms.prairielearn(refused)["gradable"] and platforms.prairielearn(refused)["score"] == 0.0
