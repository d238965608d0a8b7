"""The nbgrader course: source notebooks with solutions and hidden tests, its config, student versions, LMS zips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat

from tools.environment import ROOT, venv_environment
from tools.exercises.book_sync import BOOK_DIR
from tools.exercises.schema import EXERCISES_DIR, Chapter, Exercise, ExerciseError, Test, byline, load_chapters

COURSE_DIR = ROOT / "_build" / "assignments"
COURSE_ID = "bert-first-vectors"
GRADEBOOK_URL = "BERT_BOOK_GRADEBOOK_URL"  # a server database shared by graders, as nbgrader's db_url (teachers.md)
NOTEBOOK_METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
    "language_info": {"name": "python"},
}
HIDDEN_ONLY = "# The checks for this part are hidden: they run when your notebook is graded."


def _nbgrader_cell(cell: nbformat.NotebookNode, grade_id: str, *, solution: bool = False, grade: bool = False,
                   locked: bool = False, points: int | None = None) -> nbformat.NotebookNode:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if grade:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    if locked:
        cell.metadata["deletable"] = False
        cell.metadata["editable"] = False
    cell["id"] = grade_id
    return cell


def _header(chapter: Chapter, install: bool) -> str:
    where = "; where they are missing (Google Colab, a download), the first code cell installs them" if install else ""
    return f"""# Exercises: {chapter.title}

These exercises go with the chapter *{chapter.title}* of the book *BERT's First Vectors*.
They need the book's Python environment (its `helpers` package and the packaged checkpoint){where}.

- Write your code where a cell says `# YOUR CODE HERE`, and delete the `raise NotImplementedError()` line.
  Write your explanations where a cell says *YOUR ANSWER HERE*.
- The cell after each answer checks it. Some checks are hidden: they run when your notebook is graded, so a
  passing visible check is a good sign, not a guarantee.
- Before you hand in, run *Kernel → Restart & Run All* and make sure no cell stops with an error you did not
  expect. Keep the file name `{chapter.name}.ipynb`, and do not delete, copy or reorder the given cells.

**Points:** {chapter.points} ({chapter.auto_points} checked automatically, {chapter.manual_points} by your teacher).
**Expected time:** about {chapter.minutes} minutes."""


def _exercise_markdown(number: int, exercise: Exercise) -> str:
    return (f"## Exercise {number}: {exercise.title}\n\n"
            f"{byline(exercise)}\n\n"
            f"**Learning objective:** {exercise.objective}\n\n{exercise.prompt.rstrip()}")


def _test_source(test: Test) -> str:
    visible = test.visible.rstrip("\n") or HIDDEN_ONLY
    if not test.hidden.strip():
        return visible
    return f"{visible}\n### BEGIN HIDDEN TESTS\n{test.hidden.rstrip()}\n### END HIDDEN TESTS"


def install_cell_source(chapter_name: str, book_dir: Path = BOOK_DIR) -> str | None:
    """The chapter's own install cell (tagged 'install'), so that the assignment runs where it lands too; or None."""
    path = book_dir / f"{chapter_name}.ipynb"
    if not path.exists():
        return None
    cells = nbformat.read(path, as_version=4).cells
    return next((cell.source for cell in cells if "install" in cell.metadata.get("tags", [])), None)


def source_notebook(chapter: Chapter, install: str | None = None) -> nbformat.NotebookNode:
    """The instructor's nbgrader notebook: solutions between markers, test cells with points, hidden tests."""
    new_md, new_code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [_nbgrader_cell(new_md(_header(chapter, bool(install))), "header", locked=True)]
    if install:
        cells.append(_nbgrader_cell(new_code(install), "install", locked=True))
    cells.append(_nbgrader_cell(new_code(chapter.setup.rstrip()), "setup", locked=True))
    for number, exercise in enumerate(chapter.exercises, start=1):
        cells.append(_nbgrader_cell(new_md(_exercise_markdown(number, exercise)), f"{exercise.id}-prompt",
                                    locked=True))
        cells.append(_nbgrader_cell(new_code(exercise.answer_source(markers=True)), exercise.answer_id,
                                    solution=True))
        for test_number, test in enumerate(exercise.tests, start=1):
            cells.append(_nbgrader_cell(new_code(_test_source(test)), exercise.test_id(test_number), grade=True,
                                        locked=True, points=test.points))
        if exercise.manual:
            cells.append(_nbgrader_cell(new_md(exercise.manual.prompt.rstrip()), f"{exercise.id}-question",
                                        locked=True))
            answer = (f"{exercise.manual.answer.rstrip()}\n\n**Rubric ({exercise.manual.points} points):** "
                      f"{exercise.manual.rubric.rstrip()}")
            cells.append(_nbgrader_cell(new_md(answer), exercise.written_id, solution=True, grade=True,
                                        points=exercise.manual.points))
    notebook = nbformat.v4.new_notebook(cells=cells, metadata=json.loads(json.dumps(NOTEBOOK_METADATA)))
    nbformat.validate(notebook)
    return notebook


