"""environment.yml (for conda and Binder) mirrors requirements.txt exactly; torch stays pinned and first."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).parents[2]


def requirement_lines() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
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
