"""The local Dask cluster takes tasks from the grader only: another local user cannot submit one (TLS, its own
certificate), while the grader's client can (the control); nor read anything over HTTP from any of its ports."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from tools.classroom.run.cluster import open_client
from tools.environment import ROOT

STRANGER = 65534
# Another user's attempt: a client on the scheduler's address, with TLS but no certificate, or without TLS at all.
SUBMIT = r"""
import os, sys
from distributed import Client
from distributed.security import Security
for address, security in ((sys.argv[1], None), (sys.argv[1].replace("tls://", "tcp://"), None),
                          (sys.argv[1], Security(require_encryption=True))):
    try:
        with Client(address, security=security, timeout=10) as client:
            print("submitted", client.submit(os.getuid).result(timeout=10))
    except Exception as error:
        print("refused", type(error).__name__)
sys.stdout.flush()
os._exit(0)  # else ~20 s more to exit after the refusals (measured 22.4 s -> 0.9 s); no check reads past here
"""
# Another user's plain HTTP requests to every port the cluster listens on: pages, metrics, the workers' call stacks.
BROWSE = r"""
import socket, sys
for port in sys.argv[1:]:
    for path in ("/info/main/workers.html", "/metrics", "/json/counts.json", "/health", "/info/call-stacks/x.html",
                 "/individual-plots.json", "/"):
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as door:
                door.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
                reply = door.recv(64).split(b"\r\n")[0].decode(errors="replace") or "closed"
        except OSError as error:
            reply = type(error).__name__
        print(port, path, reply)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs a root test run (setpriv)")
def test_another_user_cannot_submit_a_task_to_the_local_cluster():
    with open_client(1) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:"), address
        assert client.submit(os.getuid).result(timeout=60) == os.geteuid()  # the control: the grader's own client
        result = _as_stranger(SUBMIT, address)
        processes = [psutil.Process(), *psutil.Process().children(recursive=True)]  # scheduler, nannies, workers
        ports = sorted({str(door.laddr.port) for process in processes for door in process.net_connections("tcp")
                        if door.status == psutil.CONN_LISTEN})
        browsed = _as_stranger(BROWSE, *ports)
    lines = result.stdout.split("\n")[:3]
    assert len(lines) == 3 and all(line.startswith("refused") for line in lines), result.stdout + result.stderr
    replies = [line.split(" ", 2)[2] for line in browsed.stdout.splitlines()]
    assert len(replies) == 7 * len(ports) >= 7 * 3, browsed.stdout + browsed.stderr  # comm, and HTTP of each process
    assert not [reply for reply in replies if " 200 " in reply], browsed.stdout  # nothing readable
    assert "HTTP/1.1 404 Not Found" in replies, browsed.stdout  # an HTTP server was reached: it has no route


def _as_stranger(source: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", "--clear-groups",
                           sys.executable, "-c", source, *arguments], cwd="/", env={"PYTHONPATH": str(ROOT),
                           "HOME": "/tmp"}, capture_output=True, text=True, timeout=180)
