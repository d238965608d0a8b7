"""The grader's side of the trusted test process: start it in its sandbox, feed it test cells, relay its calls."""

from __future__ import annotations

import base64
import contextlib
import os
import select
import shutil
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tools.classroom.policy import cgroups, handles, sandbox, warm
from tools.classroom.policy.sandbox import MEMORY_LIMIT_MB
from tools.classroom.protocol import frames
from tools.classroom.protocol.frames import REPLY_CAP
from tools.environment import ROOT

KERNEL_SIDE = ("wire.py", "kernel_side.py")  # in tools/classroom/protocol
PROTOCOL = ROOT / "tools" / "classroom" / "protocol"


def kernel_cell(request_path: Path, stem: Path) -> str:
    """The hidden cell that answers one request in the student's kernel (wire.py and kernel_side.py as text)."""
    source = "\n".join((PROTOCOL / name).read_text() for name in KERNEL_SIDE)
    return (f"__grader = {{'__name__': '__grader__'}}\nexec({source!r}, __grader)\n"
            f"__grader['serve'](globals(), {str(request_path)!r}, {str(stem)!r})\ndel __grader\n")


def _failed(ename: str, why: str) -> dict:
    return {"status": "visible", "ename": ename, "evalue": why, "traceback": [f"{ename}: {why}"]}


def _read_reply(stem: Path) -> list[bytearray]:
    """The reply's two files (JSON, tensors): regular files, not links, REPLY_CAP bytes together, checked before a
    byte is read or a buffer made; removed after reading. OSError if they are not, or grew meanwhile."""
    paths = [stem.with_suffix(suffix) for suffix in (".json", ".safetensors")]
    fds = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK))
        infos = [os.fstat(fd) for fd in fds]
        sizes = [info.st_size for info in infos]
        if not all(stat.S_ISREG(info.st_mode) for info in infos) or sum(sizes) > REPLY_CAP:
            raise OSError(f"not two regular files of {REPLY_CAP} bytes at most together (sizes {sizes})")
        if any(info.st_size > (1 << 16) and info.st_blocks * 512 < info.st_size for info in infos):
            raise OSError("a sparse reply file: its size is not written (the student's memory would not pay for it)")
        data = []
        for fd, size in zip(fds, sizes, strict=True):
            buffer, done = bytearray(size), 0
            while done < size and (got := os.readv(fd, [memoryview(buffer)[done:]])):
                done += got
            if done != size or os.read(fd, 1):  # the student's code still writing: not a reply
                raise OSError("a reply file changed while it was read")
            data.append(buffer)
    finally:
        for fd in fds:
            os.close(fd)
    for path in paths:
        path.unlink()
    return data


