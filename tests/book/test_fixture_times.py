"""tools/testing/pytest_fixture_times.py: the session ends with its slowest fixture set-ups, xdist workers included."""

from __future__ import annotations

import re

import pytest

from tools.environment import ROOT

pytest_plugins = ["pytester"]

SUITE = """
import time
import pytest

@pytest.fixture(scope="session")
def slow():
    time.sleep(0.3)

@pytest.fixture
def busy():
    end = time.process_time() + 0.1
    while time.process_time() < end:
        pass

def test_one(slow, busy): pass
def test_two(slow, busy): pass
"""


def rows(output: str) -> dict[str, tuple[float, float, int]]:
    """The summary's rows: fixture -> (wall s, CPU s, set-ups)."""
    found = re.findall(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+\S+::(\w+) \(\w+\)$", output, re.MULTILINE)
    return {name: (float(wall), float(cpu), int(count)) for wall, cpu, count, name in found}


@pytest.mark.parametrize("workers", [[], ["-n", "1"]])
def test_the_slowest_set_ups_are_printed_with_wall_and_cpu_time(pytester, monkeypatch, workers):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the plugin, from this checkout, in the xdist worker
    pytester.makepyfile(test_suite=SUITE)
    # without workers the plugin runs in this process (a new pytest config; ~2.5 CPU s less than a new python)
    run = pytester.runpytest_subprocess if workers else pytester.runpytest_inprocess
    result = run("-p", "tools.testing.pytest_fixture_times", "-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    assert "slowest 15 fixture set-ups" in output
    found = rows(output)
    assert found["slow"][2] == 1 and 0.3 <= found["slow"][0] and found["slow"][1] < 0.2  # a wait: wall, no CPU
    assert found["busy"][2] == 2 and found["busy"][1] >= 0.2  # two set-ups of 0.1 s CPU each
    walls = [wall for wall, _, _ in found.values()]
    assert walls == sorted(walls, reverse=True)  # the slowest first


def test_zero_prints_nothing(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess("-p", "tools.testing.pytest_fixture_times", "--fixture-times=0")
    result.assert_outcomes(passed=2)
    assert "fixture set-ups" not in result.stdout.str()
