"""The kernel zygote (zygote.py): a forked kernel is as confined as a fresh bwrap one, and dies with its caller."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest
from jupyter_client import BlockingKernelClient
from nbclient import NotebookClient

from tools.classroom.policy import run_zygote, sandbox, warm
from tools.classroom.policy.policy import POLICY
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
def memory():
    import mmap, signal
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # shared memory, which RLIMIT_DATA does not count: only the sandbox's memory cgroup stops it
        area = mmap.mmap(-1, ASKED << 20)
        for step in range(0, ASKED, 64):
            area[step << 20:(step + 64) << 20] = b"x" * (64 << 20)
            os.write(write, b".")
        os._exit(0)
    os.close(write)
    reached = 0
    while os.read(read, 1):
        reached += 64
    status = os.waitpid(pid, 0)[1]
    return [os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, reached]
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
    "limits": [resource.getrlimit(r) for r in (resource.RLIMIT_DATA, resource.RLIMIT_NPROC, resource.RLIMIT_CORE,
                                               resource.RLIMIT_FSIZE)],
    "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
    "network": connects(), "root again": becomes_root(),
    "tmpfs": [os.statvfs(path).f_blocks * os.statvfs(path).f_frsize >> 20 for path in ("/tmp", "/dev/shm")],
    "memory": memory(),
}))
"""
SETUP = "import torch\nfrom helpers.checkpoint import load_bert\n"
PROBE_MB = 768  # the probed kernels' memory cap: the probe asks for half as much again, in shared memory


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
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"{paths}ASKED = {3 * PROBE_MB // 2}\n"
                                                                         + PROBE)])
    scratch = _scratch(zygote)
    manager = sandbox.kernel_manager_class(scratch, memory_mb=PROBE_MB, zygote=zygote)
    NotebookClient(notebook, kernel_manager_class=manager, timeout=120, startup_timeout=120).execute()
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
    for seen in (forked, fresh):  # stopped by the memory cgroup, short of the cap (the kernel holds some of it)
        killed, reached = seen.pop("memory")
        assert killed and reached < PROBE_MB, (killed, reached)
    assert forked == fresh
    assert fresh["own uid"] and fresh["capabilities"] == ["0" * 16] * 3 and fresh["no new privileges"] == "1"
    assert fresh["processes"] == [1, 2]
    assert fresh["kept"] == ["marker.txt"] and not fresh["kept writable"]
    assert fresh["exercises"] == "FileNotFoundError" and not fresh["network"] and not fresh["root again"]
    assert fresh["tmpfs"] == [sandbox.TMPFS_MB] * 2
    assert fresh["limits"][3] == [POLICY.file_mb << 20] * 2
    assert fresh["oom_score_adj"] == "1000"  # the host's OOM killer takes a sandbox before the grader


def _pidfds(uid: int) -> list[int]:
    """A pidfd for each process running as `uid`; a process gone between the listing and its pidfd is skipped."""
    fds = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fd = os.pidfd_open(int(entry.name))
        except ProcessLookupError:  # already gone
            continue
        try:  # the pidfd holds this very process: its owner is read now, or it is gone (and not counted)
            owner = os.stat(f"/proc/{entry.name}").st_uid
        except FileNotFoundError:
            owner = None
        if owner == uid:
            fds.append(fd)
        else:
            os.close(fd)
    return fds


