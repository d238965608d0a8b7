"""Fixtures of the families and input-layer tests: every family, tiny and random, and at released size on meta."""

from __future__ import annotations

import pytest

from helpers import FAMILIES, build_family


@pytest.fixture(scope="module")
def tiny_models():
    return {name: build_family(name, tiny=True) for name in FAMILIES}


@pytest.fixture(scope="module")
def released_models():
    return {name: build_family(name) for name in FAMILIES}
