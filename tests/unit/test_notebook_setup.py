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


def test_setup_draws_figures_with_twice_the_pixels_at_their_displayed_size():
    """Retina output: the PNG (read by Pillow) has 2x the pixels of the width and height it asks to be shown at."""
    import base64
    import io

    import matplotlib.pyplot as plt
    from IPython.core.interactiveshell import InteractiveShell
    from PIL import Image

    shell = InteractiveShell.instance()
    setup()
    fig, ax = plt.subplots(figsize=(4.0, 2.0))
    ax.plot([0, 1], [0, 1])
    data, metadata = shell.display_formatter.format(fig)
    plt.close(fig)
    png = data["image/png"]
    image = Image.open(io.BytesIO(png if isinstance(png, bytes) else base64.b64decode(png)))
    shown = metadata["image/png"]
    assert abs(image.width - 2 * shown["width"]) <= 1 and abs(image.height - 2 * shown["height"]) <= 1
    assert 380 <= shown["width"] <= 420  # 4 inches at the house style's 100 dpi, give or take the 0.1-inch pad