@root_only
def test_a_kernel_dies_with_its_caller_and_a_folder_outside_the_zygotes_is_refused(server):
    zygote = warm.zygote_socket(server)
    scratch = _scratch(zygote)
    kernel_manager = sandbox.kernel_manager_class(scratch, zygote=zygote)()
    kernel_manager.write_connection_file()
    command = kernel_manager.format_kernel_cmd()
    caller = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    uid = sandbox.sandbox_uid(scratch)
    client = BlockingKernelClient(connection_file=kernel_manager.connection_file)
    client.load_connection_file()
    client.start_channels()
    try:  # the kernel answers kernel_info once it runs: no polling
        client.wait_for_ready(timeout=120)
    except RuntimeError as error:
        pytest.fail(f"no kernel started: {error}")
    finally:
        client.stop_channels()
    kernels = _pidfds(uid)  # the kernel's processes run as the sandbox's uid
    assert kernels, "the kernel answered, but no process of its uid runs"
    caller.kill()
    caller.wait()
    try:  # each pidfd turns readable when its process has ended: no /proc read that may find it gone
        ended = [select.select([fd], [], [], 5)[0] for fd in kernels]
    finally:
        for fd in kernels:
            os.close(fd)
    assert all(ended), "the kernel outlived its caller"
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
    ({"scratch": "KERNELS/.."}, "not one of the zygote's kernels' folders"),  # its parent would pass: kernels/
    ({"scratch": "KERNELS/link"}, "not one of the zygote's kernels' folders"),  # a link to a kernel's folder
    ({"cgroups": ["CGROUPS/bert-book-grading-x/../cgroup.procs"]}, "not a sandbox's cgroups"),
    ({"cgroups": "CGROUPS/bert-book-grading-x/cgroup.procs"}, "not a sandbox's cgroups"),
    ({"uid": 999}, "system user"),
    ({"uid": "1900000001"}, "positive integers"),
    ({"policy": {"memory_mb": -1, "processes": 64, "tmpfs_mb": 256}}, "positive integers"),
    ({"policy": {"memory_mb": 2048, "processes": 64}}, "positive integers"),
    ({"cgroups": ["/etc/passwd"]}, "not a sandbox's cgroups"),
    ({"cgroups": ["CGROUPS/bert-book-grader/cgroup.procs"]}, "not a sandbox's cgroups"),  # the grader's own leaf
    ({"cgroups": ["CGROUPS/bert-book-grading-y/cgroup.procs"]}, "not a sandbox's cgroups"),  # another kernel's
])
def test_a_request_for_anything_but_a_kernels_sandbox_is_refused(tmp_path, change, reason):
    from tools.classroom.policy.zygote import _refused

    kernels, cgroups = tmp_path / "kernels", tmp_path / "cgroups"
    (kernels / "grading-x").mkdir(parents=True)
    (kernels / "link").symlink_to(kernels / "grading-x")
    request = {"scratch": str(kernels / "grading-x"), "uid": 1_900_000_001, "policy": sandbox.POLICY.limits(),
               "cgroups": [str(cgroups / "bert-book-grading-x" / "cgroup.procs")]}
    assert _refused(request, kernels, [str(cgroups)]) == ""
    change = json.loads(json.dumps(change).replace("KERNELS", str(kernels)).replace("CGROUPS", str(cgroups)))
    assert reason in _refused(request | change, kernels, [str(cgroups)])


# What a forked kernel inherits that a fresh one would not have: the zygote's argv, modules and random states.
STATE = ("import json, random, sys, numpy, torch\nprint(json.dumps({'random': [random.random(), "
         "float(numpy.random.rand()), float(torch.rand(1))], 'argv0': sys.argv[0].rsplit('/', 1)[-1], "
         "'tools': sorted(m for m in sys.modules if m.split('.')[0] == 'tools'), 'hash': hash('x')}))")


def _run(zygote: str, source: str) -> dict:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    scratch = _scratch(zygote)
    NotebookClient(notebook, kernel_manager_class=sandbox.kernel_manager_class(scratch, zygote=zygote), timeout=60,
                   startup_timeout=120).execute()
    sandbox.release(scratch)
    return json.loads(notebook.cells[0].outputs[0]["text"])


@root_only
def test_forked_kernels_start_as_fresh_ones_do_not_as_copies_of_the_zygote(server):
    first, second = (_run(warm.zygote_socket(server), STATE) for _ in range(2))
    fresh = _run("", STATE)  # a fresh process seeds random, numpy and torch from the system's entropy
    assert all(a != b for a, b in zip(first["random"], second["random"], strict=True)), (first, second)
    assert first["hash"] == second["hash"]  # the string-hash secret is the zygote's (teachers.md), drawn at its start
    assert first["argv0"] == fresh["argv0"] == "ipykernel_launcher.py"
    assert first["tools"] == fresh["tools"] == []


