"""A killed grader's run folder is swept by the next grader (policy/runs.py): only this uid's private folders whose
maker is gone; never another user's, never through a link, never a live grader's or one still being made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.classroom.policy import runs
from tools.environment import ROOT

STRANGER = 65534


def _crashed() -> Path:
    """A run folder whose maker has exited without removing it (a killed grader)."""
    made = subprocess.run([sys.executable, "-c", "from tools.classroom.policy import runs; print(runs.make())"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return Path(made.stdout.strip())


def _mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def _deep(folder: Path, levels: int) -> None:
    """`levels` folders, each inside the last (made through descriptors: the path is longer than PATH_MAX)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


@pytest.fixture
def folders():
    made = {}
    yield made
    for path in made.values():
        if os.path.ismount(path / "scratch"):
            subprocess.run(["umount", "--lazy", str(path / "scratch")], check=False)
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def test_a_crashed_graders_run_folder_is_swept_and_nothing_else(folders):
    folders["crashed"] = _crashed()
    (folders["crashed"] / "scratch").mkdir()
    if os.geteuid() == 0:  # a root grader's sandbox had a tmpfs here: it outlives the grader, the sweep unmounts it
        scratch = str(folders["crashed"] / "scratch")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", scratch], check=True)
    folders["live"] = runs.make()  # this process: still running
    folders["reused"] = runs.make()  # this pid, but another process's start time: the maker is gone
    stamp = (folders["reused"] / runs.STAMP).read_text().split()
    (folders["reused"] / runs.STAMP).write_text(" ".join([stamp[0], "1", *stamp[2:]]))
    folders["elsewhere"] = _crashed()  # made in another pid namespace (a container sharing /tmp): not ours to judge
    stamp = (folders["elsewhere"] / runs.STAMP).read_text().split()
    (folders["elsewhere"] / runs.STAMP).write_text(" ".join([*stamp[:2], "1", stamp[3]]))
    _deep(folders["crashed"], 2000)  # a student's scratch left 2000 folders deep: shutil.rmtree recurses
    folders["unstamped"] = runs.make()  # being made, or made by older code: left alone
    (folders["unstamped"] / runs.STAMP).unlink()
    folders["open"] = _crashed()  # this uid's, but others may enter it: not one of the grader's private folders
    folders["open"].chmod(0o755)
    target = _crashed()  # a link named like a run folder, to an orphan elsewhere: never followed
    folders["target"] = target.rename(target.with_name("elsewhere-" + target.name))
    folders["link"] = target
    target.symlink_to(folders["target"])
    swept = runs.sweep()
    assert folders["crashed"].name in swept and folders["reused"].name in swept
    assert not folders["crashed"].exists() and not _mounted(folders["crashed"] / "scratch")
    assert not folders["reused"].exists()
    for kept in ("live", "unstamped", "open", "target", "link", "elsewhere"):
        assert folders[kept].exists() and folders[kept].name not in swept, kept
    assert (folders["target"] / runs.STAMP).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="another uid's folder needs a root test run")
def test_another_users_run_folder_is_never_swept(folders):
    """uid 65534's folder, private and stamped by a process that is gone: not this grader's to remove."""
    folders["stranger"] = _crashed()
    for path in (folders["stranger"], folders["stranger"] / runs.STAMP):
        os.chown(path, STRANGER, STRANGER)
    folders["control"] = _crashed()  # the same, this uid's: swept
    swept = runs.sweep()
    assert folders["stranger"].name not in swept and (folders["stranger"] / runs.STAMP).exists()
    assert folders["control"].name in swept and not folders["control"].exists()


def test_a_process_that_is_gone_has_no_start_time():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names nothing
    assert runs.start_time(child.pid) is None and runs.start_time(os.getpid()) == runs.start_time("self")


def test_a_sandbox_folder_however_deep_is_released(bwrap):
    """A student's scratch 3000 folders deep (shutil.rmtree raises RecursionError there): removed, tmpfs and all."""
    from tools.classroom.policy import sandbox

    scratch = sandbox.private_folder("grading-")
    sandbox.size_folder(scratch)
    _deep(scratch, 3000)
    sandbox.release(scratch)
    assert not scratch.exists() and not scratch.parent.exists() and not _mounted(scratch)
