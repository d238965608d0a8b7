"""A class graded through a real Dask scheduler and two worker processes: the points local grading gives."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.classroom.conftest import MAIN
from tests.classroom.simulated import kinds, submit_class
from tools.classroom.nbgrader.grading import read_scores
from tools.classroom.run.classgrade import grade_class, read_records
from tools.classroom.run.export import gradebook_rows
from tools.environment import ROOT, venv_environment

CLASS = ("correct", "blank", "partial")  # the kinds graded here; tests/classroom/simulated.py says what each deserves
DASK = str(Path(sys.executable).parent / "dask")


def _wait_for(path: Path, process: subprocess.Popen, seconds: int = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{process.args} did not write {path}: {process.communicate()[0]}")
        time.sleep(0.5)


@contextlib.contextmanager
def dask_cluster(folder: Path):
    """`dask scheduler` and two `dask worker` processes, as on a cluster (one of them daemonic, Dask's default)."""
    scheduler_file = folder / "scheduler.json"
    env = dict(venv_environment(), PYTHONPATH=str(ROOT))
    started = [subprocess.Popen([DASK, "scheduler", "--scheduler-file", str(scheduler_file), "--port", "0",
                                 "--no-dashboard"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)]
    try:
        _wait_for(scheduler_file, started[0])
        address = json.loads(scheduler_file.read_text())["address"]
        for number, daemon in enumerate(("True", "False")):
            started.append(subprocess.Popen(
                [DASK, "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                 "--name", f"worker-{number}"], cwd=ROOT, env=dict(env, DASK_DISTRIBUTED__WORKER__DAEMON=daemon),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        from distributed import Client

        with Client(address) as client:
            client.wait_for_workers(2, timeout=180)
        yield address
    finally:
        for process in reversed(started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 15)
        for process in started:
            process.wait(timeout=60)


@pytest.fixture(scope="module")
def cluster_class(bwrap, course, tmp_path_factory):
    """The small class graded once through the two-worker cluster; the records, the scores, the process counts."""
    root = tmp_path_factory.mktemp("cluster") / "course"
    shutil.copytree(course, root)
    students = {name: kind for name, kind in kinds(root).items() if name in CLASS}
    submit_class(root, students)
    with dask_cluster(tmp_path_factory.mktemp("dask")) as address:
        records = grade_class(root, MAIN, scheduler=address, log=lambda line: None)
    return SimpleNamespace(root=root, kinds=students, records=records, scores=read_scores(root, MAIN))


@pytest.mark.parametrize("student", CLASS)
def test_the_cluster_gives_each_submission_the_points_local_grading_gives(cluster_class, student):
    kind, record = cluster_class.kinds[student], cluster_class.records[student]
    assert record.status == kind["status"], record
    assert cluster_class.scores[student]["auto_score"] == kind["points"], cluster_class.scores[student]["cells"]
    assert read_records(cluster_class.root, MAIN)[student] == record  # the coordinator wrote the record
    row = next(row for row in gradebook_rows(cluster_class.root, MAIN) if row["student"] == student)
    assert row["autograded"] == f"{kind['points']:g}"


def test_the_coordinator_keeps_the_graded_notebooks_for_feedback(cluster_class):
    for student in CLASS:
        assert (cluster_class.root / "autograded" / student / MAIN / f"{MAIN}.ipynb").exists(), student