def test_the_fork_guard_counts_the_threads_a_library_started():
    source = ("import threading, torch\ntorch.set_num_threads(2)\ntorch.ones(256, 256) @ torch.ones(256, 256)\n"
              "from tools.classroom.policy.zygote import threads\nprint(threading.active_count(), threads())")
    env = {name: value for name, value in os.environ.items() if not name.endswith("_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", source], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    python, every = map(int, result.stdout.split())
    assert python == 1 and every > 1, result.stdout + result.stderr  # Python sees one; the kernel counts OpenMP's


@root_only
def test_a_tripped_fork_guard_gives_a_fresh_kernel_and_says_so(bwrap, tmp_path):
    """A zygote that answers 'unfit' (more than one thread): the kernel is a fresh bwrap one, the report says why."""
    from tests.classroom.test_second_user import _notebook
    from tools.classroom.nbgrader.execute import SandboxedExecute
    from tools.classroom.protocol import frames

    run = Path(tempfile.mkdtemp(prefix=warm.RUN_FOLDERS))
    trusted = Path(tempfile.mkdtemp(prefix=warm.TRUSTED_FOLDERS, dir=run))
    os.chown(trusted, warm.trusted_owner(trusted), -1)
    folder = run / warm.ZYGOTE
    (folder / "kernels").mkdir(parents=True, mode=0o755)
    folder.chmod(0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "zygote.sock"))
    listener.listen(4)

    def unfit():
        with contextlib.suppress(OSError):
            while True:
                connection = listener.accept()[0]
                frames.send(connection.fileno(), {"exit": 1, "unfit": 3,
                                                  "error": "fork guard: the kernel zygote runs 3 threads"})
                connection.close()

    threading.Thread(target=unfit, daemon=True).start()
    try:
        assert warm.find_zygote(str(trusted / "trusted.sock")) == (
            "", "a fresh kernel: fork guard: the kernel zygote runs 3 threads")
        notebook, report = _notebook(), tmp_path / "report.json"
        SandboxedExecute(report_path=str(report), trusted_server=str(trusted / "trusted.sock")).preprocess(
            notebook, {"metadata": {"path": str(tmp_path)}})
    finally:
        listener.close()
        shutil.rmtree(run)
    seen = json.loads(report.read_text())
    assert seen["kernel"] == "fresh" and any("fork guard" in note for note in seen["notes"]), seen
    assert notebook.cells[2].outputs == []  # graded all the same


def test_a_policy_no_enforcer_can_keep_is_refused():
    from tools.classroom.policy.policy import SandboxPolicy

    with pytest.raises(ValueError, match="network=True"):
        SandboxPolicy(network=True)
    with pytest.raises(ValueError, match="memory_mb=0"):
        SandboxPolicy(memory_mb=0)
    assert SandboxPolicy(memory_mb=512).limits() == {"memory_mb": 512, "processes": 64, "tmpfs_mb": 256,
                                                     "file_mb": 256}


FILL = """
import errno, json, os
home, seen = os.environ["HOME"], {"files": []}
mounts = [line.split() for line in open("/proc/self/mountinfo")]
under = max((m for m in mounts if (home + "/").startswith(m[4].rstrip("/") + "/")), key=lambda m: len(m[4]))
seen["type"], fs = under[under.index("-") + 1], os.statvfs(home)
seen["size MiB"] = fs.f_blocks * fs.f_frsize >> 20
for n in range(12):  # files of up to file_mb + 32 MiB each, 32 MiB at a time: 600 MiB at most in all
    written = 0
    try:
        with open(f"{home}/fill{n}", "wb") as file:
            while written < seen.get("file cap", 1 << 30) and sum(seen["files"]) + written < 600:
                file.write(b"x" * (32 << 20)); file.flush(); os.fsync(file.fileno()); written += 32
    except OSError as error:
        seen.setdefault("errors", []).append(errno.errorcode[error.errno])
    seen["files"].append(written)
    seen.setdefault("file cap", written)
    if sum(seen["files"]) >= 600 or "ENOSPC" in seen.get("errors", []):
        break
print(json.dumps(seen))
"""


@root_only
def test_a_kernels_writable_home_is_a_sized_tmpfs_and_no_file_grows_past_file_mb(server):
    forked, fresh = _run(warm.zygote_socket(server), FILL), _run("", FILL)
    for seen in (forked, fresh):  # on a tmpfs: what the student writes is memory, never the host's disk
        assert seen["type"] == "tmpfs" and seen["errors"][0] == "EFBIG", seen
        assert seen["files"][0] == seen["file cap"] == POLICY.file_mb, seen
    assert fresh["size MiB"] == POLICY.scratch_mb and fresh["errors"][-1] == "ENOSPC", fresh
    assert sum(fresh["files"]) <= POLICY.scratch_mb, fresh
    assert forked["size MiB"] == run_zygote.ZYGOTE_KERNELS * POLICY.scratch_mb, forked
