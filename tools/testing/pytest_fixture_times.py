"""pytest plugin: where a session spends its set-up time, on any machine: the slowest fixture set-ups (wall and this
process's CPU seconds, summed over each fixture's set-ups, xdist workers included), printed at the session's end.

`--fixture-times=N` prints the N slowest (15 by default; 0 prints none). A wall time far above its CPU time waits on
something else: a subprocess (a browser, a kernel, a sandbox), the disk, or a machine others share (see `uptime`).
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

WORKER_KEY = "fixture_setup_times"  # what an xdist worker hands its controller


def pytest_addoption(parser):
    parser.addoption("--fixture-times", type=int, default=15, metavar="N",
                     help="print the N slowest fixture set-ups at the end of the session (0: none)")


class FixtureTimes:
    """Each fixture's set-ups, by `<where it is defined>::<name> (<scope>)`: [count, wall s, CPU s]."""

    def __init__(self, config) -> None:
        self.config = config
        self.times: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])

    def add(self, name: str, count: float, wall: float, cpu: float) -> None:
        entry = self.times[name]
        entry[0] += count
        entry[1] += wall
        entry[2] += cpu

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        name = f"{fixturedef.baseid or '<plugin>'}::{fixturedef.argname} ({fixturedef.scope})"
        self.add(name, 1, time.perf_counter() - wall, time.process_time() - cpu)

    def pytest_sessionfinish(self, session):
        if hasattr(self.config, "workeroutput"):  # an xdist worker: the controller prints
            self.config.workeroutput[WORKER_KEY] = dict(self.times)

    def pytest_testnodedown(self, node, error):
        for name, entry in getattr(node, "workeroutput", {}).get(WORKER_KEY, {}).items():
            self.add(name, *entry)

    def pytest_terminal_summary(self, terminalreporter):
        top = self.config.getoption("fixture_times")
        if top <= 0 or not self.times or hasattr(self.config, "workeroutput"):
            return
        terminalreporter.write_sep("=", f"slowest {top} fixture set-ups (summed over their set-ups)")
        terminalreporter.write_line(f"{'wall s':>9} {'CPU s':>8} {'set-ups':>7}  fixture")
        for name, (count, wall, cpu) in sorted(self.times.items(), key=lambda item: -item[1][1])[:top]:
            terminalreporter.write_line(f"{wall:9.2f} {cpu:8.2f} {int(count):7d}  {name}")


def pytest_configure(config):
    config.pluginmanager.register(FixtureTimes(config), "fixture_times")
