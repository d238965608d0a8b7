"""The nbgrader course: student versions without solutions or hidden tests, source versions with them, LMS zips."""

from __future__ import annotations

import json
import zipfile

import nbformat

from tests.classroom.conftest import CHAPTERS, MAIN, released


def test_student_version_has_no_solutions_and_no_hidden_tests(course):
    for name, chapter in CHAPTERS.items():
        student = released(course, name)
        text = "\n".join(cell.source for cell in student.cells)
        cells = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in student.cells}
        given = chapter.setup + "".join(e.starter + e.prompt + "".join(t.visible for t in e.tests)
                                        for e in chapter.exercises)  # what students may see
        for exercise in chapter.exercises:
            answer = cells[exercise.answer_id]
            assert "raise NotImplementedError()" in answer.source and "BEGIN SOLUTION" not in answer.source
            assert answer.source.startswith(exercise.starter.rstrip("\n")), "the starter code is kept"
            solution_lines = [line.strip() for line in exercise.solution.splitlines()
                              if len(line.strip()) > 25 and line.strip() not in given]
            assert solution_lines and not any(line in text for line in solution_lines), (name, exercise.id)
            for number, test in enumerate(exercise.tests, start=1):
                cell = cells[exercise.test_id(number)]
                assert cell.metadata["nbgrader"]["points"] == test.points and cell.metadata["nbgrader"]["locked"]
                if test.visible.strip():
                    assert test.visible.strip() in cell.source  # visible tests are kept
                hidden = [line.strip() for line in test.hidden.splitlines()
                          if len(line.strip()) > 25 and line.strip() not in given]
                assert not any(line in text for line in hidden), (name, exercise.test_id(number))
                assert "BEGIN HIDDEN TESTS" not in cell.source
            if exercise.manual:
                assert cells[exercise.written_id].source == "YOUR ANSWER HERE"
                assert exercise.manual.answer.strip()[:40] not in text


def test_source_version_holds_the_solutions_and_hidden_tests_between_nbgrader_markers(course):
    source = nbformat.read(course / "source" / MAIN / f"{MAIN}.ipynb", as_version=4)
    solution_cells = [c for c in source.cells if c.metadata["nbgrader"]["solution"] and c.cell_type == "code"]
    assert all("### BEGIN SOLUTION" in c.source and "### END SOLUTION" in c.source for c in solution_cells)
    assert any("### BEGIN HIDDEN TESTS" in c.source for c in source.cells)
    setup = next(c for c in source.cells if c.metadata["nbgrader"]["grade_id"] == "setup")
    assert setup.metadata["nbgrader"]["locked"] and not setup.metadata["nbgrader"]["solution"]


def test_lms_zip_holds_the_student_version(course):
    for name in CHAPTERS:
        with zipfile.ZipFile(course / "lms" / f"{name}.zip") as archive:
            assert sorted(archive.namelist()) == [f"{name}/README.md", f"{name}/{name}.ipynb"]
            assert json.loads(archive.read(f"{name}/{name}.ipynb")) == json.loads(
                (course / "release" / name / f"{name}.ipynb").read_text())


def test_plain_nbgrader_in_the_course_directory_also_grades_in_the_sandbox(course):
    from nbgrader.preprocessors import Execute
    from traitlets.config import PyFileConfigLoader

    from tools.classroom.nbgrader.execute import SandboxedExecute

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    steps = config.Autograde.autograde_preprocessors
    assert SandboxedExecute in steps and Execute not in steps
    assert config.CourseDirectory.root == str(course)


def test_a_new_gradebook_is_stamped_with_the_revision_alembic_names(course, tmp_path):
    """The grader reads the gradebook's alembic revision in-process; `alembic heads` (what nbgrader runs) agrees."""
    import sqlite3
    import subprocess

    from nbgrader.dbutil import _temp_alembic_ini

    from tools.classroom.nbgrader.nbconfig import alembic_head

    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'gradebook.db'}") as ini:  # `heads` reads no database
        heads = subprocess.run(["alembic", "-c", ini, "heads"], capture_output=True, text=True, check=True).stdout
    assert heads.split()[0] == alembic_head()
    with sqlite3.connect(course / "gradebook.db") as db:  # made by the grader's nbgrader_config.py
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(alembic_head(),)]


def test_the_private_nbgrader_hook_left_is_the_pinned_versions():
    """nbconfig.configure replaces nbgrader.api.get_alembic_version (no public hook): the pinned nbgrader is the one
    installed, the function exists with no parameters, and Gradebook looks it up by name when it makes a database,
    so an nbgrader upgrade that moves it fails here, not silently in a class."""
    import importlib.metadata
    import inspect

    import nbgrader.api
    from traitlets.config import Config

    from tools.classroom.nbgrader.nbconfig import alembic_head, configure
    from tools.environment import ROOT

    pins = dict(line.split("==") for line in (ROOT / "requirements-teacher.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert importlib.metadata.version("nbgrader") == pins["nbgrader"] == "0.9.6"
    original = nbgrader.api.get_alembic_version
    assert not inspect.signature(original).parameters
    assert "get_alembic_version()" in inspect.getsource(nbgrader.api.Gradebook.__init__)
    try:
        configure(Config(), ROOT / "_build" / "nowhere")
        assert nbgrader.api.get_alembic_version is alembic_head
    finally:
        nbgrader.api.get_alembic_version = original
