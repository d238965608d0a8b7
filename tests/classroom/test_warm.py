"""The warm trusted server (warm.py): a fork per submission, as fresh as a new process, ended when its test is."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from tools.classroom.policy import runs, warm
from tools.classroom.policy.relay import TrustedTests
from tools.environment import ROOT

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
    _made_by_a_process_that_is_gone(gone.run)  # a run of a live maker is its own (server_for replaces its servers)
    newer = warm.TrustedServer(SETUP)
    try:
        assert not any(folder.exists() for folder in folders)
        assert server.scratch.exists() and server.alive()  # the control: a live server's folder stays
        assert not server.zygote.process or server.zygote.folder.exists()
    finally:
        newer.close()
        gone.close()


def _made_by_a_process_that_is_gone(run: Path) -> None:
    """Stamp `run` (runs.py's .maker) with a process that has ended, as a stopped Dask worker's folder is."""
    ended = subprocess.Popen(["sleep", "60"])
    stamp = f"{ended.pid} {runs.start_time(ended.pid)} {runs._where()}"
    ended.kill()
    ended.wait()
    (run / runs.STAMP).write_text(stamp)


def _dead_socket(run: Path) -> Path:
    """A trusted server's folder in `run` whose socket is bound but never listens: a server that ended."""
    own = Path(tempfile.mkdtemp(prefix=warm.TRUSTED_FOLDERS, dir=run))
    os.chown(own, warm.trusted_owner(own), -1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(own / "trusted.sock"))
    os.chown(own / "trusted.sock", warm.trusted_owner(own), -1)
    return own


def test_a_run_whose_maker_still_runs_is_not_swept_though_none_of_its_servers_listens():
    """Attack review 2, G1: another grader process's run (or this one's own shared run) between its last server and
    the next one is that process's; the sweep leaves it while its maker runs, and removes it once the maker is gone."""
    maker = subprocess.Popen([sys.executable, "-c", "import sys\nfrom tools.classroom.policy import runs\n"
                              "print(runs.make(), flush=True)\nsys.stdin.read()"], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    run = Path(maker.stdout.readline().strip())
    try:
        _dead_socket(run)
        warm._remove_stale()
        assert run.is_dir()  # main: removed (nothing listens), and the maker's next server made in a free name
    finally:
        maker.communicate("")
    warm._remove_stale()  # the control: its maker gone, the same run is swept
    assert not run.exists()


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


def _zygotes() -> list[int]:
    """The kernel zygotes this test process started, however deep (their Python, not bwrap's processes); not the
    children a zygote forks for each caller (a "fit" check's lives a moment after it answered: same command line)."""
    parents, commands = {}, {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry.name)], commands[int(entry.name)] = int(fields[1]), words
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        mine |= frontier
    zygotes = {pid for pid in mine if Path(os.fsdecode(commands[pid][0])).name.startswith("python")
               and commands[pid][1:4] == [b"-m", b"tools.classroom.policy.zygote", b"serve"]}
    return sorted(pid for pid in zygotes if parents[pid] not in zygotes)


def _graded(server_socket: str, setup: str, tmp_path: Path) -> tuple[nbformat.NotebookNode, dict]:
    """A one-exercise notebook with `setup` (which sets `value` to 2), graded beside the server: it, and the report."""
    from tools.classroom.nbgrader.execute import SandboxedExecute

    cell = nbformat.v4.new_code_cell
    notebook = nbformat.v4.new_notebook(cells=[
        cell(setup, metadata={"nbgrader": {"grade_id": "setup"}}),
        cell("answer = value + 1\n", metadata={"nbgrader": {"grade_id": "a", "solution": True}}),
        cell("assert answer == 3\n", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})])
    report = tmp_path / "report.json"
    SandboxedExecute(report_path=str(report), trusted_server=server_socket).preprocess(
        notebook, {"metadata": {"path": str(tmp_path)}})
    return notebook, json.loads(report.read_text())


ONE = "value = 2\n"
OTHER = "import sqlite3\nvalue = sqlite3.connect(':memory:').execute('select 2').fetchone()[0]\n"  # _sqlite3.so


