"""Scheduling a class on Dask: workers grade into a private scratch course, the coordinator saves into the real one."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import shutil
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

from tools.classroom.nbgrader.nbconfig import nbgrader_config, scratch_url
from tools.classroom.nbgrader.records import real_error
from tools.classroom.policy import warm
from tools.classroom.run import submission

_SCRATCH: dict[tuple[str, str], Path] = {}  # (chapter, source digest) -> this worker process's scratch course


def _scratch_course(chapter: str, source: str) -> Path:
    """A course of this process with the chapter's source notebook generated into its own gradebook (cached)."""
    key = (chapter, hashlib.sha256(source.encode()).hexdigest())
    if key not in _SCRATCH:
        from nbgrader.apps import NbGraderAPI

        root = Path(tempfile.mkdtemp(prefix="grading-course-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        folder = root / "source" / chapter
        folder.mkdir(parents=True)
        (folder / f"{chapter}.ipynb").write_text(source)
        config = nbgrader_config(root, db_url=scratch_url(root))
        result = NbGraderAPI(config=config).generate_assignment(chapter, force=True)
        if not result["success"]:
            raise RuntimeError(f"generate_assignment failed in {root}: {real_error(result['log'])}")
        _SCRATCH[key] = root
    return _SCRATCH[key]


def grade_remote(task: dict) -> dict:
    """On a worker: grade one submission in its sandbox in a scratch course; its record and graded notebook."""
    # task: chapter, student, source (the teacher's notebook), notebook (the submission), digest, notes, cell_timeout,
    # trusted_server (the coordinator's warm server: shared by the workers on its machine)
    chapter, student = task["chapter"], task["student"]
    course = _scratch_course(chapter, task["source"])
    submitted = course / "submitted" / student / chapter
    submitted.mkdir(parents=True, exist_ok=True)
    (submitted / f"{chapter}.ipynb").write_text(task["notebook"])
    try:
        server = task.get("trusted_server", "")
        if warm.trusted_problem(server):  # a worker on another machine, or a socket not the grader's: its own server
            server = warm.server_for(task["source"])
        record = submission.grade_student(course, chapter, student, task["digest"], task["notes"],
                                          task["cell_timeout"], server)
        graded = course / "autograded" / student / chapter / f"{chapter}.ipynb"
        notebook = graded.read_text() if graded.exists() else None
    finally:
        for where in ("submitted", "autograded"):
            shutil.rmtree(course / where / student, ignore_errors=True)
    return {"record": asdict(record), "notebook": notebook}


class ReplayOutputs(Preprocessor):
    """nbgrader's Execute step on the coordinator: the outputs of the notebook a worker ran, cell by cell."""

    enabled = Bool(True)
    executed_path = Unicode("", help="the notebook graded on a worker").tag(config=True)

    def preprocess(self, nb, resources):
        executed = nbformat.read(self.executed_path, as_version=4)
        shape = [(cell.cell_type, cell.source) for cell in nb.cells]
        if shape != [(cell.cell_type, cell.source) for cell in executed.cells]:
            raise ValueError(f"{self.executed_path}: the worker's notebook has other cells than the submission")
        for cell, ran in zip(nb.cells, executed.cells, strict=True):
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
        nb.metadata["language_info"] = executed.metadata.get("language_info", {})
        return nb, resources


def save_graded(course_dir: Path, chapter: str, student: str, notebook: str) -> str:
    """Save a notebook graded on a worker into the course's gradebook (nbgrader autograde, replayed); '' or why not."""
    from nbgrader.apps import NbGraderAPI

    with tempfile.TemporaryDirectory(prefix="graded-") as folder:
        path = Path(folder) / f"{chapter}.ipynb"
        path.write_text(notebook)
        config = nbgrader_config(course_dir)
        config.Autograde.autograde_preprocessors = [
            ReplayOutputs if step.__name__ == "SandboxedExecute" else step
            for step in config.Autograde.autograde_preprocessors]
        config.ReplayOutputs.executed_path = str(path)
        with warnings.catch_warnings():  # nbgrader's own SQLAlchemy warnings about its session: not ours to fix
            warnings.simplefilter("ignore")
            result = NbGraderAPI(config=config).autograde(chapter, student, force=True, create=True)
    return "" if result["success"] else f"saving into the gradebook failed: {real_error(result['log'])}"


@contextlib.contextmanager
def open_client(workers: int, scheduler: str | None = None):
    """A Dask client: on the scheduler at `scheduler` (with Dask's configured security: TLS, book/teachers.md), or on
    a local cluster of `workers` processes, 1 thread each, that only this process can reach."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    if scheduler:
        with Client(scheduler) as client:
            yield client
        return
    # A worker runs the tasks it is sent (pickled) as the grader, root on the fast path: the scheduler and workers
    # speak TLS with a certificate made here, in memory, and require it of every peer; another local user has none.
    security = Security.temporary()
    # not daemonic: a worker forks each submission's grading child from its warm server (children.py). No HTTP
    # route: Dask always opens an HTTP server beside the TLS port, without authentication (task pages naming
    # students, metrics, the workers' call stacks); with no routes it answers 404 to every local user.
    quiet = {"distributed.worker.daemon": False, "distributed.scheduler.http.routes": [],
             "distributed.worker.http.routes": []}
    with dask.config.set(quiet), \
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", silence_logs=40,
                         dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0",
                                                                   "dashboard": False},
                         security=security, protocol="tls://") as cluster, \
            Client(cluster, security=security) as client:
        yield client


def stop_running() -> int:
    """On a worker (Client.run): end the grading children it runs now; how many there were."""
    count = len(submission.RUNNING)
    submission.stop_children()
    return count
