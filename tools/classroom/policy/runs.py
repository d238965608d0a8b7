"""Run folders, /tmp/grading-run-<random> (mkdtemp: 0700, the grader's): each stamped with the process that made it,
so that one left by a grader killed before it cleaned up is removed (the tmpfs mounted in it first) by the next sweep.

The sweep enters only folders of this uid that nobody else may enter, through a descriptor opened without following
links; it reads the stamp through that descriptor; a maker that is gone, or whose pid now names a younger process,
means the folder is an orphan (as does a stamp from an earlier boot). A folder without a stamp (being made, or made by
older code), or made in another pid namespace (a grader in a container sharing /tmp), is left alone.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path

from tools.classroom.policy import handles
from tools.classroom.policy.cgroups import RUN_FOLDERS

STAMP = ".maker"  # "<pid> <start time> <pid namespace> <boot id>" of the process that made the folder


def _where() -> str:
    """This process's pid namespace and boot: a pid means something only within both."""
    return f"{os.stat('/proc/self/ns/pid').st_ino} {Path('/proc/sys/kernel/random/boot_id').read_text().strip()}"


def start_time(pid: int | str) -> str | None:
    """The start time of process `pid` (/proc/<pid>/stat, field 22), or None: it is already gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()[19]  # after the command's name, which may hold spaces and parentheses


def make(prefix: str = RUN_FOLDERS) -> Path:
    """A fresh run folder in /tmp, stamped with this process."""
    run = Path(tempfile.mkdtemp(prefix=prefix))
    handles.write_private(run, STAMP, f"{os.getpid()} {start_time('self')} {_where()}".encode(), None)
    return run


def remove(path: Path | str) -> None:
    """Remove a folder and everything in it, however deep (rm's fts: no recursion limit, links not followed, no
    other file system entered); what cannot be removed is left."""
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True)


def _stamp(folder: int) -> tuple[str, str, str, str] | None:
    """(pid, start time, pid namespace, boot id) stamped in the open folder `folder` (a regular file of this uid),
    or None."""
    try:
        fd = os.open(STAMP, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size > 256:
            return None
        words = [word.decode() for word in file.read(256).split()]
    return tuple(words) if len(words) == 4 and words[0].isdigit() else None


def _may_run(stamp: tuple[str, str, str, str]) -> bool:
    """Whether the process a stamp names may still run: since this boot, in a pid namespace this one cannot see, or
    here with the same pid and start time."""
    namespace, boot = _where().split()
    return stamp[3] == boot and (stamp[2] != namespace or start_time(stamp[0]) == stamp[1])


def maker_running(run: Path) -> bool:
    """Whether the process that made the run folder `run` (its stamp, read through one descriptor) still runs, or
    may (since this boot, in a pid namespace this one cannot see): it owns the folder, so no other process removes
    it."""
    try:
        fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        stamp = _stamp(fd)
        return stamp is not None and _may_run(stamp)
    finally:
        os.close(fd)


def _orphan(tmp: int, name: str) -> bool:
    """Whether /tmp/`name` is this uid's private run folder and its maker is gone (checked through one descriptor)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=tmp)
    except OSError:  # gone meanwhile, a link, not a folder, or not ours to enter
        return False
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:  # another user's, or one others may enter
            return False
        stamp = _stamp(fd)
        if stamp is None or _may_run(stamp):  # no stamp; a maker we cannot see, or one that still runs
            return False
        now = os.stat(name, dir_fd=tmp, follow_symlinks=False)  # the name is still this folder (sticky /tmp: only
        return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)  # its owner could have moved it)
    finally:
        os.close(fd)


def _unmount_under(folder: str) -> None:
    """Unmount every tmpfs a sandbox had under `folder` (deepest first); they outlive a killed grader."""
    with open("/proc/self/mountinfo") as table:
        points = [line.split()[4].encode().decode("unicode_escape") for line in table]
    for point in sorted((p for p in points if p.startswith(folder + "/")), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True)


def sweep() -> list[str]:
    """Remove this uid's run folders whose maker is gone; their names. Never another user's."""
    tmp = tempfile.gettempdir()
    handles.check_ancestors(os.path.join(tmp, RUN_FOLDERS))  # /tmp itself too: root's, sticky
    removed = []
    descriptor = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(descriptor):
            try:  # one folder's trouble is that folder's: the others are still swept
                if not (name.startswith(RUN_FOLDERS) and _orphan(descriptor, name)):
                    continue
                path = os.path.join(tmp, name)  # checked: ours, in sticky /tmp, which only its owner may rename
                if os.geteuid() == 0:
                    _unmount_under(path)
                remove(path)
                with contextlib.suppress(FileNotFoundError):  # gone: removed here, or by another sweep
                    os.stat(name, dir_fd=descriptor, follow_symlinks=False)
                    continue  # a mount still busy: the next sweep
                removed.append(name)
            except Exception:  # noqa: BLE001,S112 (a sweep never stops grading)
                continue
    finally:
        os.close(descriptor)
    return removed
