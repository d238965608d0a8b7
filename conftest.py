"""Root pytest configuration: the `gpu` cell policy applies to `pytest book/` and `pytest tests/` alike."""

pytest_plugins = ["helpers.pytest_gpu"]
