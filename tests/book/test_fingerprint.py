"""tools/book/fingerprint.py: a build is emptied when what its outputs depend on changes, and left alone when not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers import checkpoint
from tools.book import fingerprint as fp
from tools.environment import ROOT


def fake_build(build):
    """A build folder holding a file in each output that a build leaves behind."""
    for name in fp.BUILD_OUTPUTS:
        (build / name).mkdir(parents=True)
        (build / name / "kept").write_text("x")


def outputs_left(build) -> list[str]:
    return sorted(name for name in fp.BUILD_OUTPUTS if (build / name / "kept").exists())


def project(tmp_path, value: int = 1) -> Path:
    """A one-page book whose notebook prints a value from its own helpers package."""
    (tmp_path / "helpers").mkdir(exist_ok=True)
    (tmp_path / "helpers" / "__init__.py").write_text(f"VALUE = {value}\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    return tmp_path


@pytest.mark.parametrize("value", [None, "", "  ", "bert-base-uncased", " /data/my-bert "])
def test_reads_the_variable_as_helpers_does(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("BERT_BOOK_CHECKPOINT", raising=False)
    else:
        monkeypatch.setenv("BERT_BOOK_CHECKPOINT", value)
    assert fp.checkpoint_asked() == checkpoint.checkpoint_spec()
    assert fp.DEFAULT == checkpoint.PACKAGED


def test_a_build_without_a_record_is_emptied(tmp_path):
    fake_build(tmp_path)  # made before fingerprints, or by hand: nobody knows with what
    assert fp.record_fingerprint(tmp_path, {"a": 1}) == ["no record"]
    assert outputs_left(tmp_path) == []
    assert json.loads((tmp_path / fp.RECORD).read_text()) == {"a": 1}


def test_the_same_fingerprint_keeps_the_build_and_the_record_time(tmp_path):
    fp.record_fingerprint(tmp_path, fp.fingerprint(ROOT))
    fake_build(tmp_path)  # built with it
    before = (tmp_path / fp.RECORD).stat().st_mtime_ns
    assert fp.record_fingerprint(tmp_path, fp.fingerprint(ROOT)) == []
    assert (tmp_path / fp.RECORD).stat().st_mtime_ns == before  # make sees nothing new
    assert outputs_left(tmp_path) == sorted(fp.BUILD_OUTPUTS)


def test_another_checkpoint_empties_the_cache_and_the_build(tmp_path, capsys):
    fp.record_fingerprint(tmp_path, fp.fingerprint(ROOT, "packaged"))
    fake_build(tmp_path)
    (tmp_path / "bench.json").write_text("{}")  # not a build output: stays
    assert fp.record_fingerprint(tmp_path, fp.fingerprint(ROOT, "/data/my-bert")) == ["checkpoint"]
    assert outputs_left(tmp_path) == [] and (tmp_path / "bench.json").exists()
    assert "checkpoint changed" in capsys.readouterr().out


def test_a_helper_or_a_pin_changes_the_fingerprint(tmp_path):
    before = fp.fingerprint(project(tmp_path, 1))
    assert fp.fingerprint(project(tmp_path, 1)) == before
    after_helper = fp.fingerprint(project(tmp_path, 2))
    (tmp_path / "requirements.txt").write_text("torch==2.14.1\n")
    after_pin = fp.fingerprint(tmp_path)
    assert fp.changed_keys(before, after_helper) == ["helpers_and_pins"]
    assert len({before["helpers_and_pins"], after_helper["helpers_and_pins"], after_pin["helpers_and_pins"]}) == 3


def test_another_installed_torch_changes_the_fingerprint(monkeypatch):
    before = fp.fingerprint(ROOT)
    real = fp.metadata.version
    monkeypatch.setattr(fp.metadata, "version", lambda name: "9.9" if name == "torch" else real(name))
    assert fp.changed_keys(before, fp.fingerprint(ROOT)) == ["packages"]


def test_a_local_checkpoint_that_changes_on_disk_changes_the_fingerprint(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"1")
    before = fp.checkpoint_identity(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"12")  # retrained in place
    assert fp.checkpoint_identity(str(tmp_path)) != before
    assert sorted(before["files"]) == ["config.json", "model.safetensors"]


def test_the_book_target_depends_on_the_fingerprint():
    makefile = (ROOT / "Makefile").read_text()
    assert "$(BOOK_BUILT): $(STAMP) $(BOOK_INPUTS) $(FINGERPRINT)" in makefile
    assert "$(FINGERPRINT): FORCE" in makefile and f"FINGERPRINT := _build/{fp.RECORD}" in makefile


def build_book(root: Path) -> str:
    """Build the one-page book with Jupyter Book (its execution cache on) and return the page's HTML."""
    env = {**os.environ, "PYTHONPATH": str(root)}  # the kernel imports this project's helpers
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    subprocess.run([str(jupyter_book), "build", str(root), "--warningiserror"], check=True, env=env,
                   capture_output=True, timeout=300)
    return (root / "_build" / "html" / "page.html").read_text()


def test_a_changed_helper_reaches_the_html(tmp_path):
    """The stale build this module prevents: same notebook code, new helper, old output served from the cache."""
    root = project(tmp_path, 1)
    (root / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: cache\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    code = "import helpers\nprint('value', helpers.VALUE)"
    cells = [nbformat.v4.new_markdown_cell("# Page"), nbformat.v4.new_code_cell(code)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "page.ipynb")
    assert fp.main(["--root", str(root)]) == 0
    assert "value 1" in build_book(root)
    project(root, 2)
    assert "value 1" in build_book(root)  # the control: Jupyter Book's cache alone serves the stale output
    assert fp.record_fingerprint(root / "_build", fp.fingerprint(root)) == ["helpers_and_pins"]
    assert "value 2" in build_book(root)
