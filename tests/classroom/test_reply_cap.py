"""A student's reply cannot swell in the grader's memory: one cap for its two files together, checked with fstat
before a byte is read or a buffer made; frames over the limit are refused from their 8-byte header alone."""

from __future__ import annotations

import base64
import json
import os
import struct
import tracemalloc

import pytest

from tools.classroom.policy import relay
from tools.classroom.protocol import frames
from tools.classroom.protocol.frames import MAX_FRAME, REPLY_CAP

MIB = 1 << 20


def _reply(folder, text: bytes, tensors: int | bytes):
    """A reply's two files as the kernel leaves them; an int makes a sparse file of that size (no disk used)."""
    stem = folder / "grader-reply-1"
    stem.with_suffix(".json").write_bytes(text)
    with open(stem.with_suffix(".safetensors"), "wb") as file:
        if type(tensors) is int:
            file.truncate(tensors)
        else:
            file.write(tensors)
    return stem


def _peak(function, *args) -> tuple[object, int]:
    """What `function(*args)` returned or raised, and the most memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        try:
            result = function(*args)
        except (OSError, frames.FrameError) as error:
            result = error
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("sizes", [(1, REPLY_CAP), (REPLY_CAP // 2 + MIB, REPLY_CAP // 2)])
def test_a_reply_over_the_cap_together_is_refused_before_anything_is_read(tmp_path, sizes):
    """Each file alone may be under the cap; together they are not: refused, with no buffer made (the old per-file
    cap of 512 MiB read both, then base64 and JSON copies, about 4 times the reply)."""
    stem = _reply(tmp_path, b"x" * sizes[0], sizes[1])
    error, peak = _peak(relay._read_reply, stem)
    assert isinstance(error, OSError) and "at most together" in str(error), error
    assert peak < MIB, peak


def test_a_reply_under_the_cap_is_read_once_and_removed_and_a_link_is_refused(tmp_path):
    stem = _reply(tmp_path, b'{"v": 1}', b"\x00" * 1000)
    assert relay._read_reply(stem) == [b'{"v": 1}', b"\x00" * 1000]  # the control
    assert not list(tmp_path.iterdir())
    (tmp_path / "secret").write_bytes(b"root's")
    stem.with_suffix(".json").symlink_to(tmp_path / "secret")
    stem.with_suffix(".safetensors").write_bytes(b"")
    with pytest.raises(OSError):
        relay._read_reply(stem)


def test_a_frame_over_the_limit_is_refused_from_its_header_and_parts_make_the_same_frame():
    read, write = os.pipe()
    try:
        os.write(write, struct.pack(">Q", MAX_FRAME + 1))
        error, peak = _peak(frames.receive, read)
        assert isinstance(error, frames.FrameError) and "over the limit" in str(error) and peak < MIB, (error, peak)
        text, tensors = b'{"a": [1, 2]}', bytes(range(256)) * 8
        parts = [b'{"op": "reply", "json": "', base64.b64encode(text), b'", "tensors": "',
                 base64.b64encode(tensors), b'"}']
        frames.send_parts(write, parts)
        got = frames.receive(read)
        assert got == json.loads(json.dumps({"op": "reply", "json": base64.b64encode(text).decode(),
                                             "tensors": base64.b64encode(tensors).decode()}))
        assert base64.b64decode(got["tensors"]) == tensors
        with pytest.raises(frames.FrameError, match="over the limit"):
            frames.send_parts(write, [b"x" * (MAX_FRAME + 1)])
    finally:
        os.close(read)
        os.close(write)


def test_the_cap_in_base64_fits_a_frame():
    assert 4 * -(-REPLY_CAP // 3) + 100 < MAX_FRAME


def test_a_sparse_reply_under_the_cap_is_refused_before_a_buffer_is_made(tmp_path):
    """A sparse file has a size and no pages: the student's memory would not pay for what the grader allocates."""
    stem = _reply(tmp_path, b'{"v": 1}', 8 * MIB)
    error, peak = _peak(relay._read_reply, stem)
    assert isinstance(error, OSError) and "sparse" in str(error) and peak < MIB, (error, peak)
    stem = _reply(tmp_path, b'{"v": 1}', b"\x01" * (8 * MIB))  # the control: written, so read
    assert len(relay._read_reply(stem)[1]) == 8 * MIB
