"""Records per submission as they finish: an interrupted class run resumes, and leaves no grading process behind."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from tests.classroom.conftest import MAIN, released
from tools.classroom import classgrade
from tools.classroom.classgrade import RUNNING, Record, grade_class, read_records, real_error


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

    def grade_student(course_dir, chapter, student, digest, notes, cell_timeout):
        calls.append(student)
        if len(calls) == 4:
            raise KeyboardInterrupt  # Ctrl-C while the fourth submission is graded
        return Record(student, "graded", digest=digest)

    monkeypatch.setattr(classgrade, "preflight", lambda course_dir, chapter: None)
    monkeypatch.setattr(classgrade, "grade_student", grade_student)
    with pytest.raises(KeyboardInterrupt):
        grade_class(root, MAIN, workers=1, log=lambda line: None)
    assert sorted(read_records(root, MAIN)) == sorted(calls[:3])  # written as they finished
    done, calls[:] = list(calls[:3]), []
    grade_class(root, MAIN, workers=1, log=lambda line: None)
    assert sorted(calls) == sorted(set(students) - set(done))  # only the rest graded again
    assert sorted(read_records(root, MAIN)) == students


def test_stopping_ends_every_running_child_and_its_own_children():
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, "
                              "'-c', 'import time; time.sleep(300)']); print('ready', flush=True); time.sleep(300)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert child.stdout.readline().strip() == "ready"
    RUNNING.add(child)
    try:
        classgrade._stop_children()
    finally:
        RUNNING.discard(child)
    assert child.poll() is not None
    for _ in range(50):  # the grandchild in the same session went too (once its new parent has reaped it)
        left = subprocess.run(["pgrep", "-s", str(child.pid)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.1)
    assert left == [], left


def test_the_reason_is_the_real_error_not_nbgrader_wrapper():
    log = ("[AutogradeApp | ERROR] There was an error processing assignment\nTraceback (most recent call last):\n"
           "  File \"x.py\", line 1, in <module>\nnbgrader.preprocessors.base.ValidationError: cell tok-pad-row-"
           "test-1 has points but is not a grade cell\n[AutogradeApp | ERROR] ...\n"
           "nbgrader.utils.NbGraderException: Please see the above traceback for details on the specific errors\n")
    assert real_error(log) == ("nbgrader.preprocessors.base.ValidationError: cell tok-pad-row-test-1 has points but "
                               "is not a grade cell")
