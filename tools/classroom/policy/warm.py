"""A warm trusted server per machine: the course's setup run once in its sandbox, then forked per submission.

The server is `python -m tools.classroom.protocol.trusted --server SOCKET` in a bwrap sandbox of its own, started by the
coordinator for its preflight and shared by the Dask workers on its machine (a worker on another machine starts its
own), or by plain `nbgrader autograde`. It never runs student code: each fork serves one submission's test cells,
with the student's values as plain data, exactly as a fresh trusted process would after running the setup, and is
killed after it. What a fork saves: importing torch, transformers and the helpers, and loading the checkpoint, once
per submission. A process's servers (one per chapter) share one run folder and one kernel zygote (server_for).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools.classroom.policy import cgroups, handles, runs, sandbox
from tools.classroom.policy.run_zygote import SETUP_LIMIT, ZYGOTE, Run
from tools.classroom.protocol import frames
from tools.classroom.protocol.trusted import is_test
from tools.environment import ROOT

SERVER_MEMORY_FACTOR = 4  # the server and its forks (a submission's test cells each) together: 4 kernels' cap
TRUSTED_FOLDERS = "grading-trusted-"  # a trusted server's folder, with its socket, inside its run's folder
RUN_FOLDERS = cgroups.RUN_FOLDERS  # /tmp/grading-run-<random>: the grader's, 0700; a server's and its zygote's
_SERVERS: dict[str, TrustedServer] = {}  # setup source -> this process's server for it
_SHARED: list[Run] = []  # this process's run (server_for): its folder and kernel zygote, shared by all its servers


class TrustedServer:
    """The sandboxed server process and its socket; `ready` once its setup passed. In `shared` (server_for), or in a
    run of its own, closed with it."""

    def __init__(self, setup: str, preload: tuple[str, ...] = (), memory_mb: int = sandbox.MEMORY_LIMIT_MB,
                 shared: Run | None = None):
        _remove_stale()  # never a run whose maker runs: this process's shared one, nor another grader's
        self.owned = shared is None
        self.shared = Run(_imported(setup)) if shared is None else shared
        if not self.shared.intact():  # checked after the sweep, right before a folder is made in it
            raise handles.Refused(f"the run folder {self.shared.folder} is no longer the one this grader made")
        self.run, self.zygote = self.shared.folder, self.shared.zygote
        self.scratch = Path(tempfile.mkdtemp(prefix=TRUSTED_FOLDERS, dir=self.run))
        self.socket = self.scratch / "trusted.sock"
        command = sandbox.bwrap_command(self.scratch, memory_mb, read_only=[ROOT / "tools"],
                                        group_mb=SERVER_MEMORY_FACTOR * memory_mb)  # its forks share its group
        self.process = subprocess.Popen([*command, sys.executable, "-m", "tools.classroom.protocol.trusted", "--server",
                                         str(self.socket)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        try:
            frames.send(self.process.stdin.fileno(), {"op": "setup", "source": setup, "preload": list(preload)})
            ready = frames.receive(self.process.stdout.fileno(), time.monotonic() + SETUP_LIMIT)
        except (frames.FrameError, OSError):
            ready = {}
        self.ready = ready.get("op") == "ready" and ready.get("status") == "passed"
        if not self.ready:  # a fresh process per submission will report why
            self.close()
        else:
            self.shared.check_zygote()

    def alive(self) -> bool:
        return self.ready and self.process.poll() is None

    def close(self) -> None:
        """End the server and its forks (they die with its sandbox); remove its folder, and its own run's."""
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            pipe.close()
        if self.shared.intact():  # never a path through a run folder someone else made (or that is gone)
            shutil.rmtree(self.scratch, ignore_errors=True)
            sandbox.release(self.scratch, run=False)  # the run's folder is the Run's to remove, not the last server's
        if self.owned:
            self.shared.close()


def trusted_owner(folder: Path) -> int:
    """The uid that owns a trusted server's folder and socket: its sandbox's (root grader), else the grader's."""
    uid = sandbox.sandbox_uid(folder)
    return os.geteuid() if uid is None else uid


def run_folder(trusted_socket: str | Path) -> Path:
    """The run's folder of a trusted server's socket (<run>/<server's folder>/trusted.sock), once it is checked: the
    grader's own, 0700; nothing in it can then be another user's. Refused (an OSError) otherwise."""
    run = Path(trusted_socket).parent.parent
    if not run.name.startswith(RUN_FOLDERS):
        raise handles.Refused(f"{trusted_socket} is not in a grader's run folder ({RUN_FOLDERS}...)")
    handles.check_ancestors(run)
    handles.check_folder(run, os.geteuid(), private=True)
    return run


def connect_trusted(trusted_socket: str | Path, timeout: float) -> socket.socket:
    """A connection to the trusted server at `trusted_socket` after its run's folder, its folder, its socket and the
    process listening there are checked (handles.py)."""
    run_folder(trusted_socket)
    return handles.connect(trusted_socket, trusted_owner(Path(trusted_socket).parent), timeout)


def trusted_problem(trusted_socket: str) -> str:
    """'' if the trusted server at `trusted_socket` is one this machine's grader made and it listens; else why not."""
    if not trusted_socket:
        return "no trusted server"
    try:
        connect_trusted(trusted_socket, timeout=10).close()
    except OSError as error:
        return f"refused the trusted server at {trusted_socket}: {error}"
    return ""


