"""A gate on the kernel's ZeroMQ sockets: every message from the kernel is read frame by frame, and one over the cap
is dropped whole before anything of it reaches the grader's ZeroMQ client; the connection and later messages go on.

The student's code may speak to the grader's sockets itself (it can read its kernel.json), so a cap inside the kernel
would not hold. libzmq's own cap (MAXMSGSIZE) ends the connection for good on the first message over it, and its
pipes keep a multipart message whole before a reader sees its first part, so the gate parses ZMTP 3 itself: the
greeting (NULL mechanism only), then frames; it holds at most `cap` bytes of one message, and skips the rest unread.
The direction from the grader to the kernel is copied as it is.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import socket
import struct
import threading

from tools.classroom.policy import runs

GREETING = 64  # bytes: signature (10), version (2), mechanism (20), as-server (1), filler (31)
COMMAND_CAP = 1 << 16  # a ZMTP command (READY, PING) is small; a larger one ends the connection
MAX_FRAMES = 64  # frames of one message: identities, delimiter, signature, four dicts, a few buffers
FRAME_COST = 512  # bytes charged per frame on top of its own: what a frame costs the grader (libzmq, memoryviews)
CHUNK = 1 << 20


class GateClosed(Exception):
    """The connection ends: a side closed it, or the kernel broke ZMTP."""


def _greeting_problem(greeting: bytes) -> str:
    """'' while the kernel's greeting so far is a ZMTP 3 one with the NULL mechanism, else what is wrong."""
    checks = ((0, b"\xff"), (9, b"\x7f"), (12, b"NULL" + bytes(16)))
    for at, expected in checks:
        seen = greeting[at:at + len(expected)]
        if seen and seen != expected[:len(seen)]:
            return f"not a ZMTP 3 greeting with the NULL mechanism (bytes {at}-{at + len(expected) - 1})"
    if len(greeting) > 10 and greeting[10] < 3:
        return f"ZMTP version {greeting[10]} (3 or later expected)"
    return ""


class _Reader:
    """Exact reads from a socket, through a buffer of at most one chunk (read from an offset: no copying per frame)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer, self.at = sock, b"", 0

    def _fill(self) -> None:
        data = self.sock.recv(CHUNK)
        if not data:
            raise GateClosed("closed")
        self.buffer, self.at = self.buffer[self.at:] + data, 0

    def exact(self, size: int) -> bytes:
        parts, missing = [], size
        while missing > len(self.buffer) - self.at:  # a large frame: its chunks joined once, not copied per chunk
            parts.append(self.buffer[self.at:])
            missing -= len(parts[-1])
            self.buffer, self.at = b"", 0
            self._fill()
        self.at += missing
        parts.append(self.buffer[self.at - missing:self.at])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def skip(self, size: int) -> None:
        while size > 0:
            if self.at == len(self.buffer):
                self._fill()
            taken = min(size, len(self.buffer) - self.at)
            self.at, size = self.at + taken, size - taken


def _command(flags: int, body: bytes, ready: bool) -> bool:
    """Whether a kernel may send this command now: READY once, first; then PING, PONG or ERROR. Never with MORE
    (libzmq would join the parts into one message no cap counts), never SUBSCRIBE or CANCEL (a publisher's peer
    sends those, never a kernel)."""
    name = body[1:1 + body[0]] if body else b""
    return not flags & 0x01 and (name == b"READY") != ready and name in (b"READY", b"PING", b"PONG", b"ERROR")


def pump_capped(kernel: socket.socket, client: socket.socket, cap: int, dropped: list[int]) -> None:
    """Copy ZMTP from `kernel` to `client`, each message whole if it has at most MAX_FRAMES frames and its frames
    total at most `cap` bytes (FRAME_COST counted for each frame); a larger one is skipped unread, its size so far
    appended to `dropped`. Returns when a side closes or the kernel breaks ZMTP or sends a command it may not."""
    greeting = b""
    while len(greeting) < GREETING:  # forwarded as it comes: libzmq sends its greeting in steps, waiting in between
        data = kernel.recv(GREETING - len(greeting))
        if not data or _greeting_problem(greeting + data):
            return
        greeting += data
        client.sendall(data)
    reader, message, size, frames, dropping, ready = _Reader(kernel), bytearray(), 0, 0, False, False
    while True:
        flags = reader.exact(1)[0]
        if flags & ~0x07:  # reserved bits
            return
        head = reader.exact(8 if flags & 0x02 else 1)
        length = struct.unpack(">Q", head)[0] if flags & 0x02 else head[0]
        if flags & 0x04:  # a command: never inside a message, never large, only those a kernel's socket sends
            if message or dropping or length > COMMAND_CAP:
                return
            body = reader.exact(length)
            if not _command(flags, body, ready):
                return
            ready = True
            client.sendall(bytes([flags]) + head + body)
            continue
        if not ready:  # a message before READY: not ZMTP
            return
        size, frames = size + FRAME_COST + len(head) + length, frames + 1
        if dropping or size > cap or frames > MAX_FRAMES:
            dropping, message = True, bytearray()
            reader.skip(length)
        else:
            message += bytes([flags]) + head
            message += reader.exact(length)
        if not flags & 0x01:  # the message's last frame
            if dropping:
                dropped.append(size)
            else:
                client.sendall(message)
            message, size, frames, dropping = bytearray(), 0, 0, False


def _copy(source: socket.socket, target: socket.socket) -> None:
    while data := source.recv(CHUNK):
        target.sendall(data)


class Gate:
    """Unix sockets at `<ip>-<port>` in a private folder, each relaying to the kernel's `<kernel_ip>-<port>`."""

    def __init__(self, kernel_ip: str, ports: list[int], cap: int):
        self.folder = runs.make()  # 0700, a random name: the grader's alone
        self.ip, self.kernel_ip, self.cap = str(self.folder / "gate"), kernel_ip, cap
        self.dropped: list[int] = []  # the declared sizes of the messages dropped, in order
        self.listeners, self.open, self.closed, self.lock = [], {}, False, threading.Lock()
        for port in ports:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(f"{self.ip}-{port}")
            listener.listen(8)
            self.listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self.closed:
            try:
                client = listener.accept()[0]
            except OSError:
                return
            kernel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                kernel.connect(f"{self.kernel_ip}-{port}")
            except OSError:  # not listening yet: the client's libzmq connects again
                client.close()
                kernel.close()
                continue
            pair = (client, kernel)
            with self.lock:
                self.open[pair] = 2  # its threads still running: the last one closes it
            for run in (functools.partial(pump_capped, kernel, client, self.cap, self.dropped),
                        functools.partial(_copy, client, kernel)):
                threading.Thread(target=self._until_closed, args=(run, pair), daemon=True).start()

    def _until_closed(self, run, pair: tuple[socket.socket, socket.socket]) -> None:
        with contextlib.suppress(OSError, GateClosed):
            run()
        for sock in pair:  # either direction ending ends the connection: the other thread's read returns
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self.lock:
            self.open[pair] -= 1
            if self.open[pair]:
                return
            del self.open[pair]
        for sock in pair:  # the other thread is done with them too: no descriptor reused under it
            sock.close()

    def close(self) -> None:
        """Stop listening, end every connection, remove the folder."""
        self.closed = True
        with self.lock:
            pairs = list(self.open)
        for sock in [*self.listeners, *(sock for pair in pairs for sock in pair)]:  # their threads then close them
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for listener in self.listeners:
            listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)
