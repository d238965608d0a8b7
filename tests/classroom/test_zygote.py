"""The kernel zygote (zygote.py): a forked kernel is as confined as a fresh bwrap one, and dies with its caller."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tools.classroom import sandbox, warm
from tools.environment import ROOT

# A grader that is not root starts a fresh sandbox per kernel (test_sandbox.py checks that its records say so).
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a kernel zygote runs where the grader is root only")

# What a kernel can see and do, as JSON; its scratch folder and its uid are read relative to its own.
PROBE = r"""
import json, os, resource, socket
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return type(error).__name__
def connects():
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        return True
    except OSError:
        return False
def becomes_root():
    try:
        os.setuid(0)
        return True
    except OSError:
        return False
print(json.dumps({
    "own uid": os.getuid() == os.geteuid() == os.getgid() >= 1_900_000_000, "groups": os.getgroups(),
    "capabilities": [status["CapPrm"], status["CapEff"], status["CapAmb"]], "no new privileges": status["NoNewPrivs"],
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "/tmp": listing("/tmp"), "home": os.getcwd(), "kept": listing(KEPT), "kept writable": os.access(KEPT, os.W_OK),
    "beside its own": listing(os.path.dirname(os.getcwd())),
    "tools": listing(TOOLS), "exercises": listing(EXERCISES), "cgroups": listing("/sys/fs/cgroup/pids"),
    "/dev/shm": listing("/dev/shm"), "writable home": os.access(os.getcwd(), os.W_OK),
    "limits": [resource.getrlimit(r) for r in (resource.RLIMIT_DATA, resource.RLIMIT_NPROC, resource.RLIMIT_CORE)],
    "network": connects(), "root again": becomes_root(),
}))
"""
SETUP = "import torch\nfrom helpers.checkpoint import load_bert\n"


@pytest.fixture(scope="module")
def kept():
    """A folder under /tmp that every kernel reads, as a venv or a checkout there would be: one file, 777."""
    folder = Path(tempfile.mkdtemp(prefix="a venv ", dir="/tmp"))
    (folder / "marker.txt").write_text("read me")
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def server(kept):
    source = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP, metadata={
        "nbgrader": {"grade_id": "setup"}})])
    with pytest.MonkeyPatch.context() as patch:
        reads = sandbox._kernel_reads()
        patch.setattr(sandbox, "_kernel_reads", lambda: [*reads, kept])
        warm.stop_all()
        socket = warm.server_for(nbformat.writes(source))
        assert warm.zygote_socket(socket), "no kernel zygote listens beside the warm trusted server"
        yield socket
        warm.stop_all()


def _scratch(zygote: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="grading-", dir=Path(zygote).parent / "kernels" if zygote else None))
    folder.chmod(0o755)
    return folder


def _probe(zygote: str, kept: Path) -> dict:
    paths = f"TOOLS, EXERCISES, KEPT = {str(ROOT / 'tools')!r}, {str(ROOT / 'exercises')!r}, {str(kept)!r}\n"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(paths + PROBE)])
    scratch = _scratch(zygote)
    NotebookClient(notebook, kernel_manager_class=sandbox.kernel_manager_class(scratch, zygote=zygote), timeout=60,
                   startup_timeout=120).execute()
    sandbox.release(scratch)
    return json.loads(notebook.cells[0].outputs[0]["text"])


@root_only
def test_a_forked_kernel_is_confined_as_a_fresh_bwrap_kernel_is(server, kept):
    forked, fresh = _probe(warm.zygote_socket(server), kept), _probe("", kept)
    for seen in (forked, fresh):  # /tmp holds its own folder and what it reads (a checkout under /tmp), nothing else
        home = Path(seen.pop("home"))
        tops = sorted({path.relative_to("/tmp").parts[0] for path in [*sandbox._kernel_reads(), kept, home]
                       if Path("/tmp") in path.parents})
        assert seen.pop("/tmp") == tops, seen
        beside = seen.pop("beside its own")  # no other kernel's folder, no zygote's socket
        assert beside == (tops if home.parent == Path("/tmp") else [home.name]), beside
    del forked["cgroups"], fresh["cgroups"]  # the fork sees the empty folder its cgroup tree was bound on, bwrap none
    assert fresh["tools"] == "FileNotFoundError"  # the fork's is the empty folder its code was bound on, if not in /tmp
    assert forked["tools"] == ("FileNotFoundError" if Path("/tmp") in ROOT.parents else [])
    del forked["tools"], fresh["tools"]
    assert forked == fresh
    assert fresh["own uid"] and fresh["capabilities"] == ["0" * 16] * 3 and fresh["no new privileges"] == "1"
    assert fresh["processes"] == [1, 2]
    assert fresh["kept"] == ["marker.txt"] and not fresh["kept writable"]
    assert fresh["exercises"] == "FileNotFoundError" and not fresh["network"] and not fresh["root again"]


@root_only
def test_a_kernel_dies_with_its_caller_and_a_folder_outside_the_zygotes_is_refused(server):
    zygote = warm.zygote_socket(server)
    scratch = _scratch(zygote)
    kernel_manager = sandbox.kernel_manager_class(scratch, zygote=zygote)()
    kernel_manager.write_connection_file()
    command = kernel_manager.format_kernel_cmd()
    caller = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    uid = sandbox.sandbox_uid(scratch)
    for _ in range(100):  # the kernel's process runs as the sandbox's uid
        if any(entry.stat().st_uid == uid for entry in Path("/proc").glob("[0-9]*")):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"no kernel started: {caller.stderr.read() if caller.poll() is not None else 'still waiting'}")
    caller.kill()
    caller.wait()
    for _ in range(50):
        if not any(entry.stat().st_uid == uid for entry in Path("/proc").glob("[0-9]*") if entry.exists()):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the kernel outlived its caller")
    outside = json.loads(command[-1]) | {"scratch": tempfile.mkdtemp(prefix="grading-")}
    refused = subprocess.run([*command[:-1], json.dumps(outside)], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 1 and "refused" in refused.stderr, refused.stderr


@root_only
def test_a_pids_cgroup_lives_while_its_folder_does_in_the_temporary_folder_or_a_zygotes(server):
    """A sandbox removes the groups of sandboxes that are gone: not those whose folder is in a kernel zygote's."""
    folders = [_scratch(warm.zygote_socket(server)), _scratch("")]
    groups = [sandbox._pids_cgroup(folder) for folder in folders]
    assert all(groups), "no pids cgroup can be made here"
    another = _scratch("")
    sandbox._pids_cgroup(another)
    assert all(group.exists() for group in groups)
    for folder in folders:
        shutil.rmtree(folder)
    sandbox._pids_cgroup(another)
    assert not any(group.exists() for group in groups)
    shutil.rmtree(another)
    sandbox.release(another)


@pytest.mark.parametrize(("change", "reason"), [
    ({"scratch": "/tmp"}, "not one of the zygote's kernels' folders"),
    ({"uid": 999}, "system user"),
    ({"uid": "1900000001"}, "positive integers"),
    ({"memory_mb": -1}, "positive integers"),
    ({"cgroup": "/etc/passwd"}, "not a sandbox's pids cgroup"),
])
def test_a_request_for_anything_but_a_kernels_sandbox_is_refused(tmp_path, change, reason):
    from tools.classroom.zygote import _refused

    kernels, cgroups = tmp_path / "kernels", tmp_path / "cgroups"
    (kernels / "grading-x").mkdir(parents=True)
    request = {"scratch": str(kernels / "grading-x"), "uid": 1_900_000_001, "memory_mb": 2048, "processes": 64,
               "cgroup": str(cgroups / "bert-book-grading-x" / "cgroup.procs")}
    assert _refused(request, kernels, str(cgroups)) == ""
    assert reason in _refused(request | change, kernels, str(cgroups))
