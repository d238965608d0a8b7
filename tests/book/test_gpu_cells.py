"""Cells tagged `gpu`: skipped by nbval and by the book's executor without CUDA, run with it (CUDA faked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import yaml
from nbclient import NotebookClient

from tools.environment import ROOT
from tools.testing import gpu

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_cell.ipynb"
pytest_plugins = ["pytester"]


@pytest.fixture
def restore_nbclient():
    """Put nbclient's class-level skip tag back after a test changes it."""
    trait = NotebookClient.skip_cells_with_tag
    before = trait.default_value
    yield
    trait.default_value = before
    NotebookClient._static_immutable_initial_values["skip_cells_with_tag"] = before


@pytest.fixture(params=[False, True], ids=["no-cuda", "cuda-faked"])
def cuda(request, monkeypatch):
    """Pretend torch does or does not see a CUDA device."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: request.param)
    monkeypatch.setenv(gpu.HANDED_DOWN, str(request.param))  # and what this process hands its children
    return request.param


def test_nbval_skips_gpu_cells_only_without_cuda(pytester, cuda):
    notebook = pytester.path / FIXTURE.name
    notebook.write_text(FIXTURE.read_text())
    result = pytester.runpytest_inprocess("-p", "tools.testing.pytest_gpu", "--nbval", "-p", "no:cacheprovider",
                                          str(notebook))
    if cuda:
        result.assert_outcomes(passed=3)
    else:
        result.assert_outcomes(passed=2, skipped=1)


def test_book_executor_skips_gpu_cells_only_without_cuda(restore_nbclient, cuda):
    assert gpu.configure_nbclient() == ("skip-execution" if cuda else "gpu")
    notebook = nbformat.read(FIXTURE, as_version=4)
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    gpu_cell = notebook.cells[2]
    assert notebook.cells[3].outputs[0]["text"] == "2\n"
    if cuda:
        assert gpu_cell.outputs[0]["text"] == "the gpu cell ran\n"
    else:
        assert gpu_cell.execution_count is None and gpu_cell.outputs == []


def test_the_book_build_loads_the_gpu_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "tools.book.sphinx_gpu" in config["sphinx"]["local_extensions"]
    assert "tools.testing.pytest_gpu" in (ROOT / "conftest.py").read_text()


def test_child_probe_agrees_with_torch_here_and_hands_its_answer_down(monkeypatch):
    monkeypatch.delenv(gpu.HANDED_DOWN, raising=False)
    gpu.cuda_available_in_child.cache_clear()
    assert gpu.cuda_available_in_child() is torch.cuda.is_available()
    assert os.environ[gpu.HANDED_DOWN] == str(torch.cuda.is_available())  # for the processes this one starts
    gpu.cuda_available_in_child.cache_clear()


@pytest.mark.parametrize("handed", ["True", "False"])
def test_a_process_handed_the_answer_takes_it_without_importing_torch(handed):
    code = "import sys; from tools.testing.gpu import cuda_available; print(cuda_available(), 'torch' in sys.modules)"
    child = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env=dict(os.environ, **{gpu.HANDED_DOWN: handed}))
    assert child.stdout.split() == [handed, "False"]


def test_child_probe_failure_says_what_to_do(monkeypatch):
    monkeypatch.delenv(gpu.HANDED_DOWN, raising=False)
    gpu.cuda_available_in_child.cache_clear()
    monkeypatch.setattr(gpu, "CUDA_PROBE", "import torch_is_not_installed_here")
    with pytest.raises(RuntimeError, match=r"(?s)torch_is_not_installed_here.*make venv"):
        gpu.cuda_available_in_child()
    gpu.cuda_available_in_child.cache_clear()
