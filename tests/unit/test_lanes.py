"""`make test`'s two lanes run every test file exactly once, and the book's lane replays the browser visit only
through the variable the README names."""

from __future__ import annotations

import os
import shlex
import subprocess

from tools.environment import ROOT


def make_n(*targets: str) -> str:
    """What make would run for targets, run nothing; free of the make (and its variables) this test may run under."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VISIT_FROM_CACHE")}
    return subprocess.run(["make", "--no-print-directory", "-n", *targets], cwd=ROOT, check=True, env=env,
                          capture_output=True, text=True, timeout=120).stdout


def lane_commands() -> list[list[str]]:
    """The `pytest tests/...` commands the two lanes run, as make prints them without running them."""
    shown = make_n("test-built", "test-code")
    return [shlex.split(line) for line in shown.splitlines() if line.startswith("pytest tests")]


def runs(command: list[str], test_file: str) -> bool:
    """Whether a pytest command line collects test_file (a path given, or a folder above it, not --ignore'd)."""
    ignored = {arg.split("=", 1)[1] for arg in command if arg.startswith("--ignore=")}
    paths = [arg for arg in command[1:] if arg.startswith("tests")]
    return test_file not in ignored and any(test_file == p or test_file.startswith(p.rstrip("/") + "/") for p in paths)


def test_every_test_file_runs_in_exactly_one_lane():
    commands = lane_commands()
    assert len(commands) == 2, commands
    found = (ROOT / "tests").rglob("test_*.py")
    files = sorted(str(p.relative_to(ROOT)) for p in found if "node_modules" not in p.parts)
    assert len(files) > 50
    counts = {name: sum(runs(command, name) for command in commands) for name in files}
    assert {name: n for name, n in counts.items() if n != 1} == {}


def test_the_check_sees_a_file_left_out_or_run_twice():
    command = ["pytest", "tests/classroom", "--ignore=tests/classroom/test_cluster.py", "-n", "1"]
    assert runs(command, "tests/classroom/test_grading.py")
    assert not runs(command, "tests/classroom/test_cluster.py")
    assert not runs(command, "tests/unit/test_tokens.py")
    assert runs(["pytest", "tests/book", "tests/classroom/test_cluster.py"], "tests/classroom/test_cluster.py")


def test_the_book_lane_replays_the_visit_through_visit_from_cache():
    book_lane = [c for c in lane_commands() if "tests/book" in c]
    assert len(book_lane) == 1 and "--visit-cache" in book_lane[0]
    shown = make_n("test-built", "VISIT_FROM_CACHE=")
    assert "pytest tests/book" in shown and "--visit-cache" not in shown
