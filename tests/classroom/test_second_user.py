"""Another local user's sockets in /tmp: a fake kernel zygote and a fake trusted server are refused, with a reason,
and nothing is graded with them (handles.py, warm.find_zygote, relay.TrustedTests)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from tools.classroom.policy import handles, warm

STRANGER = 65534  # nobody: another local user, unprivileged
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs a root test run (setpriv)")
# The stranger's server: its own folder in /tmp, a socket in it; per connection it gets, a line with the pid of the
# process that connected (SO_PEERCRED), so that only the grader under test's connections are counted, whatever
# other process on the machine (another grader's sweep) connects meanwhile.
LISTENER = r"""
import os, socket, struct, sys
os.makedirs(os.path.join(sys.argv[1], "kernels"), 0o755, exist_ok=True)
os.chmod(sys.argv[1], 0o700)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(os.path.join(sys.argv[1], sys.argv[2]))
listener.listen(8)
print("ready", flush=True)
while True:
    connection = listener.accept()[0]
    pid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    print(f"connected-{pid}", flush=True)
    connection.send(b"!")  # counted: the caller may go
    connection.close()
"""
MINE = f"connected-{os.getpid()}"  # a connection from this test's process: the grader under test, or the control


@contextlib.contextmanager
def planted(folder: Path, name: str):
    """The stranger listening at folder/name; yields a list that holds, once it ended, each connection it got."""
    process = subprocess.Popen(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", "--clear-groups",
                                "/usr/bin/python3", "-c", LISTENER, str(folder), name], stdout=subprocess.PIPE,
                               text=True)
    connections = []
    try:
        assert process.stdout.readline().strip() == "ready"
        assert os.stat(folder / name).st_uid == STRANGER
        yield connections
    finally:
        process.kill()
        connections += [line for line in process.stdout.read().split() if line == MINE]
        process.wait()
        process.stdout.close()
        try:
            warm._remove_stale()  # its server has ended: a sweep finds nothing listening there
            left = (folder / name).exists()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    assert left, "the grader removed another user's folder"


def _knock(path: Path) -> None:
    """Connect, and wait until the listener has counted it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(path))
        assert probe.recv(1) == b"!"


def _notebook() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell
    return nbformat.v4.new_notebook(cells=[
        cell("value = 2\n", metadata={"nbgrader": {"grade_id": "setup"}}),
        cell("answer = value + 1\n", metadata={"nbgrader": {"grade_id": "a", "solution": True}}),
        cell("assert answer == 3\n", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})])


@root_only
def test_a_strangers_trusted_server_and_zygote_are_refused_and_grade_nothing(bwrap, tmp_path):
    from tools.classroom.nbgrader.execute import SandboxedExecute

    run = Path(tempfile.mktemp(prefix=warm.RUN_FOLDERS))  # the stranger's run folder, named as the grader's are
    name = run / f"{warm.TRUSTED_FOLDERS}x"  # a socket the grader might be handed (a Dask task)
    trusted, zygote = name / "trusted.sock", run / warm.ZYGOTE / "zygote.sock"
    with planted(name, trusted.name) as to_server, planted(zygote.parent, zygote.name) as to_zygote:
        assert f"belongs to uid {STRANGER}" in warm.trusted_problem(str(trusted))
        found, why = warm.find_zygote(str(trusted))
        assert found == "" and f"belongs to uid {STRANGER}" in why, why
        with pytest.raises(handles.Refused, match=f"uid {STRANGER}"):
            handles.connect(zygote, 0)
        report = tmp_path / "report.json"
        notebook = _notebook()
        SandboxedExecute(report_path=str(report), trusted_server=str(trusted)).preprocess(
            notebook, {"metadata": {"path": str(tmp_path)}})
        notes = json.loads(report.read_text())["notes"]
        _knock(trusted)  # the control: each fake listens, and counts a connection
        _knock(zygote)
    assert notebook.cells[2].outputs == []  # graded, and passed, by the grader's own fresh trusted process
    assert [note.split(":")[0] for note in notes] == ["refused the kernel zygote at " + str(zygote),
                                                      "refused the trusted server at " + str(trusted)], notes
    assert to_server == to_zygote == [MINE]  # the control's connection only: the grader reached neither
    shutil.rmtree(run, ignore_errors=True)


def test_a_folder_others_may_write_into_or_a_link_is_refused(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    handles.check_folder(folder, os.geteuid())  # the control: the grader's own folder passes
    folder.chmod(0o777)
    with pytest.raises(handles.Refused, match="others may write"):
        handles.check_folder(folder, os.geteuid())
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(handles.Refused, match="not a folder"):
        handles.check_folder(tmp_path / "link", os.geteuid())
    with pytest.raises(handles.Refused, match="belongs to uid"):
        handles.check_folder(tmp_path, os.geteuid() + 1)
    handles.check_ancestors(folder)  # the control: above it, /tmp (sticky) and root's or the grader's folders
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs").chmod(0o777)  # others may write, not sticky: a name in it may be swapped
    with pytest.raises(handles.Refused, match="others may swap"):
        handles.check_ancestors(tmp_path / "theirs" / "run")
    if os.geteuid() == 0:
        os.chown(tmp_path / "theirs", STRANGER, STRANGER)
        with pytest.raises(handles.Refused, match=f"belongs to uid {STRANGER}"):
            handles.check_ancestors(tmp_path / "theirs" / "run")
    folder.chmod(0o711)  # a run folder must be private: nobody else may even enter it
    handles.check_folder(folder, os.geteuid())
    with pytest.raises(handles.Refused, match="others may enter"):
        handles.check_folder(folder, os.geteuid(), private=True)



@root_only
def test_a_strangers_dead_server_folder_is_not_the_graders_to_remove():
    """The sweep of folders whose server is gone (warm._remove_stale) leaves another user's alone; the control: the
    grader's own folder, with nothing listening, is removed."""
    stranger = Path(tempfile.mktemp(prefix=warm.RUN_FOLDERS))
    with planted(stranger / f"{warm.TRUSTED_FOLDERS}x", "trusted.sock"):
        pass  # planted checks, once the stranger's server has ended, that the sweep left its folder
    shutil.rmtree(stranger, ignore_errors=True)
    run = Path(tempfile.mkdtemp(prefix=warm.RUN_FOLDERS))
    own = Path(tempfile.mkdtemp(prefix=warm.TRUSTED_FOLDERS, dir=run))
    os.chown(own, warm.trusted_owner(own), -1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(own / "trusted.sock"))  # bound, never listening: a server that ended
        os.chown(own / "trusted.sock", warm.trusted_owner(own), -1)
    warm._remove_stale()
    assert not run.exists()


@root_only
def test_a_zygote_folder_swapped_after_its_check_gets_no_kernel_folder_and_no_chmod_through_a_link(bwrap, tmp_path,
                                                                                                    monkeypatch):
    """The race of the attack review's item 3: find_zygote passed a folder that, by the time the scratch folder is
    made, is another user's, its kernels/ a link to a folder of root's. Nothing is made or changed there; the
    kernel is a fresh one, and the record says why."""
    from tools.classroom.nbgrader import execute

    target = Path(tempfile.mkdtemp(prefix="root-only-"))  # what the link points at: root's, 0700, empty
    swapped = Path(tempfile.mkdtemp(prefix="swapped-"))
    try:
        (swapped / "kernels").symlink_to(target)
        os.lchown(swapped / "kernels", STRANGER, STRANGER)
        os.chown(swapped, STRANGER, STRANGER)
        monkeypatch.setattr(execute, "find_zygote", lambda server: (str(swapped / "zygote.sock"), ""))
        report = tmp_path / "report.json"
        notebook = _notebook()
        execute.SandboxedExecute(report_path=str(report)).preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
        seen = json.loads(report.read_text())
        assert os.listdir(target) == [] and os.stat(target).st_mode & 0o777 == 0o700 and os.stat(target).st_uid == 0
        assert seen["kernel"] == "fresh" and notebook.cells[2].outputs == [], seen
        assert any(str(swapped / "kernels") in note and "a link or a file" in note for note in seen["notes"]), seen
        (swapped / "kernels").unlink()
        (swapped / "kernels").mkdir(mode=0o755)  # a real folder, the stranger's: refused by its owner
        os.chown(swapped / "kernels", STRANGER, STRANGER)
        os.chown(swapped, 0, 0)  # in a folder of root's, so that kernels/ itself is what is refused
        with pytest.raises(handles.Refused, match=f"kernels belongs to uid {STRANGER}"):
            handles.make_folder(swapped / "kernels", 0, "grading-")
        assert os.listdir(swapped / "kernels") == []
        os.chown(swapped / "kernels", 0, 0)  # the control: root's own kernels/ in a root folder gets its folder
        made = handles.make_folder(swapped / "kernels", 0, "grading-")
        assert made.parent == swapped / "kernels" and os.lstat(made).st_mode & 0o7777 == 0o755
    finally:
        shutil.rmtree(swapped, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)


@root_only
def test_beside_the_graders_own_trusted_folder_a_strangers_zygote_is_refused_for_its_own_reason(tmp_path,
                                                                                                monkeypatch):
    """The run folder is private, so a stranger cannot put a zygote in it; with that check switched off (and the
    folder open to enter), the trusted folder passes (the grader's, as a warm server's), so each zygote check is the
    one that refuses: the stranger's kernels/, then the stranger's socket in a folder of root's, then a link."""
    run = Path(tempfile.mkdtemp(prefix=warm.RUN_FOLDERS))
    own = Path(tempfile.mkdtemp(prefix=warm.TRUSTED_FOLDERS, dir=run))
    os.chown(own, warm.trusted_owner(own), -1)
    trusted, zygote = own / "trusted.sock", run / warm.ZYGOTE / "zygote.sock"
    assert warm.find_zygote(str(trusted)) == ("", "")  # the control: the run folder passes, no zygote in it
    monkeypatch.setattr(warm, "run_folder", lambda socket: run)
    run.chmod(0o711)  # the stranger may enter, as it never can in a real run
    (run / warm.ZYGOTE).mkdir(mode=0o700)
    os.chown(run / warm.ZYGOTE, STRANGER, STRANGER)
    genuine = Path(tempfile.mkdtemp(prefix="genuine-"))  # root's, with root's kernels/: only a link to it is wrong
    try:
        with planted(zygote.parent, zygote.name) as to_zygote:
            refused = f"refused the kernel zygote at {zygote}: "
            assert warm.find_zygote(str(trusted)) == ("", f"{refused}{zygote.parent} belongs to uid {STRANGER}, not "
                                                          "to uid 0, which made it")
            os.chown(zygote.parent, 0, 0)  # a folder of root's, the stranger's kernels/ in it
            assert warm.find_zygote(str(trusted)) == ("", f"{refused}{zygote.parent}/kernels belongs to uid "
                                                          f"{STRANGER}, not to uid 0, which made it")
            os.chown(zygote.parent / "kernels", 0, 0)  # root's kernels/ in a root folder: the socket is the stranger's
            zygote.parent.chmod(0o755)
            found, why = warm.find_zygote(str(trusted))
            assert found == "" and why.startswith(f"refused the kernel zygote at {zygote}: {zygote} is not a socket "
                                                  f"of uid 0 (uid {STRANGER}"), why
            _knock(zygote)  # the control: it listens, and counts a connection
        assert to_zygote == [MINE], to_zygote  # the control's only: find_zygote never connected
        (genuine / "kernels").mkdir(mode=0o755)
        zygote.parent.symlink_to(genuine)
        found, why = warm.find_zygote(str(trusted))
        assert why == f"refused the kernel zygote at {zygote}: {zygote.parent} is not a folder (a link or a file)"
    finally:
        for path in (zygote.parent, run):
            if path.is_symlink():
                path.unlink()
            shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(genuine, ignore_errors=True)


def test_kernel_json_is_written_through_a_descriptor_never_through_a_link(bwrap, tmp_path):
    """jupyter_client writes the connection file by path; the grader's kernel manager writes it into a private
    folder and moves the bytes through a descriptor of the scratch folder: a link left there is removed, never
    followed; a folder another user owns is refused."""
    from tools.classroom.policy import sandbox

    scratch = Path(tempfile.mkdtemp(prefix="grading-"))
    scratch.chmod(0o755)
    target = tmp_path / "target"
    target.write_text("root's")
    (scratch / "kernel.json").symlink_to(target)
    try:
        manager = sandbox.kernel_manager_class(scratch)()
        manager.write_connection_file()
        info = os.lstat(scratch / "kernel.json")
        owner = sandbox.sandbox_uid(scratch)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600, info
        assert info.st_uid == (os.geteuid() if owner is None else owner) and target.read_text() == "root's"
        written = json.loads((scratch / "kernel.json").read_text())
        assert manager.connection_file == str(scratch / "kernel.json")
        assert written["key"] == manager.session.key.decode()
        assert written["transport"] == "ipc" and written["ip"] == str(scratch / "kernel")
        if os.geteuid() == 0:
            os.chown(scratch, STRANGER, STRANGER)
            with pytest.raises(handles.Refused, match=f"belongs to uid {STRANGER}"):
                manager.write_connection_file()
    finally:
        sandbox.release(scratch)


PEEK = r"""
import os, sys
for path in sys.argv[1:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(1)
        print("read", path)
    except PermissionError:
        print("denied", path)
"""


@root_only
def test_a_fresh_kernels_folder_and_its_trusted_process_are_closed_to_other_users(bwrap, tmp_path, monkeypatch):
    """Attack review 46b-1: a fresh kernel's scratch folder and a fresh trusted process's lie in private run folders
    (never listable in /tmp), their tmpfs is 0700, the request the grader writes is 0600: after a relayed call,
    another user can neither list the folders nor read the request (the control: the grader can)."""
    from tools.classroom.nbgrader.execute import SandboxedExecute
    from tools.classroom.policy.relay import TrustedTests

    seen = []
    relay = TrustedTests._relay

    def peeking(self, message, deadline):
        reply = relay(self, message, deadline)
        paths = [self.kernel_scratch.parent, self.kernel_scratch, self.kernel_scratch / "grader-request.pkl",
                 self.scratch.parent, self.scratch]
        assert all(os.path.exists(path) for path in paths)  # the control: there, and the grader reads them
        seen.append(subprocess.run(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", "--clear-groups",
                                    "/usr/bin/python3", "-c", PEEK, *map(str, paths)], capture_output=True,
                                   text=True).stdout.split("\n"))
        seen.append(stat.S_IMODE(os.stat(self.kernel_scratch / "grader-request.pkl").st_mode))
        return reply

    monkeypatch.setattr(TrustedTests, "_relay", peeking)
    cell = nbformat.v4.new_code_cell
    notebook = nbformat.v4.new_notebook(cells=[
        cell("x = 1\n", metadata={"nbgrader": {"grade_id": "setup"}}),
        cell("def f(v):\n    return v + 1\n", metadata={"nbgrader": {"grade_id": "a", "solution": True}}),
        cell("assert f(2) == 3\n", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})])
    report = tmp_path / "report.json"
    SandboxedExecute(report_path=str(report)).preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    assert json.loads(report.read_text())["kernel"] == "fresh" and notebook.cells[2].outputs == []
    assert seen and all(line.startswith("denied") for line in seen[0] if line), seen
    assert seen[1] == 0o600, seen
