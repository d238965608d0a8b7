"""Each fork of the warm trusted server is moved into a memory cgroup of its own, capped as a kernel is, before it
runs a test (relay.TrustedTests._cap_fork): one submission's hidden tests cannot take the memory its neighbours'
forks share with the server (its group is 4 x the cap)."""

from __future__ import annotations

import os
import shutil

import pytest

from tools.classroom.policy import cgroups, sandbox, warm
from tools.classroom.policy.relay import TrustedTests

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or cgroups.parent("memory") is None,
                                reason="a memory cgroup per fork needs a root grader with a memory cgroup")
HOG = "hog = b'1' * (600 << 20)\nassert len(hog) > 0"  # 600 MiB, written: over 256, under the server's 2048


@pytest.fixture(scope="module")
def server(bwrap):
    made = warm.TrustedServer("x = 1")
    yield str(made.socket)
    made.close()


def _run(server: str, memory_mb: int) -> dict:
    kernel = sandbox.private_folder("grading-")
    tests = TrustedTests(kernel, lambda code, timeout: None, memory_mb=memory_mb, server=server)
    try:
        tests.start("x = 1", 120)
        small = tests.run("small", "assert x == 1", 60, 120)
        big = tests.run("big", HOG, 60, 120)
        return {"cap": tests.fork_cap, "small": small["status"], "big": big, "kills": cgroups.oom_kills(tests.scratch)}
    finally:
        tests.close()
        shutil.rmtree(kernel, ignore_errors=True)
        sandbox.release(kernel)


def test_a_fork_over_its_own_cap_is_stopped_and_the_server_goes_on(server):
    capped = _run(server, 256)
    assert capped["cap"].startswith("memory cgroup (256 MiB for this fork"), capped
    assert capped["small"] == "passed" and capped["big"]["status"] != "passed", capped
    assert capped["kills"] >= 1, capped  # stopped by its own group, at its cap
    control = _run(server, 2048)  # the same server and test under a cap above the test's 600 MiB: it passes
    assert control["big"]["status"] == "passed" and control["kills"] == 0, control
