"""environment.yml (for conda and Binder) mirrors requirements.txt exactly; torch stays pinned and first; the test
tools live in requirements-dev.txt, on top of the reader's set."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tools.environment import ROOT


def requirement_lines(name: str = "requirements.txt") -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def conda_pip_lines() -> list[str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    return [line for line in pip if line != "-e ." and not line.startswith("--")]


def test_environment_mirrors_requirements():
    assert conda_pip_lines() == requirement_lines()


def test_environment_pins_python_installs_the_helpers_and_takes_cpu_torch():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    assert "python=3.11" in environment["dependencies"]
    assert pip[-1] == "-e ."
    assert pip[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"


def test_every_requirement_is_pinned_exactly_and_torch_comes_first():
    lines = requirement_lines()
    assert lines[0] == "torch==2.13.0"
    assert all("==" in line and not any(op in line for op in (">", "<", "~", "!")) for line in lines), lines


def test_the_teachers_and_the_test_tools_extend_the_readers_set_without_repinning_it():
    """requirements.txt <- requirements-teacher.txt <- requirements-dev.txt: each adds pins, none pins a name again."""
    teacher, dev = requirement_lines("requirements-teacher.txt"), requirement_lines("requirements-dev.txt")
    assert teacher[0] == "-r requirements.txt" and dev[0] == "-r requirements-teacher.txt"
    names = [line.split("==")[0].lower() for line in requirement_lines() + teacher[1:] + dev[1:]]
    assert len(names) == len(set(names)), names  # torch and the rest pinned in one place only
    assert teacher[1:] and dev[1:]
    assert all(line.count("==") == 1 and not any(op in line for op in "<>~!") for line in teacher[1:] + dev[1:])


def test_the_readers_set_holds_no_test_tool():
    reader = {line.split("==")[0].lower() for line in requirement_lines()}
    assert not reader & {"pytest", "pytest-xdist", "nbval", "ruff", "playwright", "jupyter-repo2docker", "nbgrader"}


def test_importing_nbformat_builds_no_iri_grammar():
    """Every process that imports nbformat imports jsonschema; from 4.24 on that also builds rfc3987-syntax's Earley
    grammar (1.1 CPU s each): the pinned jsonschema leaves it out, and nbformat still validates a notebook."""
    check = ("import sys, nbformat; nbformat.validate(nbformat.v4.new_notebook()); "
             "print(sorted(name for name in sys.modules if name.startswith(('rfc3987', 'lark'))))")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
