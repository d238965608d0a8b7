"""Which notebook cells run on this machine: cells tagged `gpu` need CUDA."""

from __future__ import annotations

import torch

GPU_TAG = "gpu"
NBCLIENT_DEFAULT_SKIP_TAG = "skip-execution"


def cuda_available() -> bool:
    """True when torch sees a CUDA device."""
    return torch.cuda.is_available()


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
