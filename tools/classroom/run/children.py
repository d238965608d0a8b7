"""The grading child of one submission: forked from a warm server whose imports are done, in its own session."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

from tools.classroom.nbgrader.nbconfig import nbgrader_config, scratch_url
from tools.environment import ROOT

# What every grading child imports (nbgrader, nbclient, jupyter_client, nbformat: seconds): once per server.
PRELOAD = ["tools.classroom.nbgrader.nbconfig", "tools.classroom.nbgrader.execute", "tools.classroom.nbgrader.hide",
           "nbgrader.apps", "nbgrader.preprocessors", "nbconvert.preprocessors"]
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork: the child only calls it
PR_SET_PDEATHSIG = 1
_CONTEXT: list = []  # the forkserver context of this process, made on first use


def die_with_parent() -> None:
    """In a grading child: SIGKILL when its parent ends (a stopped Dask worker leaves no grader, nor sandbox)."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


class Forked:
    """A child forked from the server, with Popen's pid and wait(timeout) (TimeoutExpired when still running)."""

    def __init__(self, process: multiprocessing.Process):
        self.process, self.pid, self.args = process, process.pid, "grading child"

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.process.exitcode


def _grade_one(course_dir: Path, chapter: str, student: str, report_path: Path, cell_timeout: int,
               trusted_server: str = "") -> int:
    """In a child process: nbgrader autograde for one student, its Execute step in the sandbox."""
    from nbgrader.apps import NbGraderAPI

    # a worker's scratch course: its own SQLite gradebook, never the course's (only the coordinator writes that)
    api = NbGraderAPI(config=nbgrader_config(course_dir, report_path, cell_timeout, scratch_url(course_dir),
                                             trusted_server))
    result = api.autograde(chapter, student, force=True, create=True)
    if not result["success"]:
        print(result.get("error", "") or result.get("log", ""), file=sys.stderr)
    return 0 if result["success"] else 1


def _forked_main(arguments: list[str], env: dict[str, str], log_path: str) -> None:
    """The child's body: its own session, dying with its parent, output into the log, then the grading."""
    os.setsid()  # Ctrl-C reaches the coordinator only, which stops the children itself
    die_with_parent()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.exit(_grade_one(Path(arguments[0]), arguments[1], arguments[2], Path(arguments[3]), int(arguments[4]),
                        arguments[5]))


def start(arguments: list[str], env: dict[str, str], log_path: Path):
    """Start the grading child of `python -m tools.classroom.run.classgrade ARGUMENTS`; a Forked or a Popen."""
    if multiprocessing.current_process().daemon:  # a daemonic process (some Dask workers) may not fork children
        with open(log_path, "w") as log:
            return subprocess.Popen([sys.executable, "-m", "tools.classroom.run.children", *arguments], cwd=ROOT,
                                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=die_with_parent)
    if not _CONTEXT:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _CONTEXT.append(context)
    process = _CONTEXT[0].Process(target=_forked_main, args=(arguments, env, str(log_path)), daemon=False)
    process.start()
    return Forked(process)


if __name__ == "__main__":
    sys.exit(_grade_one(Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]),
                        sys.argv[6]))
