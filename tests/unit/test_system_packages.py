"""tools/system_packages.sh, the one list of system packages `make test` needs: run with a PATH of stand-ins that
makes a package missing, the user root or not, and the system Debian or not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools.environment import ROOT

SCRIPT = ROOT / "tools" / "system_packages.sh"
PROGRAMS = {"chromium", "chromedriver", "bwrap", "npm"}


def run(tmp_path: Path, present: set[str], uid: int = 1000, os_id: str = "debian", apt_fails: bool = False):
    """Run the script with only `present` (and `id`, `apt-get` stand-ins) on PATH; return it and apt-get's calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    stand_ins = {name: "exit 0" for name in present}
    stand_ins["id"] = f"echo {uid}"
    stand_ins["apt-get"] = f'echo "$*" >> "{calls}"; exit {int(apt_fails)}'
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    os_release = tmp_path / "os-release"
    os_release.write_text(f"ID={os_id}\nNAME=stand-in\n")
    result = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True,
                            env={"PATH": str(bin_dir), "OS_RELEASE": str(os_release)})
    return result, calls.read_text().splitlines() if calls.exists() else []


def test_nothing_missing_is_silent_and_installs_nothing(tmp_path):
    result, calls = run(tmp_path, PROGRAMS, uid=0)
    assert (result.returncode, result.stdout, result.stderr, calls) == (0, "", "", [])


def test_a_user_who_is_not_root_gets_one_line_with_the_command_and_status_1(tmp_path):
    result, calls = run(tmp_path, PROGRAMS - {"bwrap", "chromedriver"})
    assert result.returncode == 1 and calls == [] and result.stderr == ""
    assert result.stdout == ("make: the tests need chromium-driver bubblewrap: run `sudo apt-get update && "
                             "sudo apt-get install -y chromium-driver bubblewrap`, then make test again\n")


def test_root_on_debian_updates_then_installs_only_what_is_missing(tmp_path):
    result, calls = run(tmp_path, PROGRAMS - {"chromium", "npm"}, uid=0, os_id="ubuntu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == ["update -qq", "install -y -qq chromium nodejs npm"]


def test_a_node_from_elsewhere_is_kept(tmp_path):
    result, calls = run(tmp_path, PROGRAMS - {"chromium"}, uid=0)
    assert calls == ["update -qq", "install -y -qq chromium"]  # no nodejs over the npm on PATH


@pytest.mark.parametrize("uid", [0, 1000])
def test_another_system_is_told_what_to_install_and_nothing_runs(tmp_path, uid):
    result, calls = run(tmp_path, PROGRAMS - {"bwrap"}, uid=uid, os_id="fedora")
    assert result.returncode == 1 and calls == []
    assert result.stdout.count("\n") == 1 and "bubblewrap" in result.stdout and "package manager" in result.stdout


def test_a_failed_install_fails_make(tmp_path):
    result, calls = run(tmp_path, PROGRAMS - {"bwrap"}, uid=0, apt_fails=True)
    assert result.returncode != 0 and calls == ["update -qq"]
