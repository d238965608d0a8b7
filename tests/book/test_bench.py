"""`make bench` runs from a fresh clone wherever it lives: tools.bench is a `python -m` entry point, no path tricks."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from tools.bench import FLOOR
from tools.environment import offline_environment
from tools.testing.checkout import copy_checkout

FIXTURE = "tests/book/fixtures/gpu_cell.ipynb"  # four cells, nothing imported: a kernel start and three small cells


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The project copied under a fresh temporary directory whose name has a space, as a reader's clone might."""
    return copy_checkout(tmp_path_factory.mktemp("bench") / "a clone")


def run(clone, command: list[str]) -> subprocess.CompletedProcess:
    """A command run from the clone's root, as `make bench` runs it."""
    return subprocess.run(command, cwd=clone, capture_output=True, text=True, env=offline_environment(), timeout=300)


def bench(clone, *arguments: str) -> subprocess.CompletedProcess:
    """`python -m tools.bench ARGUMENTS` from the clone's root (`make bench`)."""
    return run(clone, [sys.executable, "-m", "tools.bench", *arguments])


def test_help_runs_from_a_clone(clone):
    result = bench(clone, "--help")
    assert result.returncode == 0, result.stderr
    assert "--floor" in result.stdout


def test_floor_step_runs_a_notebook_from_a_clone(clone, tmp_path):
    out = tmp_path / "floor.json"
    result = run(clone, [*FLOOR, FIXTURE, "--out", str(out)])  # the very command `make bench` runs for its floor
    assert result.returncode == 0, result.stderr
    timings = json.loads(out.read_text())
    assert list(timings) == [FIXTURE]  # keyed by the path inside the clone, so the clone was the root
    code_cells = [i for i, cell in enumerate(nbformat.read(clone / FIXTURE, 4).cells) if cell.cell_type == "code"]
    assert sorted(cell["cell"] for cell in timings[FIXTURE]["slowest_cells"]) == code_cells
    assert timings[FIXTURE]["seconds"] > 0


def test_bench_option_errors_are_one_line_usage(clone):
    result = bench(clone, "--no-such-option")
    assert result.returncode == 2
    assert "usage: python -m tools.bench" in result.stderr
