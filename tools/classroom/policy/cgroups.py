"""A sandbox's control groups: a pids cap and a memory cap for all its processes together, where they can be made.

Each group is made under the grader's own cgroup (read from /proc/self/cgroup), so a sandbox stays inside whatever
limits the administrator put the grader under (a systemd slice's memory, CPU and pids). cgroup v1 keeps pids and
memory in two hierarchies (/sys/fs/cgroup/pids, /sys/fs/cgroup/memory); v2 in one, where a group with processes
cannot have sub-groups with controllers: the grader moves itself into a leaf (bert-book-grader) of a group delegated
to it, or gets no group. A group is named after its sandbox's scratch folder, bert-book-<name>; one whose folder is
gone is removed by the next.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
RUN_FOLDERS = "grading-run-"  # a warm server's and its kernel zygote's folders, in one (warm.py)
PREFIX = "bert-book-"
LEAF = f"{PREFIX}grader"  # cgroup v2: the grader's own processes, so that its group may have sub-groups


def _own(controller: str, table: str) -> str:
    """The grader's group in the hierarchy of `controller` ('' for v2's), from a /proc/<pid>/cgroup table."""
    for line in table.splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return ""


def delegated(base: Path) -> bool:
    """Whether the cgroup v2 group `base` was handed to this grader: systemd's delegation mark on it (Delegate=yes),
    or owned by this (not root) uid. Root may write any group; that does not make it the grader's to reshape."""
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            os.getxattr(base, name)
            return True
    return os.stat(base).st_uid == os.geteuid() != 0


@functools.cache
def _v2_base(base: Path) -> Path | None:
    """`base` where its sub-groups can have the memory and pids controllers: already so, or a delegated group that
    holds this process alone, which moves into its leaf first; None otherwise (nobody else's process is moved)."""
    wanted = {"memory", "pids"} & set((base / "cgroup.controllers").read_text().split())
    if wanted <= set((base / "cgroup.subtree_control").read_text().split()):
        return base
    if base != CGROUPS and not delegated(base):
        return None
    with contextlib.suppress(OSError):
        if base != CGROUPS:
            if set((base / "cgroup.procs").read_text().split()) - {str(os.getpid())}:
                return None  # another process lives in the group: it is not the grader's alone
            (base / LEAF).mkdir(exist_ok=True)
            (base / LEAF / "cgroup.procs").write_text(str(os.getpid()))
            if (base / "cgroup.procs").read_text().split():
                return None
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in sorted(wanted)))
        return base
    return None


def parent(controller: str) -> Path | None:
    """Where the sandboxes' groups for `controller` ('pids', 'memory') are made: under the grader's own group, in
    cgroup v1's hierarchy of that controller or in v2's; None where none can be made there."""
    table = Path("/proc/self/cgroup").read_text()
    v1 = CGROUPS / controller
    try:
        if (v1 / "cgroup.procs").exists():
            base = v1 / _own(controller, table).lstrip("/")
            if controller == "memory" and (base / "memory.use_hierarchy").read_text().strip() != "1":
                return None  # its limit would not count the sub-groups' memory
            return base if os.access(base / "cgroup.procs", os.W_OK) else None
        own = Path(_own("", table).lstrip("/"))
        base = CGROUPS / (own.parent if own.name == LEAF else own)
        if controller not in (base / "cgroup.controllers").read_text().split() or not os.access(base, os.W_OK):
            return None
        return _v2_base(base)
    except OSError:
        return None


def problem(controller: str) -> str:
    """'' where the sandboxes' `controller` groups can be made under the grader's own group; else why not."""
    if parent(controller) is not None:
        return ""
    own = _own(controller, Path("/proc/self/cgroup").read_text()) or _own("", Path("/proc/self/cgroup").read_text())
    return (f"no {controller} cgroup can be made under the grader's own ({own or '?'}): it is not writable by the "
            "grader, not hierarchical, or (cgroup v2) not delegated to it or not its alone (run the grader in a "
            "scope of its own: systemd-run --scope -p Delegate=yes)")


def _sweep(parent: Path, scratch: Path) -> None:
    """Remove the empty groups under `parent` whose sandbox is gone (its scratch folder deleted)."""
    runs = [run for run in Path(tempfile.gettempdir()).glob(f"{RUN_FOLDERS}*")  # every sandbox's folder is in one
            if _ours(run)]
    live = set()
    for folder in (scratch.parent, *runs, *(run / "zygote" / "kernels" for run in runs)):
        with contextlib.suppress(OSError):  # a folder removed meanwhile
            live.update(path.name for path in folder.iterdir())
    for stale in parent.glob(f"{PREFIX}*"):
        if stale.name != LEAF and stale.name.removeprefix(PREFIX) not in live:
            with contextlib.suppress(OSError):  # still busy: its last processes exiting; the next sweep removes it
                stale.rmdir()


def _ours(run: Path) -> bool:
    """A run folder of a grader (root's or this uid's): not one another user made to keep stale groups alive."""
    with contextlib.suppress(OSError):
        info = os.lstat(run)
        return stat.S_ISDIR(info.st_mode) and info.st_uid in {0, os.geteuid()}
    return False


def _group(parent: Path, scratch: Path, settings: dict[str, str]) -> Path | None:
    """The group of the sandbox around `scratch` under `parent`, with `settings` written; None where none can be."""
    _sweep(parent, scratch)
    group = parent / f"{PREFIX}{scratch.name}"
    try:
        group.mkdir(exist_ok=True)
        for name, value in settings.items():
            (group / name).write_text(value)
    except OSError:
        return None
    return group


def pids_cgroup(scratch: Path, processes: int) -> Path | None:
    """A pids cgroup capped at `processes` for one sandbox, under the grader's own; None where none can be made."""
    base = parent("pids")
    return None if base is None else _group(base, scratch, {"pids.max": str(processes)})


def memory_cgroup(scratch: Path, memory_mb: int) -> Path | None:
    """A memory cgroup capped at `memory_mb` MiB (no swap) for one sandbox, under the grader's own; else None."""
    base, limit = parent("memory"), str(memory_mb * 1024 * 1024)
    if base is None:
        return None
    if (base / "memory.limit_in_bytes").exists():  # v1
        settings = {"memory.limit_in_bytes": limit}
        if (base / "memory.memsw.limit_in_bytes").exists():
            settings["memory.memsw.limit_in_bytes"] = limit
    else:
        settings = {"memory.max": limit, "memory.swap.max": "0"}
    return _group(base, scratch, settings)


def oom_kills(scratch: Path) -> int:
    """How many of the sandbox's processes its memory cgroup has killed at its cap (0 without one)."""
    base = parent("memory")
    for name in ("memory.oom_control", "memory.events"):  # v1, v2
        with contextlib.suppress(OSError, TypeError):
            for line in (base / f"{PREFIX}{scratch.name}" / name).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    return 0


def release(scratch: Path) -> None:
    """Remove a sandbox's groups; one still busy (its last processes exiting) is left to the next sandbox's sweep."""
    for base in {parent("pids"), parent("memory")} - {None}:
        with contextlib.suppress(OSError):
            (base / f"{PREFIX}{scratch.name}").rmdir()
