"""The classroom tests' shared ground: the chapters' exercises and one nbgrader course generated from them."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tools.book.toc import ROOT
from tools.classroom.nbgrader.grading import read_scores
from tools.classroom.policy import sandbox
from tools.classroom.run.classgrade import grade_class
from tools.exercises.course import build_assignments
from tools.exercises.schema import load_chapters

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


ATTACK = "attack-"  # the attacks' student ids: attack-<name>
CELL_TIMEOUT = 10  # seconds for an answer cell here (the teacher's default is 30): the infinite loop costs that


@pytest.fixture(scope="session")
def bwrap():
    """The grading sandbox must work wherever the tests run: a failed self-check is a failure with its reason."""
    problem = sandbox.bwrap_problem()
    if problem:
        pytest.fail(f"the grading sandbox cannot run here: {problem}")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def graded_class(bwrap, course, tmp_path_factory):
    """The simulated class and the attacks, graded once per session by `grade_class` over two workers: the records,
    the scores, and the course configuration's hash before grading (test_sandbox.py and test_grading.py read it)."""
    from tests.classroom.attacks import ATTACKS, SAME_AS_KIND, attack_notebook, submit_attacks
    from tests.classroom.simulated import kinds, submit_class

    root = tmp_path_factory.mktemp("class") / "course"
    shutil.copytree(course, root)
    students = kinds(root)
    submit_class(root, students)
    submit_attacks(root, ATTACK, skip=SAME_AS_KIND)  # graded with the class: one grading run for both
    for attack, kind in SAME_AS_KIND.items():  # the very notebook of a kind, no file beside it: graded once
        submitted = root / "submitted" / kind / MAIN
        assert not ATTACKS[attack][1] and [p.name for p in submitted.iterdir()] == [f"{MAIN}.ipynb"], attack
        assert nbformat.writes(attack_notebook(root, ATTACKS[attack][0])) == (submitted / f"{MAIN}.ipynb").read_text()
    config = sha(root / "nbgrader_config.py")
    started = time.monotonic()
    records = grade_class(root, MAIN, workers=2, cell_timeout=CELL_TIMEOUT, log=lambda line: None)
    seconds = time.monotonic() - started
    print(f"\nsimulated class of {len(students)}: {seconds:.0f} s over 2 workers")
    scores = read_scores(root, MAIN)
    for attack, kind in SAME_AS_KIND.items():  # the attack's points are its kind's (records: the graded only)
        scores[ATTACK + attack] = scores[kind]
    for student, record in sorted(records.items()):
        points = scores.get(student, {}).get("auto_score", "-")
        print(f"  {student:24} {record.status:14} {points!s:>4} {record.seconds:6.1f} s  {record.reason[:60]}")
    return SimpleNamespace(root=root, kinds=students, records=records, scores=scores, config=config)
