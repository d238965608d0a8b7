"""A kernel's ZeroMQ message over the cap is dropped whole by the gate (policy/gate.py) before the grader's process
holds it, and the connection goes on: a student cannot swell the grading process (the grader's uid, in no sandbox
group) with one huge output, nor lose the cells after it (attack review 46b-2)."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest
import zmq

from tools.classroom.policy.gate import FRAME_COST, Gate
from tools.environment import ROOT

CAP = 8 << 20


@pytest.fixture
def kernel_side(tmp_path):
    """A PUB and a ROUTER socket where a kernel binds its own, and a gate in front of them."""
    context = zmq.Context()
    pub, router = context.socket(zmq.PUB), context.socket(zmq.ROUTER)
    pub.bind(f"ipc://{tmp_path}/kernel-1")
    router.bind(f"ipc://{tmp_path}/kernel-2")
    gate = Gate(f"{tmp_path}/kernel", [1, 2], CAP)
    sub, dealer = context.socket(zmq.SUB), context.socket(zmq.DEALER)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    for sock in (sub, dealer):
        sock.rcvtimeo = 20_000
    sub.connect(f"ipc://{gate.ip}-1")
    dealer.connect(f"ipc://{gate.ip}-2")
    dealer.send(b"hello")  # both ways through the gate
    identity, hello = router.recv_multipart()
    assert hello == b"hello"
    time.sleep(0.3)  # the subscription reaches the PUB socket
    yield pub, router, identity, sub, dealer, gate
    gate.close()
    context.destroy(linger=0)


def test_a_message_over_the_cap_is_dropped_whole_and_the_next_ones_arrive(kernel_side):
    pub, router, identity, sub, dealer, gate = kernel_side
    parts = [b"x" * (20 << 20)] * 3  # 60 MiB in three parts, each one under the cap: the message is over it
    tracemalloc.start()
    pub.send_multipart([b"before"])
    pub.send_multipart(parts)
    pub.send_multipart([b"after", b"y" * (CAP // 2)])  # under the cap: whole
    received = [sub.recv_multipart(), sub.recv_multipart()]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert received == [[b"before"], [b"after", b"y" * (CAP // 2)]]
    assert len(gate.dropped) == 1 and gate.dropped[0] >= 60 << 20, gate.dropped
    assert peak < 3 * CAP, peak  # the gate held at most the cap of the dropped one (and the one it passed on)
    router.send_multipart([identity, b"z" * (100 << 20)])  # the shell's way: dropped, then a reply arrives
    router.send_multipart([identity, b"reply"])
    assert dealer.recv_multipart() == [b"reply"] and len(gate.dropped) == 2


def test_a_kernel_that_is_not_zmtp_3_is_cut_off(tmp_path):
    """A ZMTP 2 greeting (or any other): libzmq would accept it and read frames another way; the gate ends it."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(f"{tmp_path}/kernel-1")
    server.listen(1)
    gate = Gate(f"{tmp_path}/kernel", [1], CAP)

    def old_kernel():
        peer = server.accept()[0]
        peer.sendall(b"\xff" + bytes(8) + b"\x7f" + b"\x01\x05" + bytes(52))  # ZMTP 2.0, then a frame
        time.sleep(0.5)
        peer.close()

    threading.Thread(target=old_kernel, daemon=True).start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(f"{gate.ip}-1")
    client.settimeout(10)
    seen = b""
    while data := client.recv(100):
        seen += data
    gate.close()
    signature = b"\xff" + bytes(8) + b"\x7f"
    assert seen == signature[:len(seen)], seen  # at most the signature: the version byte was never passed on


def _ready(socket_type: bytes) -> bytes:
    """A READY command as libzmq sends it (NULL mechanism): its Socket-Type property."""
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    return bytes([0x04, len(body)]) + body


def _frame(data: bytes, more: bool) -> bytes:
    return bytes([0x02 | more]) + struct.pack(">Q", len(data)) + data


