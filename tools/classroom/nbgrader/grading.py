"""Grading with nbgrader: submissions checked for damage it would turn into a silent zero, autograded, scores read."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.exercises.course import COURSE_ID, gradebook_url
from tools.exercises.schema import Chapter, ExerciseError


def fill_answers(student: nbformat.NotebookNode, chapter: Chapter, answers: dict[str, str | None]) -> \
        nbformat.NotebookNode:
    """Put code into a student notebook's answer cells, as a student would (exercise id -> code after the starter)."""
    # A value None leaves the cell as handed out; the key "<id>-written" sets the text of a hand-graded answer.
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in student.cells}
    exercises = {exercise.id: exercise for exercise in chapter.exercises}
    for key, code in answers.items():
        if code is None:
            continue
        if key.endswith("-written"):
            by_id[key].source = code
            continue
        if key not in exercises:
            raise ExerciseError(f"{chapter.name}: no exercise {key!r}; ids: {sorted(exercises)}")
        by_id[exercises[key].answer_id].source = exercises[key].answer_source(code)
    return student


def _source_cells(course_dir: Path, chapter_name: str) -> dict[str, dict]:
    path = course_dir / "source" / chapter_name / f"{chapter_name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    return {cell.metadata["nbgrader"]["grade_id"]: cell.metadata["nbgrader"] for cell in notebook.cells
            if "nbgrader" in cell.metadata}


def check_submission(course_dir: Path | str, chapter_name: str, student_id: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) for one submission; an error means nbgrader would fail or give an unearned zero."""
    course_dir = Path(course_dir)
    folder = course_dir / "submitted" / student_id / chapter_name
    expected = folder / f"{chapter_name}.ipynb"
    where = f"submitted/{student_id}/{chapter_name}"
    if not expected.exists():
        others = sorted(p.name for p in folder.glob("*.ipynb"))
        if others:
            return [f"{where}: expected {expected.name}, found {', '.join(others)}. nbgrader grades notebooks by "
                    f"file name and would give 0 points: rename the file to {expected.name}"], []
        return [f"{where}: no notebook {expected.name} (the folder holds no .ipynb file)"], []
    try:
        notebook = nbformat.read(expected, as_version=4)
    except Exception as error:  # nbformat raises NotJSONError, JSONDecodeError, or validation errors
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return [f"{where}/{expected.name}: not a readable notebook ({type(error).__name__}: {first[:200]}). "
                "The file is damaged (edited by hand or cut short): ask for a fresh copy saved from Jupyter"], []
    source = _source_cells(course_dir, chapter_name)
    present = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells}
    errors, warnings = [], []
    order_errors, edits = locked_cell_changes(course_dir, chapter_name, notebook, where)
    for grade_id, meta in source.items():
        if grade_id in present:
            continue
        if meta.get("grade") and not meta.get("solution"):
            warnings.append(f"{where}: test cell {grade_id!r} was deleted; nbgrader puts it back from the source "
                            "version and grades it (OverwriteCells.add_missing_cells)")
        elif meta.get("solution"):
            errors.append(f"{where}: answer cell {grade_id!r} was deleted; nbgrader cannot grade its exercise. Copy "
                          "the cell back from the released notebook (with the student's answer, if any) and grade "
                          "again")
        elif grade_id == "setup":
            errors.append(f"{where}: the read-only setup cell was deleted; every check after it would fail. Copy it "
                          "back from the released notebook and grade again")
    return errors + order_errors, warnings + edits


def locked_cell_changes(course_dir: Path, chapter_name: str, notebook: nbformat.NotebookNode,
                        where: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the locked cells handed out: reordered (refused) or edited (nbgrader restores them)."""
    from nbgrader.utils import compute_checksum

    release = nbformat.read(course_dir / "release" / chapter_name / f"{chapter_name}.ipynb", as_version=4)
    given = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in release.cells
             if cell.metadata.get("nbgrader", {}).get("locked")}
    handed = [cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade_id") in given]
    order = [cell.metadata["nbgrader"]["grade_id"] for cell in handed]
    expected = [grade_id for grade_id in given if grade_id in order]
    errors = [] if order == expected else [
        f"{where}: the locked cells were reordered ({', '.join(order)}); the checks would run in another order "
        "than the one handed out. Ask for the cells in their original order, or grade this notebook by hand"]
    edits = [f"{where}: locked cell {cell.metadata['nbgrader']['grade_id']!r} was edited; nbgrader graded the "
             "version you handed out instead (its checksum differs)" for cell in handed
             if compute_checksum(cell) != compute_checksum(given[cell.metadata["nbgrader"]["grade_id"]])]
    return errors, edits


def read_scores(course_dir: Path | str, chapter_name: str) -> dict[str, dict]:
    """Per student, from nbgrader's gradebook: score, max_score, auto and manual parts, and each cell's grade."""
    from nbgrader.api import Gradebook, MissingEntry

    course_dir = Path(course_dir)
    scores = {}
    with Gradebook(gradebook_url(course_dir), COURSE_ID) as gradebook:
        try:
            assignment = gradebook.find_assignment(chapter_name)
        except MissingEntry:
            raise ExerciseError(f"no assignment {chapter_name!r} in the gradebook of {course_dir}; run "
                                "`make assignments` first") from None
        for submission in assignment.submissions:
            grades = {grade.name: grade for notebook in submission.notebooks for grade in notebook.grades}
            code = [g for g in grades.values() if g.cell_type == "code"]
            scores[submission.student_id] = {
                # False when nbgrader stopped before grading (its log says why): the 0 is not a result
                "graded": bool(code) and all(g.auto_score is not None for g in code),
                "score": submission.score,
                "max_score": submission.max_score,
                "auto_score": sum(g.auto_score or 0.0 for g in grades.values() if g.cell_type == "code"),
                "max_auto_score": sum(g.max_score for g in grades.values() if g.cell_type == "code"),
                "needs_manual_grade": submission.needs_manual_grade,
                "cells": {name: (g.auto_score, g.max_score) for name, g in sorted(grades.items())},
            }
    return scores
