"""Feedback never shows 0/N for what was not graded: nbgrader's real pages, from a gradebook filled without a kernel.

The grading runs themselves are tested elsewhere (test_sandbox.py grades a class; its crasher's feedback is checked
there). Here nbgrader autograde runs for real with its Execute step replaced by fixed outputs (no kernel: seconds),
so that each case of a grading record meets the real GenerateFeedback and its template.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path

import nbformat
import pytest
from nbconvert.preprocessors import Preprocessor

from tests.classroom.conftest import MAIN, released
from tests.classroom.simulated import CHAPTER, FIFTH, PAD, WORDPIECE, solutions
from tools.classroom.__main__ import main
from tools.classroom.nbgrader.execute import _not_graded
from tools.classroom.nbgrader.grading import fill_answers
from tools.classroom.nbgrader.hide import HideHiddenTests
from tools.classroom.nbgrader.nbconfig import nbgrader_config
from tools.classroom.nbgrader.records import Record, records_dir

STOP = f"the notebook ran past its limit of 900 s at {WORDPIECE.answer_id}"  # a stop reason, as execute.py words it


class Canned(Preprocessor):
    """Execute's place: every check before the stop passes (no output), every code cell from the stop on did not run."""

    enabled = True

    def preprocess(self, nb, resources):
        ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                cell.outputs = []
                if index >= ids.index(WORDPIECE.answer_id):
                    _not_graded(cell, STOP)
        return nb, resources


def _autograde(root: Path, student: str) -> None:
    from nbgrader.apps import NbGraderAPI

    config = nbgrader_config(root)
    config.Autograde.autograde_preprocessors = [Canned if step.__name__ == "SandboxedExecute" else step
                                                for step in config.Autograde.autograde_preprocessors]
    assert NbGraderAPI(config=config).autograde(MAIN, student, force=True, create=True)["success"]


def _record(root: Path, record: Record) -> None:
    folder = records_dir(root, MAIN)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record.student}.json").write_text(json.dumps(asdict(record)))


NOT_RUN = [cell for exercise in (WORDPIECE, FIFTH) for cell in (exercise.answer_id, *map(exercise.test_id, (1, 2)))]


@pytest.fixture(scope="module")
def fed(course, tmp_path_factory):
    """Feedback for a partly graded, a timed-out (graded earlier: a stale page and gradebook) and a refused student."""
    root = tmp_path_factory.mktemp("feedback") / "course"
    shutil.copytree(course, root)
    for student in ("partly", "timed-out", "refused"):
        folder = root / "submitted" / student / MAIN
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(released(root, MAIN), CHAPTER, solutions()), folder / f"{MAIN}.ipynb")
    for student in ("partly", "timed-out"):
        _autograde(root, student)
    stale = root / "feedback" / "timed-out" / MAIN / f"{MAIN}.html"
    stale.parent.mkdir(parents=True)
    stale.write_text("Score: 2.0 / 10.0, from an earlier submission")
    _record(root, Record("partly", "partly graded", STOP, not_graded_cells=NOT_RUN))
    _record(root, Record("timed-out", "not graded", "grading took longer than 1380 s"))
    _record(root, Record("refused", "refused", f"renamed: nbgrader expected {MAIN}.ipynb"))
    code = main(["feedback", MAIN, "--course-dir", str(root)])
    pages = {student: (root / "feedback" / student / MAIN / f"{MAIN}.html").read_text()
             for student in ("partly", "timed-out", "refused")}
    return code, pages


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_partly_graded_page_counts_what_ran_and_marks_the_rest_not_graded(fed):
    code, pages = fed
    page, text = pages["partly"], _text(pages["partly"])
    assert code == 1  # not every submission was graded
    assert f"(Score: {PAD.auto_points:.1f} / " in text  # nbgrader's total: the checks that ran, all passed
    assert "Partly graded" in text and f": {STOP}. From there on the cells did not run" in text
    for grade_id in NOT_RUN:  # no score line (nbgrader's "Score: 0.0 / 2.0") for a check that did not run
        assert f'name="{grade_id}"' not in page
    for grade_id in map(PAD.test_id, (1, 2)):  # the checks that ran keep theirs
        assert f'name="{grade_id}"' in page
    assert text.count("Not graded: this cell did not run") == len(NOT_RUN)
    assert "NotGraded" not in text


@pytest.mark.parametrize(("student", "says"), [("timed-out", "Not graded: grading took longer than 1380 s"),
                                               ("refused", f"Not graded (refused): renamed: nbgrader expected {MAIN}")])
def test_a_submission_without_a_grade_gets_its_reason_and_no_score(fed, student, says):
    text = _text(fed[1][student])
    assert says in text
    assert "Score" not in text and "/ 10" not in text  # nor the stale page of an earlier submission


def test_plain_nbgrader_feedback_refuses_a_not_graded_record_instead_of_showing_zero(fed, course, tmp_path):
    """The course's nbgrader config has the same preprocessor: it stops on such a record, with what to run."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    _record(root, Record("late", "not graded", "the grader stopped before the notebook ran"))
    notebook = released(root, MAIN)
    hide = HideHiddenTests(config=nbgrader_config(root))
    with pytest.raises(ValueError, match="late: Not graded: the grader stopped.*tools.classroom feedback"):
        hide.preprocess(notebook, {"nbgrader": {"student": "late", "assignment": MAIN}})


def test_a_forged_not_graded_output_is_withheld_like_any_other(course, tmp_path):
    """Only the record says which cells did not run: an error the student's code names NotGraded proves nothing."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    _record(root, Record("forger", "partly graded", STOP, not_graded_cells=[FIFTH.test_id(2)]))
    notebook = nbformat.read(root / "source" / MAIN / f"{MAIN}.ipynb", as_version=4)
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells]
    forged = notebook.cells[ids.index(FIFTH.answer_id)]
    _not_graded(forged, "a hidden check's input the answer saw")
    hide = HideHiddenTests(config=nbgrader_config(root))
    shown, _ = hide.preprocess(notebook, {"nbgrader": {"student": "forger", "assignment": MAIN}})
    assert "hidden check's input" not in json.dumps(shown)
    assert "Not graded: this cell did not run" in json.dumps(shown.cells[ids.index(FIFTH.test_id(2)) + 1].outputs)
