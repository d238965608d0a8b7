"""Fixtures of the families and input-layer tests: every family, tiny and random, and at released size on meta.

Tolerance policy, for every test in tests/unit and tests/book
--------------------------------------------------------------
Readers run these tests on Intel, AMD, Apple Silicon and Colab, whose kernels sum in different orders.

* Exact (`torch.equal`, `==`, `assert_array_equal`) only where both sides run the same operations in the same
  order, or where the values are exact by construction: integers, ids, shapes, values exactly representable.
* Everywhere else an explicit tolerance derived from the dtype and the length of the reduction, with a short
  comment next to it. `rounding_tolerance(dtype, terms, scale)` below is the one formula: 10 x eps(dtype) x
  sqrt(terms) x scale. A float32 result compared with a float64 reference gets a float32 tolerance, never 1e-7.
* Default tolerances (`assert_close`: float64 rtol 1e-7 / atol 1e-7; `pytest.approx`: rel 1e-6) only where both
  sides are float64 from the same float64 inputs with short reductions, and a comment says so.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import FAMILIES, build_family
from helpers.validation import MEMORY_BOUND

EPS32 = torch.finfo(torch.float32).eps  # 1.19e-7: one float32 ulp at 1.0
EPS64 = torch.finfo(torch.float64).eps  # 2.2e-16: one float64 ulp at 1.0


def rounding_tolerance(dtype: torch.dtype = torch.float32, terms: int = 1, scale: float = 1.0,
                       margin: float = 10.0) -> float:
    """margin x eps(dtype) x sqrt(terms) x scale: how far two roundings of a sum of `terms` values of size <= `scale`
    may sit apart, whatever order a CPU's kernels add them in.

    Rounding errors of a sum grow like a random walk, eps x sqrt(terms) x scale; the 10x margin covers the few
    operations around the sum (a square root, a division) and unlucky orders. Used as atol, or with scale=1 as rtol.
    Example: float32, 384 terms of size <= 1: 10 x 1.2e-7 x sqrt(384) = 2.3e-5."""
    return margin * torch.finfo(dtype).eps * math.sqrt(terms) * scale


@pytest.fixture(scope="session")
def tiny_models():
    """Every family, tiny and random, in eval mode: built once for test_families and test_input_layers, which only
    read them (summaries, hooked forward passes whose hooks are removed)."""
    return {name: build_family(name, tiny=True) for name in FAMILIES}


@pytest.fixture(scope="session")
def released_models():
    """Every family at released size on the meta device (no weights), built once; the tests only read them."""
    return {name: build_family(name) for name in FAMILIES}


@pytest.fixture
def big_allocations(monkeypatch):
    """The shapes of torch.empty / torch.arange calls above MEMORY_BOUND (each refused with MemoryError)."""
    allocated = []

    def watch(real):
        def watched(*size, **kwargs):
            dims = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
            if all(isinstance(d, int) for d in dims) and math.prod(dims) * 8 > MEMORY_BOUND:
                allocated.append(dims)  # only counts: the call goes through below, and would run out of memory
                raise MemoryError(f"tried to allocate {dims}")
            return real(*size, **kwargs)
        return watched

    monkeypatch.setattr(torch, "empty", watch(torch.empty))
    monkeypatch.setattr(torch, "arange", watch(torch.arange))
    return allocated