NBGRADER_CONFIG = '''"""nbgrader configuration of the book's course directory.

Written by `python -m tools.classroom assignments` (book/teachers.md); rewritten on every run. Run nbgrader on it
from the book's checkout, which makes the grader importable without any sys.path edit:
    python -m tools.classroom nbgrader --course-dir <this folder> autograde <chapter>
"""

import os

c = get_config()  # noqa: F821 (traitlets provides get_config)
HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "{course_id}"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# Student code runs in the book's sandbox (bubblewrap), even under plain `nbgrader autograde`: see book/teachers.md.
# A student who deletes a test cell gets it back (with a note) and is graded on it, instead of losing its points.
try:
    from tools.classroom.run.classgrade import configure
except ModuleNotFoundError as error:
    raise SystemExit("nbgrader_config.py: the book's grader is not importable here; from the book's checkout run "
                     "`python -m tools.classroom nbgrader --course-dir " + HERE + " <nbgrader command>`") from error

configure(c, HERE)
'''

STUDENT_README = """# {title}: assignment `{name}`

1. Open `{name}.ipynb` in Jupyter, in the book's environment (`make venv` in the book's repository), or in
   Google Colab (or any Jupyter), where the notebook's first code cell installs what it needs.
2. Answer every exercise in its cell; the cell after it checks your answer (more checks are hidden).
3. Run *Kernel → Restart & Run All*, save, and hand in `{name}.ipynb` under this exact name.
"""


def gradebook_url(course_dir: Path | str) -> str:
    """nbgrader's db_url of a course: $BERT_BOOK_GRADEBOOK_URL where set, else the course's own SQLite file."""
    # several graders share the SQLite file: each waits for its lock (300 s) instead of failing
    return os.environ.get(GRADEBOOK_URL) or f"sqlite:///{Path(course_dir) / 'gradebook.db'}?timeout=300"


def run_nbgrader(course_dir: Path | str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course directory (its nbgrader_config.py applies); return the process."""
    command = [sys.executable, "-m", "tools.classroom", "nbgrader", "--course-dir", str(Path(course_dir).resolve()),
               *args]
    result = subprocess.run(command, cwd=ROOT, env=venv_environment(), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ExerciseError(f"`nbgrader {' '.join(args)}` failed (exit {result.returncode}) in {course_dir}:\n"
                            f"{result.stdout}{result.stderr}")
    return result


def write_course(course_dir: Path | str, chapters: list[Chapter]) -> None:
    """Write nbgrader_config.py and source/<chapter>/ (notebook and a short README) for every chapter."""
    course_dir = Path(course_dir)
    course_dir.mkdir(parents=True, exist_ok=True)
    (course_dir / "nbgrader_config.py").write_text(NBGRADER_CONFIG.format(course_id=COURSE_ID))
    for chapter in chapters:
        folder = course_dir / "source" / chapter.name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(chapter, install_cell_source(chapter.name)), folder / f"{chapter.name}.ipynb")
        (folder / "README.md").write_text(STUDENT_README.format(title=chapter.title, name=chapter.name))


def _zip_folder(folder: Path, target: Path, arcroot: str) -> None:
    """A zip with fixed timestamps and sorted entries, so the same release gives the same bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{arcroot}/{path.relative_to(folder).as_posix()}", date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())


def build_assignments(course_dir: Path | str = COURSE_DIR, exercises_dir: Path | str = EXERCISES_DIR) -> list[str]:
    """Write the course directory, run `nbgrader generate_assignment` on every chapter, zip each release for an LMS."""
    course_dir = Path(course_dir)
    chapters = load_chapters(exercises_dir)
    write_course(course_dir, chapters)
    run_nbgrader(course_dir, "generate_assignment", "*", "--force")
    report = []
    for chapter in chapters:
        release = course_dir / "release" / chapter.name
        student = nbformat.read(release / f"{chapter.name}.ipynb", as_version=4)
        leaked = [cell.metadata["nbgrader"]["grade_id"] for cell in student.cells
                  if "BEGIN SOLUTION" in cell.source or "BEGIN HIDDEN TESTS" in cell.source]
        if leaked:
            raise ExerciseError(f"{release}: solutions or hidden tests left in cells {leaked}")
        target = course_dir / "lms" / f"{chapter.name}.zip"
        _zip_folder(release, target, chapter.name)
        report.append(f"{chapter.name}: {len(chapter.exercises)} exercises, {chapter.points} points "
                      f"({chapter.auto_points} autograded), about {chapter.minutes} min -> {target}")
    return report

