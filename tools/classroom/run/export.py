"""An honest gradebook: every submission with its status and reason; a score only where one was earned."""

from __future__ import annotations

import csv
from pathlib import Path

from tools.classroom.nbgrader.grading import read_scores
from tools.classroom.nbgrader.records import read_records

COLUMNS = ("student", "status", "reason", "score", "max_score", "autograded", "max_autograded", "hand_grading",
           "flags", "not_graded_cells")


def gradebook_rows(course_dir: Path | str, chapter: str) -> list[dict]:
    """One row per submission; the score columns are empty unless the notebook was graded (partly or wholly)."""
    records = read_records(course_dir, chapter)
    try:
        scores = read_scores(course_dir, chapter)
    except Exception:  # no gradebook yet: every row says why it has no score
        scores = {}
    rows = []
    for student in sorted(set(records) | set(scores)):
        record, score = records.get(student), scores.get(student)
        row = dict.fromkeys(COLUMNS, "")
        row["student"] = student
        if record is None:  # in nbgrader's gradebook, but not graded by `python -m tools.classroom grade`
            row["status"] = "not graded"
            row["reason"] = ("graded by plain `nbgrader autograde`, without the checks and statuses; run "
                             "`python -m tools.classroom grade` on it")
        else:
            row.update(status=record.status, reason=record.reason, flags=" | ".join(record.flags),
                       not_graded_cells=" ".join(record.not_graded_cells))
        if row["status"] in ("graded", "partly graded") and score and score["graded"]:
            row.update(score=f"{score['score']:g}", max_score=f"{score['max_score']:g}",
                       autograded=f"{score['auto_score']:g}", max_autograded=f"{score['max_auto_score']:g}",
                       hand_grading="pending" if score["needs_manual_grade"] else "done")
        elif row["status"] in ("graded", "partly graded"):
            row.update(status="not graded", reason="no score in nbgrader's gradebook")
        rows.append(row)
    return rows


def write_gradebook(course_dir: Path | str, chapter: str, target: Path | str) -> list[dict]:
    """Write the chapter's rows as CSV to `target`; return them."""
    rows = gradebook_rows(course_dir, chapter)
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows
