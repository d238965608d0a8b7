"""The process cap binds without a pids cgroup: as root, each sandbox runs as an unprivileged uid of its own, so the
kernel's RLIMIT_NPROC applies to it (it never applies to root)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tools.classroom.policy import sandbox

# Forks children that wait, until fork fails or 1,000 are running; prints how many it made and its uid.
FORKS = ("import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            time.sleep(5)\n"
         "            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n, os.getuid())")


@pytest.fixture
def scratch(monkeypatch):
    """A sandbox's scratch folder, with the pids cgroup path disabled: the cap must bind without it."""
    monkeypatch.setattr(sandbox, "_pids_cgroup", lambda scratch: None)
    folder = Path(tempfile.mkdtemp(prefix="grading-cap-"))
    folder.chmod(0o755)
    yield folder
    sandbox.release(folder)  # its tmpfs unmounted, the folder removed


def _check_uid(uid: int, scratch: Path, cap: str) -> None:
    if os.geteuid() == 0:  # the sandbox's own unprivileged uid, named in the report
        assert uid == sandbox.sandbox_uid(scratch) and uid >= sandbox.SANDBOX_UID_BASE, (uid, cap)
        assert cap == f"RLIMIT_NPROC {sandbox.PROCESS_LIMIT} as uid {uid}, not root"
    else:
        assert uid == os.geteuid() and cap.startswith("RLIMIT_NPROC ("), cap


def test_a_fork_bomb_stops_at_the_cap_without_a_cgroup(scratch):
    cap = sandbox.process_cap(scratch)[1]
    assert not cap.startswith("none"), cap
    result = subprocess.run([*sandbox.bwrap_command(scratch), sys.executable, "-c", FORKS], capture_output=True,
                            text=True, timeout=120)
    forks, uid = map(int, result.stdout.split())
    assert 0 < forks < sandbox.PROCESS_LIMIT, result.stdout + result.stderr
    _check_uid(uid, scratch, cap)


def test_the_grading_kernel_runs_capped_and_reads_the_book_and_its_checkpoint(scratch):
    """The real kernel manager: its connection file, the helpers and the packaged checkpoint are readable, the
    scratch folder writable, and a fork bomb in a cell stops at the cap."""
    cells = ["import os\nfrom helpers.checkpoint import load_bert\nmodel, tokenizer = load_bert()\n"
             "open('written.txt', 'w').write('ok')\nprint(os.getuid(), tokenizer('hi')['input_ids'])", FORKS]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    client = NotebookClient(notebook, kernel_manager_class=sandbox.kernel_manager_class(scratch), timeout=120,
                            startup_timeout=180)
    client.execute()
    first, second = ("".join(out.get("text", "") for out in cell.outputs) for cell in notebook.cells)
    uid, ids = first.split(" ", 1)
    assert ids.strip() == "[101, 7632, 102]", first  # bert-base-uncased's [CLS] hi [SEP]
    forks, forked_uid = map(int, second.split())
    assert 0 < forks < sandbox.PROCESS_LIMIT, second
    assert int(uid) == forked_uid
    assert (scratch / "written.txt").read_text() == "ok"
    _check_uid(int(uid), scratch, sandbox.process_cap(scratch)[1])


def test_each_sandbox_gets_its_own_uid(tmp_path):
    """Two sandboxes at once never share a count: their uids differ (from their scratch folders' random names)."""
    if os.geteuid() != 0:
        assert sandbox.sandbox_uid(tmp_path / "grading-a") is None
        return
    uids = {sandbox.sandbox_uid(Path(tempfile.mkdtemp(dir=tmp_path, prefix="grading-"))) for _ in range(50)}
    assert len(uids) == 50 and all(uid >= sandbox.SANDBOX_UID_BASE for uid in uids)
