"""Root pytest configuration: the notebook policies apply to `pytest book/` and `pytest tests/` alike."""

pytest_plugins = ["tools.testing.pytest_gpu", "tools.testing.pytest_nbval", "tools.testing.pytest_nbval_replay",
                  "tools.testing.pytest_book_cache", "tools.testing.pytest_fixture_times",
                  "tools.testing.pytest_visit_cache"]
