"""The sandbox policy: what every sandboxed process gets, declared once and read by both enforcers.

The enforcers are sandbox.bwrap_command (a fresh bwrap sandbox: the kernel, the trusted process, the trusted server)
and zygote.py (a kernel forked by the kernel zygote, which builds the same sandbox from inside its own). The probe
in tests/classroom/test_zygote.py asks a kernel of each what it got and requires the same answers.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.environment import OFFLINE, ROOT


@dataclass(frozen=True)
class SandboxPolicy:
    """Caps, mounts and environment of one sandbox; `limits()` is what a kernel zygote's fork is told to enforce."""

    memory_mb: int = 2048  # RLIMIT_DATA per process, and the memory cgroup of all the sandbox's processes together
    processes: int = 64  # processes and threads (pids cgroup; RLIMIT_NPROC as its own uid): torch fits, a bomb not
    tmpfs_mb: int = 256  # each fresh tmpfs (below): its pages are memory
    tmpfs: tuple[str, ...] = ("/tmp", "/dev/shm")
    scratch_mb: int = 512  # the writable home: a tmpfs of this size (root grader), never the host's disk
    file_mb: int = 256  # RLIMIT_FSIZE: no file a sandboxed process writes grows past this
    network: bool = False  # no network namespace of the host's: not even loopback
    uid_base: int = 1_900_000_000  # each sandbox's own uid, from a range systemd leaves unassigned (root grader)
    uid_span: int = 1 << 24
    etc: tuple[str, ...] = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime",
                            "passwd", "group", "nsswitch.conf", "ssl", "ca-certificates", "mime.types", "hosts")
    setup_s: int = 300  # the setup (and install) cell's time limit
    cell_s: int = 30  # any other cell's
    notebook_s: int = 900  # the whole notebook's, its test cells included
    startup_s: int = 180  # the kernel's start
    cell_output: int = 1_000_000  # characters of output one cell keeps
    notebook_output: int = 5_000_000  # characters the whole notebook keeps
    message: int = 8 << 20  # bytes of one ZeroMQ message from a kernel (gate.py): a larger one is dropped unread
    queued: int = 4  # messages the grader's ZeroMQ client queues per socket (RCVHWM): then the kernel waits

    def __post_init__(self):
        if self.network:
            raise ValueError("SandboxPolicy(network=True): no enforcer gives a sandbox the network; pass False")
        for name in ("memory_mb", "processes", "tmpfs_mb", "scratch_mb", "file_mb"):
            if type(getattr(self, name)) is not int or getattr(self, name) <= 0:
                raise ValueError(f"SandboxPolicy({name}={getattr(self, name)!r}): pass a positive int")

    def limits(self) -> dict[str, int]:
        """The caps a forked kernel sets on itself (zygote.py), as the bwrap path sets them with prlimit."""
        kept = ("memory_mb", "processes", "tmpfs_mb", "file_mb")
        return {name: value for name, value in asdict(self).items() if name in kept}

    def environment(self, home: Path) -> dict[str, str]:
        """The whole environment of a sandboxed process whose home is `home`."""
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(ROOT),
               "MPLCONFIGDIR": str(home / ".matplotlib"), **OFFLINE, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "BERT_BOOK_CHECKPOINT": os.environ.get("BERT_BOOK_CHECKPOINT", ""),
               "BERT_BOOK_PHONE_FIGURES": "0"}  # helpers.notebook: no phone layout for a graded figure
        return {name: value for name, value in env.items() if value}


POLICY = SandboxPolicy()  # the grader's: every cap below names its field here
