"""Length-prefixed JSON frames between the grader and its trusted test process (pipes, never student code)."""

from __future__ import annotations

import json
import os
import select
import struct
import time

REPLY_CAP = 128 << 20  # bytes of one reply from the student's kernel, its JSON and its tensors together
MAX_FRAME = REPLY_CAP * 4 // 3 + (1 << 20)  # bytes in one frame: a reply in base64, and the frame's own words


class FrameError(RuntimeError):
    """The other side closed the pipe, sent a malformed frame, or did not answer in time."""


def send(fd: int, message: dict) -> None:
    """Write one frame: 8 bytes of length, then the JSON of `message`."""
    send_parts(fd, [json.dumps(message).encode()])


def send_parts(fd: int, parts: list[bytes]) -> None:
    """Write one frame whose JSON is the concatenation of `parts`, without joining them (a reply's tensors in
    base64 are written from where they lie, never copied into one more buffer)."""
    size = sum(len(part) for part in parts)
    if size > MAX_FRAME:
        raise FrameError(f"a frame of {size} bytes is over the limit of {MAX_FRAME}")
    for part in [struct.pack(">Q", size), *parts]:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]


def _read(fd: int, size: int, deadline: float | None) -> bytearray:
    """Exactly `size` bytes (already checked against MAX_FRAME) into one buffer, the only one made."""
    data, done = bytearray(size), 0
    view = memoryview(data)
    while done < size:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise FrameError("no answer in time")
        got = os.readv(fd, [view[done:done + (1 << 20)]])
        if not got:
            raise FrameError("the pipe was closed")
        done += got
    return data


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
