"""A sandbox's control groups: a pids cap and a memory cap for all its processes together, where they can be made.

cgroup v1 keeps pids and memory in two hierarchies (/sys/fs/cgroup/pids, /sys/fs/cgroup/memory); v2 in one. A group
is named after its sandbox's scratch folder, bert-book-<name>; one whose folder is gone is removed by the next.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
CGROUP_PIDS, CGROUP_MEMORY = CGROUPS / "pids", CGROUPS / "memory"  # cgroup v1; v2 has both files in one group
ZYGOTE_FOLDERS = "grading-zygote-"  # the kernel zygotes' folders (warm.py), each with its kernels' folders inside
PREFIX = "bert-book-"


def cgroup_parent() -> Path:
    """Where the sandboxes' pids cgroups are made (cgroup v1's pids hierarchy, or v2's root)."""
    return CGROUP_PIDS if (CGROUP_PIDS / "cgroup.procs").exists() else CGROUPS


def memory_parent() -> Path:
    """Where the sandboxes' memory cgroups are made (cgroup v1's memory hierarchy, or v2's root)."""
    return CGROUP_MEMORY if (CGROUP_MEMORY / "cgroup.procs").exists() else CGROUPS


def _sweep(parent: Path, scratch: Path) -> None:
    """Remove the empty groups under `parent` whose sandbox is gone (its scratch folder deleted)."""
    temporary = Path(tempfile.gettempdir())  # where scratch folders are: there, and in each kernel zygote's folder
    live = set()
    for folder in (scratch.parent, temporary, *temporary.glob(f"{ZYGOTE_FOLDERS}*/kernels")):
        with contextlib.suppress(OSError):  # a folder removed meanwhile
            live.update(path.name for path in folder.iterdir())
    for stale in parent.glob(f"{PREFIX}*"):
        if stale.name.removeprefix(PREFIX) not in live:
            with contextlib.suppress(OSError):  # still busy: its last processes exiting; the next sweep removes it
                stale.rmdir()


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
    """A pids cgroup capped at `processes` for one sandbox, where this process may make one; else None."""
    return _group(cgroup_parent(), scratch, {"pids.max": str(processes)})


def memory_cgroup(scratch: Path, memory_mb: int) -> Path | None:
    """A memory cgroup capped at `memory_mb` MiB (no swap) for one sandbox, where one can be made; else None."""
    parent, limit = memory_parent(), str(memory_mb * 1024 * 1024)
    if parent == CGROUP_MEMORY:
        settings = {"memory.limit_in_bytes": limit}
        if (parent / "memory.memsw.limit_in_bytes").exists():
            settings["memory.memsw.limit_in_bytes"] = limit
    elif (parent / "cgroup.controllers").exists() and "memory" in (parent / "cgroup.controllers").read_text():
        settings = {"memory.max": limit, "memory.swap.max": "0"}
    else:
        return None
    return _group(parent, scratch, settings)


def oom_kills(scratch: Path) -> int:
    """How many of the sandbox's processes its memory cgroup has killed at its cap (0 without one)."""
    group = memory_parent() / f"{PREFIX}{scratch.name}"
    for name in ("memory.oom_control", "memory.events"):  # v1, v2
        with contextlib.suppress(OSError):
            for line in (group / name).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    return 0


def release(scratch: Path) -> None:
    """Remove a sandbox's groups; one still busy (its last processes exiting) is left to the next sandbox's sweep."""
    for parent in {CGROUP_PIDS, CGROUP_MEMORY, CGROUPS}:
        with contextlib.suppress(OSError):
            (parent / f"{PREFIX}{scratch.name}").rmdir()
