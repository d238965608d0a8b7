"""Binder / JupyterHub: repo2docker (no Docker engine needed for --no-build) picks environment.yml and installs it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.environment import ROOT

REPO2DOCKER = Path(sys.executable).with_name("repo2docker")


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory) -> str:
    """The Dockerfile repo2docker generates for a copy of the repository's committed files."""
    if not REPO2DOCKER.exists():
        pytest.fail("repo2docker is missing: it is pinned in requirements-dev.txt (make test installs it)")
    copy = tmp_path_factory.mktemp("repo")
    for name in ("environment.yml", "requirements.txt", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "helpers", copy / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([str(REPO2DOCKER), "--no-build", "--no-run", "--debug", str(copy)],
                            capture_output=True, text=True, timeout=120, check=True)
    return result.stdout + result.stderr


def test_repo2docker_picks_the_conda_environment(dockerfile):
    assert "Building conda environment for python=3.11" in dockerfile
    assert '--file "environment.yml"' in dockerfile


def test_the_environment_is_installed_after_the_repository_is_copied(dockerfile):
    """`-e .` in environment.yml's pip list needs the helpers package in the working directory."""
    copy = dockerfile.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    install = dockerfile.index('env update -p ${NB_PYTHON_PREFIX} --file "environment.yml"')
    assert copy < install
    assert "WORKDIR ${REPO_DIR}" in dockerfile[:copy]


def test_no_other_build_file_competes_with_environment_yml():
    """repo2docker would prefer a Dockerfile or a binder/ folder over environment.yml."""
    assert not (ROOT / "Dockerfile").exists() and not (ROOT / "binder").exists()
    assert not (ROOT / "postBuild").exists()
