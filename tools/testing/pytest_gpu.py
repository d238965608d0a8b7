"""pytest plugin: nbval skips cells tagged `gpu` without CUDA, and does not compare their outputs with it."""

from __future__ import annotations

import pytest

from tools.testing.gpu import GPU_TAG, skip_gpu_cells

SKIP_REASON = f"cell tagged '{GPU_TAG}' and torch sees no CUDA device"


def is_gpu_cell(item) -> bool:
    """True for an nbval cell item whose cell carries the `gpu` tag."""
    cell = getattr(item, "cell", None)
    return cell is not None and GPU_TAG in cell.get("metadata", {}).get("tags", [])


def pytest_collection_modifyitems(config, items):
    """Skip `gpu` cells on CPU-only machines; where CUDA exists, run them and let their asserts judge."""
    skip = skip_gpu_cells()
    for item in filter(is_gpu_cell, items):
        if skip:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
        else:
            item.options["check"] = False  # outputs stored on a CPU machine cannot match a GPU run
