"""One home for the plumbing: the repository root and the offline environment come from tools/environment.py, and no
other module computes the root from its own path or sets an offline variable itself."""

from __future__ import annotations

import os
import re
import subprocess
from fnmatch import fnmatch
from pathlib import Path

from tools.environment import OFFLINE, ROOT, offline_environment
from tools.testing.checkout import NOT_IN_A_CLONE

# Files allowed to do it themselves, each with its reason.
ALLOWED = {
    "tools/environment.py": "the one home",
    # The installed package cannot import tools/ (the wheel holds helpers/ only); in a checkout this is the root.
    "helpers/checkpoint.py": "a wheel has no tools/",
    "helpers/notebook.py": "setup() quiets progress bars in a chapter's kernel, in Colab too, where tools/ is absent",
}
SOURCES = ("*.py", "Makefile", "*.sh", "*.cfg", "*.toml", "*.yml", "run")
NAMES = "|".join(map(re.escape, OFFLINE))
ROOT_FROM_FILE = re.compile(r"__file__.*(\.parents\[|\.parent\.parent)|dirname\(.*dirname\(.*__file__")
SETS_OFFLINE = re.compile(rf"""["']({NAMES})["']\s*[:,\]]|export\s+({NAMES})\b|^\s*({NAMES})\s*[:?]?=""")


def project_files() -> list[Path]:
    """Every source file a clone holds (not the venv, builds or caches: their folders are not entered)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if not any(fnmatch(name, skip) for skip in NOT_IN_A_CLONE)]
        found += [Path(folder) / name for name in files if any(fnmatch(name, source) for source in SOURCES)]
    return sorted(found)


def offenders(pattern: re.Pattern) -> dict[str, list[str]]:
    """path -> the lines matching pattern, for every project file outside the allow-lists."""
    hits = {}
    for path in project_files():
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED or name == "tests/unit/test_plumbing.py":
            continue
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if pattern.search(line)]
        if lines:
            hits[name] = lines
    return hits


def test_the_scan_sees_the_project_and_its_patterns_match():
    names = {path.relative_to(ROOT).as_posix() for path in project_files()}
    assert {"Makefile", "tools/bench.py", "tests/conftest.py", ".ci/run", "helpers/checkpoint.py"} <= names
    assert not any(name.startswith((".venv/", "_build/")) for name in names)
    assert ROOT_FROM_FILE.search("ROOT = Path(__file__).resolve().parents[2]")
    assert ROOT_FROM_FILE.search("HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))")
    assert not ROOT_FROM_FILE.search('FIXTURE = Path(__file__).parent / "fixtures"')  # its own folder is fine
    assert SETS_OFFLINE.search('os.environ.setdefault("HF_HUB_OFFLINE", "1")')
    assert SETS_OFFLINE.search('env = {"TRANSFORMERS_OFFLINE": "1"}')
    assert SETS_OFFLINE.search("export HF_HUB_OFFLINE ?= 1")
    assert not SETS_OFFLINE.search('"no network, or HF_HUB_OFFLINE=1). Three ways out"')  # a message naming it


def test_no_module_computes_the_repository_root_itself():
    assert offenders(ROOT_FROM_FILE) == {}


def test_no_module_sets_the_offline_environment_itself():
    assert offenders(SETS_OFFLINE) == {}


def test_the_root_is_the_checkout():
    assert (ROOT / "pyproject.toml").is_file() and (ROOT / "tools" / "environment.py").is_file()
    assert 'name = "bert-embeddings-book"' in (ROOT / "pyproject.toml").read_text()


def test_a_setting_the_reader_made_wins():
    env = offline_environment({"HF_HUB_OFFLINE": "0", "PATH": "/bin"})
    assert env["HF_HUB_OFFLINE"] == "0" and env["PATH"] == "/bin"
    assert {key: env[key] for key in OFFLINE if key != "HF_HUB_OFFLINE"} == \
        {key: value for key, value in OFFLINE.items() if key != "HF_HUB_OFFLINE"}


def test_make_exports_the_same_settings(tmp_path):
    probe = tmp_path / "probe.mk"
    probe.write_text("include Makefile\nprobe-env:\n\t@env\n")
    keep = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "0"}  # the reader's choice kept
    result = subprocess.run(["make", "--no-print-directory", "-s", "-f", str(probe), "probe-env"], cwd=ROOT,
                            env=keep, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    exported = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert {key: exported.get(key) for key in OFFLINE} == {**OFFLINE, "HF_HUB_OFFLINE": "0"}
