"""Memory is bounded per sandbox, not per process only: /dev/shm holds its size, and many processes that together
ask for several times the cap (less than the machine has, in case the cap fails) are stopped by the memory cgroup,
with "memory" in the record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tools.classroom.nbgrader.records import make_record
from tools.classroom.policy import cgroups, sandbox

CAP_MB = 512  # the sandbox's cap here; RLIMIT_DATA is the same per process, so each hog below passes it alone
SHM = """
written = 0
try:
    for n in range(8):  # 1 GiB asked for, in files of 128 MiB (each under RLIMIT_FSIZE), 64 MiB at a time
        with open(f"/dev/shm/fill{n}", "wb") as file:
            for _ in range(2):
                file.write(b"x" * (64 << 20))
                file.flush()
                written += 64
except OSError as error:
    print("stopped:", error.strerror)
print("written MiB:", written)
"""
GANG = """
import os, signal
children = []
for _ in range(4):  # 4 x 300 MiB: 2.3 times the cap
    pid = os.fork()
    if pid == 0:
        hog = bytearray(b"x") * (300 << 20)
        import time
        time.sleep(5)
        os._exit(0)
    children.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
print("killed:", sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in statuses))
"""


def _graded(tmp_path) -> tuple[list[str], dict]:
    from tools.classroom.nbgrader.execute import SandboxedExecute

    cell = nbformat.v4.new_code_cell
    notebook = nbformat.v4.new_notebook(cells=[
        cell("x = 1\n", metadata={"nbgrader": {"grade_id": "setup"}}),
        cell(SHM, metadata={"nbgrader": {"grade_id": "shm", "solution": True}}),
        cell(GANG, metadata={"nbgrader": {"grade_id": "gang", "solution": True}})])
    report = tmp_path / "report.json"
    SandboxedExecute(report_path=str(report), memory_mb=CAP_MB, cell_timeout=120).preprocess(
        notebook, {"metadata": {"path": str(tmp_path)}})
    outputs = ["".join(out.get("text", "") for out in cell.outputs) for cell in notebook.cells[1:]]
    return outputs, json.loads(report.read_text())


def test_dev_shm_and_a_gang_of_processes_stop_at_the_sandboxs_memory(bwrap, tmp_path):
    (shm, gang), report = _graded(tmp_path)
    assert "No space left on device" in shm and int(shm.split("written MiB:")[1]) <= sandbox.TMPFS_MB, shm
    record = make_record("someone", "", 1.0, report, "", [])
    if report["memory_cap"].startswith("none"):  # no memory cgroup here: the record says so, nothing stops the gang
        assert "no memory cgroup" in record.memory_cap and "all of the machine's memory" in record.memory_cap
        assert "killed: 0" in gang, (record, gang)
        return
    assert record.memory_cap == f"memory cgroup ({CAP_MB} MiB for all its processes, no swap, inside the grader's own)"
    assert int(gang.split("killed:")[1]) >= 1, gang  # the cgroup stopped some; RLIMIT_DATA alone stops none
    assert any("memory" in flag for flag in record.flags), record.flags


def _groups(pid: int | str) -> dict[str, str]:
    """A process's cgroup path per hierarchy ('' for cgroup v2's), from /proc/<pid>/cgroup."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return {name: path for _, names, path in (line.split(":", 2) for line in lines) for name in names.split(",")}


def test_a_sandboxs_groups_are_made_inside_the_graders_own_cgroup(bwrap):
    """A sandbox stays under the limits put on the grader (a slice's memory, CPU, pids): its groups are sub-groups
    of the grader's own, in every hierarchy where they are made; where none can be, the record says why."""
    scratch = Path(tempfile.mkdtemp(prefix="grading-"))
    command = sandbox.bwrap_command(scratch, CAP_MB) + [sys.executable, "-c", "print('in', flush=True); input()"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "in\n"  # it runs, in its groups (bwrap itself is the joined process)
        own, inside = _groups("self"), _groups(process.pid)
    finally:
        process.communicate("")
        sandbox.release(scratch)
    made = [name for name in ("memory", "pids") if cgroups.parent(name) is not None]
    for name in made:
        key = name if name in own else ""
        assert inside[key].startswith(f"{own[key].rstrip('/')}/{cgroups.PREFIX}grading-"), (name, own, inside)
    if "memory" not in made:
        assert "under the grader's own" in sandbox.memory_cap(scratch, CAP_MB)[1]


@pytest.mark.parametrize(("table", "controller", "expected"), [
    ("4:memory:/process_api/a1\n8:pids:/\n0::/", "memory", "/process_api/a1"),
    ("4:cpu,cpuacct:/x\n0::/", "cpuacct", "/x"),
    ("0::/system.slice/grader.scope", "", "/system.slice/grader.scope"),
])
def test_the_graders_own_group_is_read_from_its_cgroup_table(table, controller, expected):
    assert cgroups._own(controller, table) == expected


def _fake_v2(tmp_path, procs: str, subtree: str = "") -> Path:
    """A cgroup v2 group made of plain files: its controllers, its sub-groups' controllers, its processes."""
    base = tmp_path / f"group-{len(list(tmp_path.iterdir()))}"
    base.mkdir()
    (base / "cgroup.controllers").write_text("cpu memory pids\n")
    (base / "cgroup.subtree_control").write_text(subtree)
    (base / "cgroup.procs").write_text(procs)
    return base


def test_cgroup_v2_a_group_not_delegated_or_not_the_graders_alone_is_left_as_it_is(tmp_path):
    """Attack review 46b-3: no process but the grader's own is ever moved, and a group without systemd's delegation
    mark (or this non-root uid as owner) is not reshaped, even by root."""
    plain = _fake_v2(tmp_path, f"1\n777\n{os.getpid()}\n")
    assert not cgroups.delegated(plain) or os.geteuid() != 0
    if os.geteuid() == 0:
        assert cgroups._v2_base(plain) is None and not (plain / cgroups.LEAF).exists()
    shared = _fake_v2(tmp_path, f"1\n777\n{os.getpid()}\n")
    os.setxattr(shared, "user.delegate", b"1")
    assert cgroups.delegated(shared)
    assert cgroups._v2_base(shared) is None  # delegated, but pid 1 and 777 live there too: nothing moved
    assert not (shared / cgroups.LEAF).exists() and (shared / "cgroup.subtree_control").read_text() == ""
    alone = _fake_v2(tmp_path, "")  # the control: delegated, the grader's alone (already in its leaf)
    os.setxattr(alone, "user.delegate", b"1")
    assert cgroups._v2_base(alone) == alone
    assert (alone / "cgroup.subtree_control").read_text() == "+memory +pids"
    ready = _fake_v2(tmp_path, "", "memory pids")  # sub-groups may have both already: used as it is
    assert cgroups._v2_base(ready) == ready
    assert "not its alone" in cgroups.problem("nonexistent-controller")
