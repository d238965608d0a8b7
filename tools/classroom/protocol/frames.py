"""Length-prefixed JSON frames between the grader and its trusted test process (pipes, never student code)."""

from __future__ import annotations

import json
import os
import select
import struct
import time

MAX_FRAME = 1 << 30  # bytes in one frame: a model's worth of tensors


class FrameError(RuntimeError):
    """The other side closed the pipe, sent a malformed frame, or did not answer in time."""


def send(fd: int, message: dict) -> None:
    """Write one frame: 8 bytes of length, then the JSON of `message`."""
    data = json.dumps(message).encode()
    data = struct.pack(">Q", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise FrameError("no answer in time")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameError("the pipe was closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> dict:
    """Read one frame, waiting until `deadline` (time.monotonic()) at most; FrameError if none came."""
    (size,) = struct.unpack(">Q", _read(fd, 8, deadline))
    if size > MAX_FRAME:
        raise FrameError(f"a frame of {size} bytes is over the limit of {MAX_FRAME}")
    try:
        message = json.loads(_read(fd, size, deadline))
    except ValueError:
        raise FrameError("a frame is not JSON") from None
    if type(message) is not dict:
        raise FrameError("a frame is not a JSON object")
    return message
