"""The warm trusted server (warm.py): a fork per submission, as fresh as a new process, ended when its test is."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from tools.classroom.policy import warm
from tools.classroom.policy.relay import TrustedTests

SETUP = "import torch\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(2, 2)\n"


@pytest.fixture(scope="module")
def server():
    started = warm.TrustedServer(SETUP)
    assert started.ready
    yield started
    started.close()


def _running(pid: int) -> int:
    """How many live (not zombie) processes run under `pid`, read from /proc (sandboxed ones have host pids too)."""
    parents = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = 0, {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found += len(frontier)
    return found


def _settles_at(server: warm.TrustedServer, count: int) -> bool:
    for _ in range(100):
        if _running(server.process.pid) == count:
            return True
        time.sleep(0.1)
    return False


def _tests(server_socket: str, setup: str = SETUP) -> TrustedTests:
    scratch = Path(tempfile.mkdtemp(prefix="grading-test-"))
    tests = TrustedTests(scratch, lambda code, timeout: None, server=server_socket)
    tests.start(setup, 300)
    return tests


def test_each_fork_starts_from_the_setup_not_from_the_last_submission(server):
    """What one submission's tests change (here the setup's model) the next fork never sees."""
    first, second = _tests(str(server.socket)), _tests(str(server.socket))
    try:
        assert first.run("one", "assert model.weight.abs().sum() > 0\nmodel.weight.data.zero_()\n", 60, 300)[
            "status"] == "passed"
        assert second.run("two", "assert model.weight.abs().sum() > 0\n", 60, 300)["status"] == "passed"
        # the control: within one fork, the change stays
        assert first.run("three", "assert model.weight.abs().sum() == 0\n", 60, 300)["status"] == "passed"
    finally:
        first.close()
        second.close()


def test_a_fork_past_its_time_limit_is_killed_and_the_next_test_gets_a_new_one(server):
    assert _settles_at(server, 2)  # bwrap's init and the server: no fork of an earlier test left
    tests = _tests(str(server.socket))
    try:
        result = tests.run("loop", "while True:\n    pass\n", 2, 300)
        assert result["ename"] == "CellTimeoutError" and result.get("timed_out"), result
        assert tests.connection is None  # closed, and the server asked to kill it
        assert tests.run("after", "assert model.in_features == 2\n", 60, 300)["status"] == "passed"
        assert tests.process is None  # a new fork, not a process of its own
    finally:
        tests.close()
    assert _settles_at(server, 2)  # the spinning fork (which never reads its socket again) is gone


def test_another_setup_is_refused_by_the_server_and_run_in_a_process_of_its_own(server):
    tests = _tests(str(server.socket), "import torch\nmodel = torch.nn.Linear(3, 1)\n")
    try:
        assert tests.run("other", "assert model.in_features == 3\n", 60, 300)["status"] == "passed"
        assert tests.process is not None and tests.connection is None
    finally:
        tests.close()


def _notebook(setup: str, test: str) -> str:
    cells = [nbformat.v4.new_code_cell(setup, metadata={"nbgrader": {"grade_id": "setup"}}),
             nbformat.v4.new_code_cell(test, metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})]
    return nbformat.writes(nbformat.v4.new_notebook(cells=cells))


def test_the_server_reads_the_setup_and_what_the_tests_import():
    notebook = _notebook(SETUP, "import math\nfrom sklearn.metrics import pairwise as p\nassert True\n")
    assert warm.course_code(notebook) == (SETUP, ("math", "sklearn.metrics"))


def test_a_new_server_removes_the_folders_of_servers_that_are_gone(server):
    gone = warm.TrustedServer(SETUP)
    folders = [gone.run, gone.scratch, *([gone.zygote.folder] if gone.zygote.process else [])]  # its zygote's too
    for process, path in [(gone.process, gone.socket), (gone.zygote.process, gone.zygote.folder / "zygote.sock")]:
        if process is not None:  # as when a Dask worker is stopped: no exit handler removes their folders
            process.kill()
            process.wait()
        for _ in range(50):  # its sandbox ends with it, a moment later; the folder is left
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(str(path)):
                    break
            time.sleep(0.1)
    assert all(folder.exists() for folder in folders)
    newer = warm.TrustedServer(SETUP)
    try:
        assert not any(folder.exists() for folder in folders)
        assert server.scratch.exists() and server.alive()  # the control: a live server's folder stays
        assert not server.zygote.process or server.zygote.folder.exists()
    finally:
        newer.close()
        gone.close()


def test_no_server_for_a_setup_that_fails():
    assert warm.server_for(_notebook("raise RuntimeError('broken setup')", "assert True")) == ""
    assert warm.server_for(_notebook("", "assert True")) == ""
    warm.stop_all()


@pytest.mark.parametrize("shared", [True, False], ids=["coordinators-server-listening", "none-listening"])
def test_a_worker_uses_the_coordinators_server_where_it_listens_else_its_own(server, shared, tmp_path, monkeypatch):
    from tools.classroom.nbgrader import records
    from tools.classroom.run import cluster, submission

    given, started = [], []
    monkeypatch.setattr(cluster, "_scratch_course", lambda chapter, source: tmp_path)
    monkeypatch.setattr(warm, "server_for", lambda notebook: started.append(notebook) or "/its/own.sock")
    monkeypatch.setattr(submission, "grade_student", lambda *args: given.append(args[-1]) or records.Record(
        args[2], "graded"))
    coordinators = str(server.socket) if shared else str(tmp_path / "gone.sock")  # a path with no server behind it
    assert (warm.trusted_problem(coordinators) == "") is shared
    cluster.grade_remote(dict(chapter="c", student="s", source="the source", notebook="{}", digest="d", notes=[],
                              cell_timeout=10, trusted_server=coordinators))
    assert given == [coordinators if shared else "/its/own.sock"]
    assert started == ([] if shared else ["the source"])


def teardown_module():
    for folder in Path(tempfile.gettempdir()).glob("grading-test-*"):
        shutil.rmtree(folder, ignore_errors=True)



def test_a_servers_folder_and_its_zygotes_lie_in_a_run_folder_nobody_else_may_enter(server):
    """Attack review 7: the zygote's folder is not a name in /tmp derived from another (which a local user could take
    first), but `zygote` inside the run's folder, which mkdtemp made with a random name, 0700, for the grader alone."""
    run = server.run
    info = os.lstat(run)
    assert run.parent == Path(tempfile.gettempdir()) and run.name.startswith(warm.RUN_FOLDERS)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert server.scratch.parent == run and server.socket.parent == server.scratch
    if server.zygote.process is None:  # not root: no zygote, a fresh kernel each time
        assert warm.find_zygote(str(server.socket)) == ("", "")
        return
    assert server.zygote.folder == run / warm.ZYGOTE and stat.S_IMODE(os.lstat(server.zygote.folder).st_mode) == 0o700
    assert warm.find_zygote(str(server.socket)) == (str(run / warm.ZYGOTE / "zygote.sock"), "")  # the control
    denied = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                             f"import os; os.mkdir({str(run / 'planted')!r})"], capture_output=True, text=True)
    assert denied.returncode != 0 and "PermissionError" in denied.stderr and not (run / "planted").exists()
