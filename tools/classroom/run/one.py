"""One submission, one command: grade a notebook in its sandbox, write a results file (`grade` per student)."""

from __future__ import annotations

import json
import platform
import shutil
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from tools.classroom.nbgrader.grading import read_scores
from tools.classroom.run.classgrade import CELL_TIMEOUT, grade_class
from tools.exercises.schema import ExerciseError

VERSIONS = ("torch", "transformers", "nbgrader", "nbclient", "ipykernel")


def grade_one(course_dir: Path | str, chapter: str, notebook: Path | str, output: Path | str,
              student: str | None = None, cell_timeout: int = CELL_TIMEOUT, shapes: dict | None = None) -> dict:
    """Put `notebook` in the course as `student`'s submission, grade it like `grade` does, write and return results;
    `shapes` maps a converter (platforms.py) to where its shape of the results goes (None: not written)."""
    course_dir, notebook = Path(course_dir), Path(notebook)
    if not notebook.is_file():
        raise ExerciseError(f"no notebook at {notebook}: pass the path of a student's .ipynb file")
    student = student or notebook.stem.replace(" ", "_")
    folder = course_dir / "submitted" / student / chapter
    folder.mkdir(parents=True, exist_ok=True)
    if notebook.resolve() != (folder / f"{chapter}.ipynb").resolve():
        shutil.copy(notebook, folder / f"{chapter}.ipynb")
    started = time.monotonic()
    record = grade_class(course_dir, chapter, workers=1, students=[student], cell_timeout=cell_timeout,
                         log=lambda line: None)[student]
    score = read_scores(course_dir, chapter).get(student) if record.status in ("graded", "partly graded") else None
    results = {
        "chapter": chapter, "student": student, "notebook": str(notebook), **asdict(record),
        "points": None if score is None else {name: points for name, (points, _) in score["cells"].items()},
        "max_points": None if score is None else {name: most for name, (_, most) in score["cells"].items()},
        "auto_score": None if score is None else score["auto_score"],
        "max_auto_score": None if score is None else score["max_auto_score"],
        "timings": {"grading_s": record.seconds, "command_s": round(time.monotonic() - started, 1)},
        "versions": {"python": platform.python_version(), **{name: _version(name) for name in VERSIONS}},
    }
    Path(output).write_text(json.dumps(results, indent=1))
    for shape, path in (shapes or {}).items():
        if path is not None:
            Path(path).write_text(json.dumps(shape(results), indent=1))
    return results


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