@pytest.mark.skipif(os.geteuid() != 0, reason="a kernel zygote runs where the grader is root only")
def test_one_process_s_chapters_share_one_zygote_which_ends_with_its_last_server(bwrap, tmp_path):
    """Two chapters' servers in one process: one run folder, one kernel zygote (importing the first chapter's setup
    only); the second chapter's kernel imports what its setup needs itself and grades right; closing one server
    keeps the zygote, closing the last ends it and removes the run's folder."""
    warm.stop_all()
    before = _zygotes()
    try:
        first = warm.server_for(_notebook(ONE, "assert True"), keep=2)
        second = warm.server_for(_notebook(OTHER, "assert True"), keep=2)
        assert first and second and first != second
        run = Path(first).parent.parent
        assert Path(second).parent.parent == run
        zygote = warm.zygote_socket(first)
        assert zygote == warm.zygote_socket(second) == str(run / warm.ZYGOTE / "zygote.sock")
        started = [pid for pid in _zygotes() if pid not in before]
        assert len(started) == 1, started  # main: one per server
        assert "_sqlite3" not in Path(f"/proc/{started[0]}/maps").read_text()  # the zygote lacks what OTHER imports
        for setup, folder in ((OTHER, "other"), (ONE, "one")):
            (tmp_path / folder).mkdir()
            notebook, report = _graded(second if setup == OTHER else first, setup, tmp_path / folder)
            assert report["kernel"] == "forked", report
            assert [cell.outputs for cell in notebook.cells] == [[], [], []]  # every cell ran, the test passed
            assert all(cell.execution_count for cell in notebook.cells[:2])
        assert warm.server_for(_notebook("value = 3\n", "assert True"), keep=2)  # the oldest server closed
        assert not Path(first).exists() and Path(second).exists() and warm.zygote_socket(second) == zygote
        assert [pid for pid in _zygotes() if pid not in before] == started  # the same zygote, alive
    finally:
        warm.stop_all()
    assert not run.exists()
    assert all(_settles_gone(pid) for pid in started)  # killed: its sandbox ends a moment later


def test_the_shared_zygote_imports_what_every_chapter_s_setup_imports(tmp_path):
    """Plain nbgrader hands the course's source notebooks: their setups' imports, each once; a damaged one skipped."""
    (tmp_path / "a.ipynb").write_text(_notebook("import torch\nfrom helpers import checkpoint\n", "import math"))
    (tmp_path / "b.ipynb").write_text(_notebook("import torch\nimport sqlite3\n", "assert True"))
    (tmp_path / "broken.ipynb").write_text("{ not json")
    paths = tuple(sorted(tmp_path.glob("*.ipynb"))) + (tmp_path / "missing.ipynb",)
    assert warm.course_imports(paths) == ["helpers", "sqlite3", "torch"]  # the test cells' `math` is not a setup's


def test_plain_nbgrader_hands_the_course_s_source_notebooks_to_its_server(tmp_path, monkeypatch):
    """The plain nbgrader path (warm_servers): the assignment's source notebook, and every chapter's for the zygote."""
    from traitlets.config import Config

    from tools.classroom.nbgrader.execute import SandboxedExecute

    for name in ("a", "b"):
        (tmp_path / "source" / name).mkdir(parents=True)
        (tmp_path / "source" / name / f"{name}.ipynb").write_text(_notebook(f"value = '{name}'\n", "assert True"))
    (tmp_path / "submitted" / "s" / "a").mkdir(parents=True)  # a student's: never read for the zygote's imports
    (tmp_path / "submitted" / "s" / "a" / "a.ipynb").write_text(_notebook("import sqlite3\n", "assert True"))
    calls = []
    monkeypatch.setattr(warm, "server_for", lambda notebook, keep, course: calls.append((notebook, keep, course)) or
                        "/the/server.sock")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    execute = SandboxedExecute(warm_servers=3, config=config)
    assert execute._warm_server({"nbgrader": {"assignment": "a", "notebook": "a"}}) == "/the/server.sock"
    source = tmp_path / "source"
    assert calls == [((source / "a" / "a.ipynb").read_text(), 3, (source / "a" / "a.ipynb", source / "b" / "b.ipynb"))]