@contextlib.contextmanager
def raw_kernel(tmp_path, send):
    """A kernel's ROUTER socket spoken by hand: greeting, READY, then `send(peer)`; yields (a DEALER connected
    through a gate, the gate, a list that gets True once the gate ended the kernel's connection)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(f"{tmp_path}/kernel-1")
    server.listen(1)
    gate, ended = Gate(f"{tmp_path}/kernel", [1], CAP), []

    def kernel():
        peer = server.accept()[0]
        peer.sendall(b"\xff" + bytes(8) + b"\x7f\x03\x01" + b"NULL" + bytes(16) + b"\x01" + bytes(31))
        peer.recv(64)
        peer.sendall(_ready(b"ROUTER"))
        try:
            send(peer)
        except OSError:
            ended.append(True)

    thread = threading.Thread(target=kernel, daemon=True)
    thread.start()
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.rcvhwm, dealer.rcvtimeo = 4, 3000
    dealer.connect(f"ipc://{gate.ip}-1")
    try:
        yield dealer, gate, ended, thread
    finally:
        gate.close()
        context.destroy(linger=0)
        server.close()


def test_commands_a_kernel_never_sends_end_its_connection(tmp_path):
    """SUBSCRIBE commands with MORE set: libzmq would join them into one message no cap counts (attack review
    46c-1). The gate ends the connection at the first one; nothing reaches the grader's socket."""
    bomb = bytes([0x07, 0xFF]) + b"\x09SUBSCRIBE" + bytes(0xFF - 10)  # a command with MORE set

    def send(peer):
        for _ in range(3000):
            peer.sendall(bomb)
        peer.sendall(_frame(b"last", False))

    with raw_kernel(tmp_path, send) as (dealer, gate, ended, thread):
        thread.join(30)
        with pytest.raises(zmq.Again):
            dealer.recv_multipart()
        assert ended == [True] and gate.dropped == []


def test_a_message_of_many_small_frames_is_dropped_whole(tmp_path):
    """A message of 100,000 empty frames (200 KB on the wire, but a frame costs the grader ~330 B in libzmq and
    jupyter_client: 46c-2) is over MAX_FRAMES: dropped whole, and the next message arrives."""

    def send(peer):
        peer.sendall(_frame(b"", True) * 100_000 + _frame(b"end", False))
        peer.sendall(_frame(b"next", False))
        time.sleep(2)

    with raw_kernel(tmp_path, send) as (dealer, gate, ended, thread):
        assert dealer.recv_multipart() == [b"next"]
        assert len(gate.dropped) == 1 and gate.dropped[0] > 100_000 * FRAME_COST, gate.dropped


RUN = r"""
import dataclasses, json, sys, tempfile
from pathlib import Path
import nbformat
from tools.classroom.nbgrader.execute import SandboxedExecute
from tools.classroom.policy import sandbox

sandbox.POLICY = dataclasses.replace(sandbox.POLICY, message=int(sys.argv[1]))
cell = nbformat.v4.new_code_cell
notebook = nbformat.v4.new_notebook(cells=[
    cell("x = 1\n", metadata={"nbgrader": {"grade_id": "setup"}}),
    cell("from IPython.display import display\ndisplay({'text/plain': 'x' * (256 << 20)}, raw=True)\nprint('mine')",
         metadata={"nbgrader": {"grade_id": "a", "solution": True}}),
    cell("print('later')\n", metadata={"nbgrader": {"grade_id": "b", "solution": True}}),
    cell("assert x == 1\n", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})])
def peak_kib():  # this process image's peak RSS: ru_maxrss would keep the forking parent's across exec
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
before = peak_kib()
folder = Path(tempfile.mkdtemp())
SandboxedExecute(report_path=str(folder / "r.json"), cell_timeout=120).preprocess(
    notebook, {"metadata": {"path": str(folder)}})
grew = (peak_kib() - before) >> 10
print(json.dumps({"grew_mib": grew, "cells": [cell.outputs for cell in notebook.cells[1:]],
                  "report": json.loads((folder / "r.json").read_text())}))
"""


def test_a_256_mib_output_is_dropped_before_the_grader_holds_it_and_the_notebook_goes_on(bwrap):
    outcomes = []
    for cap in (CAP, 1 << 40):  # each in a process of its own: VmHWM is the process's peak
        result = subprocess.run([sys.executable, "-c", RUN, str(cap)], cwd=ROOT, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        outcomes.append(json.loads(result.stdout.strip().splitlines()[-1]))
    capped, uncapped = outcomes
    answer, later, test = capped["cells"]
    texts = [out.get("text", "") for out in answer]
    assert capped["grew_mib"] < 64, capped["grew_mib"]  # the gate's cap and the client's queue, not 256 MiB
    assert texts[0] == "mine\n" and "was dropped unread" in texts[1] and len(json.dumps(answer)) < 10_000, answer
    assert later == [{"output_type": "stream", "name": "stdout", "text": "later\n"}] and test == [], capped
    assert capped["report"]["truncated"] == [1] and capped["report"]["timeouts"] == [], capped["report"]
    # the control: without the cap the message arrives (the output cap cuts it after), and the grader held it first
    assert uncapped["report"]["truncated"] == [1] and uncapped["grew_mib"] >= 256, uncapped
