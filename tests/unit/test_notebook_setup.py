"""helpers.notebook.setup() fixes print options, seeds and plot style, checked against torch and matplotlib."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import torch
import transformers

from helpers import setup


def test_setup_fixes_seeds_like_torch_and_numpy_would():
    setup()
    ours = torch.rand(3), np.random.rand(3)
    expected_torch = torch.rand(3, generator=torch.Generator().manual_seed(0))
    expected_numpy = np.random.RandomState(0).rand(3)
    assert torch.equal(ours[0], expected_torch)  # exact: the same generator, the same seed
    assert np.array_equal(ours[1], expected_numpy)


def test_setup_fixes_print_options_and_plot_style():
    setup()
    assert str(torch.tensor([1 / 3])) == "tensor([0.3333])"
    assert np.array2string(np.array([1e-9, 1 / 3])) == "[0.     0.3333]"
    assert mpl.rcParams["figure.dpi"] == 100 and mpl.rcParams["savefig.dpi"] == 100
    assert not transformers.utils.logging.is_progress_bar_enabled()
