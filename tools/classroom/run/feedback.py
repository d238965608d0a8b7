"""Feedback without answers, and without a score that was never earned: what did not run says "not graded"."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

from tools.classroom.nbgrader.hide import GRADED, not_graded_text
from tools.classroom.nbgrader.nbconfig import nbgrader_config
from tools.classroom.nbgrader.records import real_error
from tools.classroom.run.export import gradebook_rows
from tools.exercises.schema import ExerciseError

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{chapter}: not graded</title></head>
<body><h1>{chapter}: not graded</h1>
<p>{text}</p>
<p>This submission has no score: not zero, none. Ask your teacher what to do next.</p>
</body></html>
"""


def write_feedback(course_dir: Path | str, chapter: str, students: list[str] | None = None) -> list[dict]:
    """Write each submission's feedback page; rows of the export, each with 'page' (its path) and 'feedback'."""
    course_dir = Path(course_dir)
    rows = [row for row in gradebook_rows(course_dir, chapter) if not students or row["student"] in students]
    graded = {row["student"] for row in rows if row["status"] in GRADED}
    if graded:  # nbgrader's pages for the graded ones only: the others' would show 0/N
        from nbgrader.apps import NbGraderAPI

        others = {path.parent.name for path in (course_dir / "autograded").glob(f"*/{chapter}")} - graded
        config = nbgrader_config(course_dir)
        config.CourseDirectory.student_id_exclude = ",".join(sorted(others))
        result = NbGraderAPI(config=config).generate_feedback(chapter, force=True)
        if not result["success"]:
            raise ExerciseError(f"nbgrader generate_feedback failed: {real_error(result.get('log', ''))}")
    for row in rows:
        folder = course_dir / "feedback" / row["student"] / chapter
        row["page"] = folder / f"{chapter}.html"
        if row["student"] in graded:
            row["feedback"] = "scores" if row["status"] == "graded" else "scores, the cells that did not run marked"
            continue
        shutil.rmtree(folder, ignore_errors=True)  # an older page, from before this submission, would mislead
        folder.mkdir(parents=True)
        row["feedback"] = not_graded_text(row["status"], row["reason"])
        row["page"].write_text(PAGE.format(chapter=html.escape(chapter), text=html.escape(row["feedback"])))
    return rows