def find_zygote(trusted_socket: str) -> tuple[str, str]:
    """(socket, '') of the kernel zygote beside the trusted server at `trusted_socket`; ('', '') where none runs
    (no warm server, not root); ('', why) where one was found but refused, or its fork guard tripped.

    The run's folder is the grader's and 0700, so the zygote's folder in it (<run>/zygote) is the one the server's
    maker made, not a name anyone else could have taken; it is checked all the same (root's, writable by root
    only), and so are its socket and the process listening there.
    """
    folder = Path(trusted_socket).parent
    if not trusted_socket or os.geteuid() != 0 or sandbox.sandbox_uid(folder) is None:
        return "", ""
    path = folder.parent / ZYGOTE / "zygote.sock"
    try:
        run_folder(trusted_socket)
        handles.check_folder(folder, trusted_owner(folder))
        if not path.parent.exists() and not path.parent.is_symlink():  # none started (or it failed): a fresh kernel
            return "", ""
        handles.check_folder(path.parent, 0)
        handles.check_folder(path.parent / "kernels", 0)
        with handles.connect(path, 0, timeout=10) as zygote:
            with contextlib.suppress(OSError):  # an unfit zygote answers, and hangs up, without reading
                frames.send(zygote.fileno(), {"op": "fit"})
            answer = frames.receive(zygote.fileno(), time.monotonic() + 10)
    except handles.Refused as error:
        return "", f"refused the kernel zygote at {path}: {error}"
    except (OSError, frames.FrameError):  # ended meanwhile
        return "", ""
    if not answer.get("fit"):
        return "", f"a fresh kernel: {str(answer.get('error', 'the kernel zygote did not answer'))[:200]}"
    return str(path), ""


def zygote_socket(trusted_socket: str) -> str:
    """The socket of the kernel zygote beside the trusted server at `trusted_socket`, if it passes its checks, or ''."""
    return find_zygote(trusted_socket)[0]


def _imported(source: str) -> list[str]:
    """The modules a cell's source imports (absolute imports only)."""
    modules = []
    with contextlib.suppress(SyntaxError):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.append(node.module)
    return sorted(set(modules))


def _knock(path: str) -> OSError | None:
    """Connect to the socket at `path` and hang up (a server takes it as a caller that left); the error, or None."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError as error:
            return error
    return None


def _remove_stale() -> None:
    """Remove the run folders of servers that are gone (a stopped Dask worker runs no exit handler): nothing listens
    on any of their sockets, and those whose maker is gone (runs.py). Only this grader's own (0700) run folders."""
    runs.sweep()
    for run in Path(tempfile.gettempdir()).glob(f"{RUN_FOLDERS}*"):
        if runs.maker_running(run):  # its maker replaces its own dead servers (server_for): a run it may share
            continue
        sockets = list(run.glob(f"{TRUSTED_FOLDERS}*/trusted.sock"))
        try:  # a folder another user made is never this grader's to remove (nor one removed meanwhile)
            for path in sockets:
                run_folder(path)
                handles.check_socket(path, trusted_owner(path.parent))
        except OSError:
            continue
        # a run shared by several servers (server_for) stays while one of them listens
        if sockets and all(isinstance(_knock(str(path)), ConnectionRefusedError) for path in sockets):
            sandbox.release(run / ZYGOTE / "kernels")  # the zygote's kernels' tmpfs; each server's own folder is one
            for path in sockets:
                sandbox.release(path.parent)
            shutil.rmtree(run, ignore_errors=True)


@functools.lru_cache(maxsize=16)
def course_code(notebook: str) -> tuple[str, tuple[str, ...]]:
    """A source notebook's setup cell (grade_id 'setup'), and the modules its test cells import."""
    cells = nbformat.reads(notebook, as_version=4).cells
    setup = next((cell.source for cell in cells if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup"), "")
    return setup, tuple(sorted({module for cell in cells if is_test(cell) for module in _imported(cell.source)}))


def course_imports(notebooks: tuple[Path, ...]) -> list[str]:
    """What the setups of the source notebooks at `notebooks` import (those that can be read)."""
    modules = set()
    for path in notebooks:
        with contextlib.suppress(OSError, ValueError):  # unreadable, or not a notebook: its chapter imports its own
            modules.update(_imported(course_code(Path(path).read_text())[0]))
    return sorted(modules)


def server_for(notebook: str, keep: int = 1, course: tuple[Path, ...] = ()) -> str:
    """The socket of this process's server for a source notebook's setup, started on first use; '' if none runs it.

    The process keeps the servers of its last `keep` setups (chapters), the oldest closed first (~0.5 GB each). They
    share one run folder and one kernel zygote, which imports what this setup and those of the source notebooks at
    `course` (the course's, where the caller knows them) import; both are closed with the last server (stop_all).
    """
    setup, preload = course_code(notebook)
    if not setup:
        return ""
    if _SHARED and not _SHARED[0].intact():  # removed (or replaced) under us: its servers and zygote end, paths kept
        stop_all()
    server = _SERVERS.pop(setup, None)  # put back last: the most recently used
    if server is not None and server.ready and not server.alive():  # a dead one replaced; a failed setup not retried
        server.close()
        server = None
    if server is None:
        while len(_SERVERS) >= max(1, keep):
            _SERVERS.pop(next(iter(_SERVERS))).close()
        with contextlib.suppress(OSError):
            if not _SHARED:  # a module another chapter's setup imports, the zygote lacks: its kernels import it
                _SHARED.append(Run(sorted({*_imported(setup), *course_imports(course)})))
            server = TrustedServer(setup, preload, shared=_SHARED[0])
    if server is not None:
        _SERVERS[setup] = server
    elif not _SERVERS:
        stop_all()
    return str(server.socket) if server is not None and server.alive() else ""


def stop_all() -> None:
    """Close every server of this process, then their run's zygote and folder."""
    while _SERVERS:
        _SERVERS.popitem()[1].close()
    while _SHARED:
        _SHARED.pop().close()


atexit.register(stop_all)
