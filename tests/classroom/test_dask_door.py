"""The local Dask cluster takes tasks from the grader only: another local user cannot submit one (TLS, its own
certificate), while the grader's client can (the control)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.classroom.cluster import open_client
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
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs a root test run (setpriv)")
def test_another_user_cannot_submit_a_task_to_the_local_cluster():
    with open_client(1) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:"), address
        assert client.submit(os.getuid).result(timeout=60) == os.geteuid()  # the control: the grader's own client
        result = subprocess.run(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", "--clear-groups",
                                 sys.executable, "-c", SUBMIT, address], cwd="/", env={"PYTHONPATH": str(ROOT),
                                 "HOME": "/tmp"}, capture_output=True, text=True, timeout=180)
    lines = result.stdout.split("\n")[:3]
    assert len(lines) == 3 and all(line.startswith("refused") for line in lines), result.stdout + result.stderr
