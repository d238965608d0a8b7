"""One setup() call per notebook: stable printing, seeds, plot style (2x figures), quiet progress bars."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from helpers.plots import apply_house_style

__all__ = ["setup"]

SEED = 0


def setup(seed: int = SEED) -> None:
    """Fix print options and seeds, apply the house plot style, turn progress bars off."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_printoptions(precision=4, sci_mode=False, linewidth=100)
    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    apply_house_style()
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # outside IPython there is no inline backend to configure
        return
    set_matplotlib_formats("retina")  # 2x pixels, shown at 1x size: sharp on HiDPI screens
