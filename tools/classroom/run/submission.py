"""One submission graded in a child process (children.py) with a wall-clock limit; its record says how it went."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tools.classroom.nbgrader.execute import NOTEBOOK_LIMIT, STARTUP_LIMIT
from tools.classroom.nbgrader.nbconfig import CELL_TIMEOUT
from tools.classroom.nbgrader.records import Record, make_record, real_error
from tools.classroom.run import children
from tools.environment import venv_environment

NBGRADER_OVERHEAD = 300  # seconds for nbgrader's own steps around the notebook: its start, the gradebook, writing
# The outer limit of one submission exceeds everything inside it: the kernel's start, the notebook's own limit (every
# cell and probe), and nbgrader's steps. A notebook that runs out of its own time is partly graded, not lost.
SUBMISSION_LIMIT = STARTUP_LIMIT + NOTEBOOK_LIMIT + NBGRADER_OVERHEAD


RUNNING: set = set()  # the children grading now (children.Forked or subprocess.Popen), stopped at once on Ctrl-C


def _signal(child, number: int) -> None:
    """Signal a child's session (its sandbox in it), or the child alone if it has not made its session yet."""
    try:
        os.killpg(child.pid, number)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, number)


def stop_children() -> None:
    """End every grading child and its sandbox (bwrap dies with its parent): SIGTERM, then SIGKILL."""
    for child in list(RUNNING):
        _signal(child, signal.SIGTERM)
    for child in list(RUNNING):
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal(child, signal.SIGKILL)
            child.wait()


def grade_student(course_dir: Path, chapter: str, student: str, digest: str, notes: list[str],
                  cell_timeout: int = CELL_TIMEOUT, trusted_server: str = "") -> Record:
    """Grade one submission in a child process with a wall-clock limit; its record says how it went."""
    with tempfile.TemporaryDirectory(prefix="grade-report-") as folder:
        report_path, log_path = Path(folder) / "report.json", Path(folder) / "log.txt"
        started = time.monotonic()
        child = children.start([str(course_dir), chapter, student, str(report_path), str(cell_timeout),
                                trusted_server], venv_environment(), log_path)
        RUNNING.add(child)
        try:
            code = child.wait(timeout=SUBMISSION_LIMIT)
            failure = "" if code == 0 else f"nbgrader failed: {real_error(log_path.read_text(errors='replace'))}"
        except subprocess.TimeoutExpired:
            _signal(child, signal.SIGKILL)
            child.wait()
            failure = f"grading took longer than {SUBMISSION_LIMIT} s"
        finally:
            RUNNING.discard(child)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    return make_record(student, digest, round(time.monotonic() - started, 1), report, failure, notes)
