"""Which notebook cells run on this machine: cells tagged `gpu` need CUDA."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

__all__ = ["GPU_TAG", "cuda_available"]

GPU_TAG = "gpu"
NBCLIENT_DEFAULT_SKIP_TAG = "skip-execution"
CUDA_PROBE = "import torch; print(torch.cuda.is_available())"
# The answer a process got, handed to the processes it starts (nbval's workers, the tests' child pytest runs), so
# that each does not start a Python that imports torch (~1.3 CPU s) to ask again. Set here, never by hand.
HANDED_DOWN = "BERT_BOOK_CUDA_AVAILABLE"


def cuda_available() -> bool:
    """True when torch sees a CUDA device; a process without torch (a plugin) asks a child process instead, unless
    the process that started it handed its answer down."""
    if "torch" in sys.modules:
        answer = sys.modules["torch"].cuda.is_available()
        os.environ.setdefault(HANDED_DOWN, str(answer))  # a test faking CUDA sets both (test_gpu_cells)
        return answer
    return cuda_available_in_child()


@functools.cache
def cuda_available_in_child() -> bool:
    """torch.cuda.is_available() in a fresh interpreter, so this process never holds torch's ~200 MB."""
    if os.environ.get(HANDED_DOWN) in ("True", "False"):
        return os.environ[HANDED_DOWN] == "True"
    probe = subprocess.run([sys.executable, "-c", CUDA_PROBE], capture_output=True, text=True)
    if probe.returncode != 0:
        raise RuntimeError(f"Could not ask torch whether CUDA is available ({sys.executable} -c {CUDA_PROBE!r}):\n"
                           f"{probe.stderr.strip()}\nInstall the book's requirements first: `make venv`.")
    answer = probe.stdout.strip() == "True"
    os.environ[HANDED_DOWN] = str(answer)
    return answer


def skip_gpu_cells() -> bool:
    """True when cells tagged `gpu` must be skipped here (no CUDA)."""
    return not cuda_available()


def execution_skip_tag() -> str:
    """The tag nbclient should skip on this machine: `gpu` without CUDA, else its default."""
    return GPU_TAG if skip_gpu_cells() else NBCLIENT_DEFAULT_SKIP_TAG


def configure_nbclient() -> str:
    """Make every nbclient run in this process skip `gpu` cells when there is no CUDA."""
    from nbclient import NotebookClient

    tag = execution_skip_tag()
    # myst-nb and jupyter-cache construct NotebookClient without options, so change its class default;
    # traitlets copies static defaults into each instance from _static_immutable_initial_values.
    NotebookClient.skip_cells_with_tag.default_value = tag
    NotebookClient._static_immutable_initial_values["skip_cells_with_tag"] = tag
    return tag