def _mounts_under(folder: Path) -> list[str]:
    fields = (line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return sorted((mount[4] for mount in fields if mount[4].startswith(f"{folder}/") or mount[4] == str(folder)),
                  key=len, reverse=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a second user's uid, and mounts, need a root grader")
def test_a_shared_run_folder_removed_and_taken_by_another_user_is_never_used_again(bwrap, tmp_path):
    """Attack review F1: the run's folder goes while its servers live, and uid 65534 makes one of that name (0777).
    The next chapter's server makes and mounts nothing in it: the old run's servers and zygote end, a new run grades."""
    warm.stop_all()
    first = warm.server_for(_notebook(ONE, "assert True"), keep=2)
    run, old = Path(first).parent.parent, warm._SHARED[0]
    planted = sorted({"zygote/kernels/mine", f"{Path(first).parent.name}/mine"})  # what its paths would name
    zygote = old.zygote.process.pid if old.zygote.process else None
    gone = tmp_path / "gone"
    run.rename(gone)  # removed under the grader (its mounts go along, for the clean-up below)
    child = os.fork()
    if child == 0:  # the second local user takes the free name
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.mkdir(run)
            os.chmod(run, 0o777)
            for path in planted:
                os.makedirs(run / path)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert os.lstat(run).st_uid == 65534
    try:
        setup = "value = 1 + 1\n"
        second = warm.server_for(_notebook(setup, "assert True"), keep=2)
        assert _mounts_under(run) == []  # main: its folder made in it, mounted, chowned
        # the old run's server and zygote closed without a path: nothing of the user's removed, nothing of ours made
        assert sorted(str(path.relative_to(run)) for path in run.rglob("mine")) == planted, list(run.rglob("*"))
        assert len(list(run.glob("*"))) == 2
        assert second and Path(second).parent.parent != run and warm.run_folder(second)  # the grader's, 0700
        assert list(warm._SERVERS) == [setup] and old.zygote.process is None  # the old run's server and zygote end
        assert zygote is None or _settles_gone(zygote)
        notebook, report = _graded(second, setup, tmp_path)
        assert report["kernel"] == "forked", report  # the new run's zygote
        assert [cell.outputs for cell in notebook.cells] == [[], [], []]
    finally:
        warm.stop_all()
        for folder in (run, gone):
            for mount in _mounts_under(folder):
                subprocess.run(["umount", "--lazy", mount], check=False)
            shutil.rmtree(folder, ignore_errors=True)


def test_a_chapter_s_server_that_died_leaves_the_shared_run_to_the_next_chapter_s(bwrap):
    """Attack review 2, G1: with the only server of the shared run dead, the next server's sweep removed the run
    (nothing listened) and the server's folder was then made in a name anyone could take; now the run stays."""
    warm.stop_all()
    try:
        first = warm.server_for(_notebook(ONE, "assert True"), keep=2)
        run, dead = Path(first).parent.parent, warm._SERVERS[ONE].process
        dead.kill()
        dead.wait()
        for _ in range(50):  # its sandbox ends with it, a moment later
            if warm._knock(first) is not None:
                break
            time.sleep(0.1)
        second = warm.server_for(_notebook("value = 1 + 1\n", "assert True"), keep=2)
        assert second and Path(second).parent.parent == run and warm.trusted_problem(second) == ""
        assert warm._SHARED[0].folder == run and warm._SHARED[0].intact()
    finally:
        warm.stop_all()
    assert not run.exists()


def _settles_gone(pid: int) -> bool:
    """Whether the zygote `pid` is gone within 5 s (killed: its sandbox ends a moment later)."""
    for _ in range(50):
        if pid not in _zygotes():
            return True
        time.sleep(0.1)
    return False


def test_a_zygote_that_fails_to_start_leaves_the_shared_run_s_folder_for_the_next_server(tmp_path, monkeypatch):
    """Attack review F1, case 1: without a zygote (its folder removed), closing the last server keeps the shared run's
    folder (sandbox.release removed it, and the next server was made in a path anyone could take)."""
    from tools.classroom.policy import sandbox

    def fails(*args, **kwargs):
        raise OSError("the zygote could not start")

    warm.stop_all()
    monkeypatch.setattr(sandbox, "zygote_command", fails)
    try:
        first = warm.server_for(_notebook(ONE, "assert True"), keep=1)
        run = Path(first).parent.parent
        second = warm.server_for(_notebook("value = 1 + 1\n", "assert True"), keep=1)  # the first one closed
        assert not Path(first).exists() and run.is_dir() and warm._SHARED[0].folder == run
        assert second and Path(second).parent.parent == run and warm.trusted_problem(second) == ""
    finally:
        warm.stop_all()
    assert not run.exists()
