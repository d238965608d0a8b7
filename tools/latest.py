"""`python -m tools.latest` (`make test-latest`): the drift canary, reported and never gating.

A side venv, _build/latest-venv (never the reader's .venv), gets the newest transformers, nbval and Jupyter Book 1.x
that the package index offers, over the reader's installed pins (its site-packages, read-only, behind the side
venv's own); then nbval and the unit tests run there. torch stays 2.13.0: every newer release on the index is a
CUDA build of several GB. Prints the versions and each suite's result, writes _build/latest.json, exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from tools.environment import ROOT, offline_environment

VENV = ROOT / "_build" / "latest-venv"
NEWEST = ["transformers", "nbval", "jupyter-book<2"]  # Jupyter Book 2 is another program (MyST, myst.yml)
KEPT = ["torch==2.13.0"]  # the CPU build on disk; newer torch pulls CUDA
WATCHED = ("torch", "transformers", "nbval", "jupyter-book", "huggingface-hub", "tokenizers", "numpy")
SUITES = {"nbval": ["book"], "unit": ["tests/unit"]}


def build(venv: Path = VENV) -> Path:
    """The side venv with the newest of NEWEST over the reader's packages; returns its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # addsitedir, not a bare path: the reader's .pth files (the editable helpers among them) apply too.
    reader = sysconfig.get_path("purelib")
    (Path(site) / "reader_venv.pth").write_text(f"import site; site.addsitedir({reader!r})\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", *NEWEST, *KEPT], check=True)
    return python


def versions(python: Path) -> dict[str, str]:
    """The watched packages' versions as the side venv sees them."""
    probe = (f"from importlib import metadata; import json; print(json.dumps({{n: metadata.version(n) "
             f"for n in {list(WATCHED)!r}}}))")
    return json.loads(subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                                     check=True).stdout)


def run_suite(python: Path, paths: list[str], workers: int) -> dict:
    """pytest over paths in the side venv, its bin first on PATH (the notebooks' kernel runs its python)."""
    env = offline_environment()
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run([str(python), "-m", "pytest", *paths, "-n", str(workers), "-q"], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return {"paths": paths, "returncode": result.returncode, "summary": lines[-1] if lines else result.stderr[-500:],
            "failed": [line for line in lines if line.startswith(("FAILED", "ERROR"))][:20]}


def main(argv: list[str] | None = None) -> int:
    """Build, run, report; the exit code is 0 whatever the suites say (a canary, not a gate)."""
    parser = argparse.ArgumentParser(prog="python -m tools.latest", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="run only these tests or notebooks (default: book and tests/unit)")
    parser.add_argument("-n", "--workers", type=int, default=2)
    options = parser.parse_args(argv)
    python = build()
    pinned = {name: metadata.version(name) for name in WATCHED}
    latest = versions(python)
    suites = {"selected": options.paths} if options.paths else SUITES
    results = {name: run_suite(python, paths, options.workers) for name, paths in suites.items()}
    report = {"pinned": pinned, "latest": latest, "results": results}
    (ROOT / "_build" / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    print("test-latest (reported, not gating):")
    for name in WATCHED:
        mark = "" if pinned[name] == latest[name] else "  <- newer"
        print(f"  {name}: pinned {pinned[name]}, latest {latest[name]}{mark}")
    for name, result in results.items():
        print(f"  {name} ({' '.join(result['paths'])}): {result['summary']}")
        for line in result["failed"]:
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
