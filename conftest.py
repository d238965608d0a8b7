"""Root pytest configuration: the notebook policies apply to `pytest book/` and `pytest tests/` alike."""

pytest_plugins = ["helpers.pytest_gpu", "helpers.pytest_nbval"]
