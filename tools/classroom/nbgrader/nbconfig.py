"""nbgrader's configuration for grading: the gradebook, and its Execute step in the sandbox (execute.py)."""

from __future__ import annotations

import os
from pathlib import Path

from tools.classroom.nbgrader.execute import STARTUP_LIMIT
from tools.classroom.policy.policy import POLICY
from tools.exercises.course import COURSE_ID, gradebook_url

CELL_TIMEOUT = POLICY.cell_s  # seconds for an answer or test cell (the setup cell has POLICY.setup_s)
WARM_CHAPTERS = 12  # warm trusted servers one plain `nbgrader autograde` process keeps (its chapters, in turn)


def configure(config, course_dir: Path | str, db_url: str | None = None) -> None:
    """Set nbgrader's grading configuration: the gradebook (`db_url` or the course's), Execute in the sandbox."""
    import nbgrader.api
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        GetGrades,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )

    from tools.classroom.nbgrader.execute import SandboxedExecute
    from tools.classroom.nbgrader.hide import HideHiddenTests

    # The one private hook left (nbgrader 0.9.6 has no public one): each new gradebook asks `alembic heads` in a new
    # Python (2 CPU s); pinned to the version by tests/classroom/test_course.py
    nbgrader.api.get_alembic_version = alembic_head
    config.CourseDirectory.root = str(course_dir)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.db_url = db_url or gradebook_url(course_dir)
    config.OverwriteCells.add_missing_cells = True
    config.Execute.startup_timeout = STARTUP_LIMIT
    # plain nbgrader (the course's nbgrader_config.py): each chapter's setup run once per nbgrader process, ~0.5 GB each
    config.SandboxedExecute.warm_servers = WARM_CHAPTERS
    config.Autograde.autograde_preprocessors = [SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor,
                                                LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    # feedback goes to students: no hidden check, nor a traceback quoting one
    config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]


def scratch_url(course_dir: Path | str) -> str:
    """The db_url of a worker's scratch course: its own SQLite file, whatever $BERT_BOOK_GRADEBOOK_URL says."""
    return f"sqlite:///{Path(course_dir) / 'gradebook.db'}"


def nbgrader_config(course_dir: Path, report_path: Path | None = None, cell_timeout: int = CELL_TIMEOUT,
                    db_url: str | None = None, trusted_server: str = ""):
    """nbgrader's configuration for one grading run, built here: the course's nbgrader_config.py is not run."""
    from traitlets.config import Config

    config = Config()
    configure(config, course_dir, db_url)
    if report_path:
        config.SandboxedExecute.report_path = str(report_path)
    config.SandboxedExecute.cell_timeout = cell_timeout
    config.SandboxedExecute.trusted_server = trusted_server
    config.SandboxedExecute.warm_servers = 0  # a grading child lives for one submission: the caller's server or none
    return config


def alembic_head() -> str:
    """The revision nbgrader stamps on a new gradebook, read here (nbgrader runs `alembic heads`: 2 CPU s)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()


def nbgrader_main(course_dir: Path | str, args: list[str]) -> int:
    """nbgrader's command line in the course directory (its nbgrader_config.py applies), the grader importable."""
    from nbgrader.apps.nbgraderapp import NbGraderApp

    os.chdir(course_dir)  # sys.path keeps the checkout that `python -m tools.classroom` was started from
    try:
        NbGraderApp.launch_instance(argv=list(args))
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0