class TrustedTests:
    """A trusted process per submission (a new one after a test ran out of time); `run` grades one test cell.

    With `server` (the socket of warm.py's server), the process is a fork of one that ran the course's setup already;
    otherwise it is started here and runs the setup itself.
    """

    def __init__(self, kernel_scratch: Path, run_in_kernel: Callable[[str, float], str | None],
                 memory_mb: int = MEMORY_LIMIT_MB, server: str = ""):
        self.kernel_scratch, self.run_in_kernel, self.memory_mb = kernel_scratch, run_in_kernel, memory_mb
        self.process, self.setup, self.setup_result, self.setup_deadline = None, None, None, 0.0
        self.server, self.connection, self.fds = server, None, (-1, -1)  # (from it, to it)
        self.refused = ""  # why the warm server given was refused (not the grader's), if it was
        self.fork_cap = ""  # how a fork of the warm server is capped in memory (its own cgroup), once one answered
        self.scratch = sandbox.private_folder("grading-tests-")
        self.calls = 0

    def start(self, setup: str, timeout: float) -> None:
        """Start the process and its setup (it runs while the student's notebook does)."""
        self.setup, self.setup_result = setup, None
        self.setup_deadline = time.monotonic() + timeout
        if self.server:
            try:  # the server's folder, socket and process are checked first: not one another user put there
                self.connection = warm.connect_trusted(self.server, 10)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the fork's pid, as the host's
                self.fds = (self.connection.fileno(), self.connection.fileno())
                frames.send(self.fds[1], {"op": "fork", "setup": setup})
                return
            except handles.Refused as error:
                self.refused = f"refused the trusted server at {self.server}: {error}"
                self.server = ""
            except OSError:
                pass
            self.close(keep_scratch=True)
        command = sandbox.bwrap_command(self.scratch, self.memory_mb, read_only=[ROOT / "tools"])
        self.process = subprocess.Popen([*command, sys.executable, "-m", "tools.classroom.protocol.trusted"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.fds = (self.process.stdout.fileno(), self.process.stdin.fileno())
        frames.send(self.fds[1], {"op": "setup", "source": setup})

    def _setup_done(self) -> dict:
        if self.setup_result is None:
            try:
                sender = self._sender() if self.connection is not None else None
                self.setup_result = frames.receive(self.fds[0], self.setup_deadline)
                if self.connection is not None:
                    self.fork_cap = self._cap_fork(sender, self.setup_result)
            except frames.FrameError as error:
                self.setup_result = _failed("GradingError", f"the grader's test process did not start ({error})")
            if self.connection is not None and self.setup_result.get("op") != "result":  # no fork: start one here
                self.fork_cap = ""  # a fresh process, in a sandbox of its own
                self.close(keep_scratch=True)
                self.server = ""
                self.start(self.setup, self.setup_deadline - time.monotonic())
                return self._setup_done()
        return self.setup_result

    def _sender(self) -> tuple[int, int] | None:
        """(pid, uid) of the process that wrote the first bytes waiting on the connection, as the host sees them
        (SCM_CREDENTIALS, filled in by the kernel), without reading them; None if none came in time."""
        if not select.select([self.connection], [], [], max(0.0, self.setup_deadline - time.monotonic()))[0]:
            return None
        try:
            _, ancillary, _, _ = self.connection.recvmsg(1, socket.CMSG_SPACE(12), socket.MSG_PEEK)
        except OSError:  # the server hung up: frames.receive says so
            return None
        for level, kind, data in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS) and len(data) == 12:
                pid, uid, _ = struct.unpack("3i", data)
                return pid, uid
        return None

    def _cap_fork(self, sender: tuple[int, int] | None, result: dict) -> str:
        """Move the fork that answered into a memory cgroup of its own (`memory_mb`, as a kernel's) before it runs a
        test: the process that wrote its first frame, of the server's uid, whose own pid is the one it reported.
        How it is capped, or 'none: why'."""
        if sender is None or result.get("op") != "result" or type(result.get("pid")) is not int:
            return "none: no fork answered"
        pid, uid = sender
        if uid != warm.trusted_owner(Path(self.server).parent):
            return f"none: the fork runs as uid {uid}, not as its server"
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return "none: the fork is gone already"
        inner = next((line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")), "")
        if inner != str(result["pid"]):  # not the fork that answered (the server, or a pid reused)
            return f"none: process {pid} is not the fork {result['pid']}"
        group = cgroups.memory_cgroup(self.scratch, self.memory_mb)
        if group is None:
            return f"none: {cgroups.problem('memory')}; the forks share their server's group"
        try:
            (group / "cgroup.procs").write_text(str(pid))
        except OSError as error:
            return f"none: {error}; the forks share their server's group"
        return f"memory cgroup ({self.memory_mb} MiB for this fork, no swap, inside the grader's own)"

    def run(self, grade_id: str, source: str, timeout: float, setup_timeout: float) -> dict:
        """Grade one test cell: {'status': 'passed' | 'visible' | 'hidden', 'ename', 'evalue', 'traceback'}."""
        if self.connection is None and (self.process is None or self.process.poll() is not None):
            self.close(keep_scratch=True)
            self.start(self.setup, setup_timeout)
        setup = self._setup_done()
        if setup["status"] != "passed":
            return _failed("GradingError", f"the course's setup failed in the grader's test process: "
                                           f"{setup.get('ename', '')}: {setup.get('evalue', '')}"[:500])
        deadline = time.monotonic() + timeout
        inp, out = self.fds
        try:
            frames.send(out, {"op": "test", "grade_id": grade_id, "source": source})
            while True:
                message = frames.receive(inp, deadline)
                if message.get("op") == "result":
                    return message
                reply = self._relay(message, deadline)
                if type(reply) is list:
                    frames.send_parts(out, reply)
                else:
                    frames.send(out, reply)
        except (frames.FrameError, OSError) as error:
            self.close(keep_scratch=True)  # a new process for the next test cell
            if time.monotonic() >= deadline:
                return {**_failed("CellTimeoutError", f"the checks ran past the cell's limit of {timeout:g} s"),
                        "timed_out": True}
            return _failed("GradingError", f"the grader's test process stopped ({error})")

    def _relay(self, message: dict, deadline: float) -> dict | list[bytes]:
        """Run one request in the student's kernel; the reply's bytes, unread by this process."""
        self.calls += 1
        request, stem = self.kernel_scratch / "grader-request.pkl", self.kernel_scratch / f"grader-reply-{self.calls}"
        handles.write_private(self.kernel_scratch, request.name, base64.b64decode(str(message.get("request", ""))),
                              sandbox.sandbox_uid(self.kernel_scratch))  # 0600, the kernel's; never through a link
        problem = self.run_in_kernel(kernel_cell(request, stem), deadline - time.monotonic() - 1)  # time to reply
        if problem:
            return {"op": "reply", "error": problem}
        try:
            data = _read_reply(stem)
        except OSError as error:
            return {"op": "reply", "error": f"the student's kernel wrote no answer the grader can read ({error})"}
        # base64 has no character JSON escapes: the frame is written in parts, each reply file's base64 once
        text, tensors = (base64.b64encode(part) for part in data)
        return [b'{"op": "reply", "json": "', text, b'", "tensors": "', tensors, b'"}']

    def close(self, keep_scratch: bool = False) -> None:
        """Stop the process (it holds no state worth keeping); remove its scratch folder unless told to keep it."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                pipe.close()
            self.process = None
        if self.connection is not None:  # a fork of the server: ended by the server, whatever it is doing
            pid = (self.setup_result or {}).get("pid")
            self.connection.close()
            self.connection, self.setup_result = None, None
            if type(pid) is int:
                with contextlib.suppress(OSError), warm.connect_trusted(self.server, 10) as link:
                    frames.send(link.fileno(), {"op": "kill", "pid": pid})
        self.fds = (-1, -1)
        if not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            sandbox.release(self.scratch)
