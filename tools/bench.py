"""`python -m tools.bench`: time the book's build and tests against their floor (every notebook run once).

`make bench` runs it from the repository root. `python -m tools.bench --floor [NOTEBOOK ...]` is the floor step
alone (every notebook of _toc.yml, or those named), run as a child process by the full measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil

from tools.book.fingerprint import empty_build
from tools.book.toc import toc_notebooks
from tools.environment import ROOT, offline_environment

BUILD = ROOT / "_build"
LOGS = BUILD / "bench"
MAKE = ["make", "--no-print-directory"]
FLOOR = [sys.executable, "-m", "tools.bench", "--floor"]  # the floor step as a child process, from ROOT
TARGETS = {"clean_build": 1.3, "rebuild": 0.10, "nbval": 1.3, "make_test": 300, "peak_mb": 1500}  # issue 11


def cell_seconds(cell) -> float:
    """How long a cell ran, from nbclient's record_timing metadata."""
    timing = cell.metadata.get("execution", {})
    if "shell.execute_reply" not in timing:  # a skipped cell (tagged gpu without CUDA)
        return 0.0
    start, end = (datetime.fromisoformat(timing[key]) for key in ("iopub.status.busy", "shell.execute_reply"))
    return (end - start).total_seconds()


def peak_rss_mb(pid: int) -> int:
    """A process's peak resident memory so far (VmHWM), in MB; 0 for a zombie, which has none."""
    found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found[1]) // 1024 if found else 0


def run_notebook(path: Path) -> dict:
    """Execute one notebook in a fresh kernel: wall time, kernel peak memory, model-load cell, costliest cells."""
    import nbformat
    from nbclient import NotebookClient

    notebook, kernel_mb = nbformat.read(path, as_version=4), {}
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=True,
                            resources={"metadata": {"path": str(path.parent)}})

    def after_cell(cell_index: int, **_) -> None:
        kernel_mb[cell_index] = peak_rss_mb(client.km.provisioner.pid)

    client.on_cell_executed = after_cell
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    cells = [(index, cell_seconds(cell), cell.source) for index, cell in enumerate(notebook.cells)
             if cell.cell_type == "code"]
    load = next(((index, s) for index, s, source in cells if "load_bert(" in source), (None, None))
    peaks = list(kernel_mb.items())  # (cell index, kernel peak after it), in execution order
    previous = [0] + [mb for _, mb in peaks[:-1]]
    raised = [(index, mb - before) for (index, mb), before in zip(peaks, previous, strict=True)]

    def first_line(index: int) -> str:
        return (notebook.cells[index].source.splitlines() or [""])[0]

    return {"seconds": round(seconds, 2), "kernel_peak_rss_mb": peaks[-1][1],
            "model_load_cell": load[0], "model_load_cell_seconds": load[1] and round(load[1], 2),
            "slowest_cells": [{"cell": index, "seconds": round(s, 2), "first_line": first_line(index)}
                              for index, s, _ in sorted(cells, key=lambda cell: -cell[1])[:4]],
            "memory_cells": [{"cell": index, "raised_peak_mb": mb, "first_line": first_line(index)}
                             for index, mb in sorted(raised, key=lambda cell: -cell[1])[:3]]}


def floor(notebooks: list[Path]) -> dict:
    """Each notebook once, each in a fresh kernel with nbclient (gpu cells skipped without CUDA)."""
    from tools.testing.gpu import configure_nbclient

    configure_nbclient()
    return {os.path.relpath(path.resolve(), ROOT): run_notebook(path) for path in notebooks}


def tree_memory(root: psutil.Process) -> list[tuple[int, int]]:
    """(PSS now in bytes, peak RSS so far in MB) of a process and each descendant alive now.

    PSS shares library pages out fairly among the processes that map them, so PSS values add up.
    """
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:  # the command ended while we looked
        return []
    memory = []
    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):  # this one ended while we looked
            memory.append((process.memory_full_info().pss, peak_rss_mb(process.pid)))
    return memory


def measure(name: str, command: list[str]) -> dict:
    """Run a command (output to _build/bench/NAME.log); wall time, exit code, peak memory of its process tree.

    Polled every 0.2 s over the tree, because getrusage(RUSAGE_CHILDREN).ru_maxrss gives only the largest single
    descendant, not the sum of processes alive together (pytest-xdist workers and their kernels, the executor's
    pool and its kernels). The sum is sampled; each process's own peak (VmHWM) is exact up to its last sample.
    """
    print(f"bench: {name}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    with open(LOGS / f"{name}.log", "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env=offline_environment())
        root, peak, largest = psutil.Process(process.pid), 0, 0
        while process.poll() is None:
            memory = tree_memory(root)
            peak = max(peak, sum(pss for pss, _ in memory))
            largest = max([largest, *(hwm for _, hwm in memory)])
            time.sleep(0.2)
    return {"seconds": round(time.perf_counter() - start, 1), "returncode": process.returncode,
            "peak_pss_mb": round(peak / 2**20), "largest_process_rss_mb": largest}


def table(steps: dict) -> str:
    """The results as Markdown: per step wall time, ratio, target, peak memory; per notebook where time goes."""
    seconds = {key: step["seconds"] for key, step in steps.items()}
    checks = {"clean_build": (seconds["clean_build"] / seconds["floor"], "x floor", "≤"),  # the wording
              "rebuild": (seconds["rebuild"] / seconds["clean_build"], "x clean", "≤"),
              "nbval": (seconds["nbval"] / seconds["floor"], "x floor", "≤"),
              "make_test": (seconds["make_test"], " s", "<")}
    rows = [("floor: every notebook once (nbclient)", "floor"), ("`make book`, empty cache", "clean_build"),
            ("`make book`, nothing changed", "rebuild"), ("`make nbval` (nbval strict)", "nbval"),
            ("`make test`, empty cache", "make_test")]
    memory = f"peak memory (MB; target < {TARGETS['peak_mb']}): all processes, PSS | largest process, RSS"
    lines = [f"| step | wall (s) | ratio | target | {memory} |", "|---|---:|---:|---:|---:|---:|"]
    for label, key in rows:
        step, ratio, target = steps[key], "", ""
        if key in checks:
            value, unit, symbol = checks[key]
            met = value <= TARGETS[key] if symbol == "≤" else value < TARGETS[key]
            ratio = f"{value:.2f}{unit}" if key != "make_test" else ""
            target = f"{symbol} {TARGETS[key]}{unit} {'✓' if met else '✗'}"
        failed = "" if step["returncode"] == 0 else " **FAILED**"
        lines.append(f"| {label}{failed} | {step['seconds']:.1f} | {ratio} | {target} | {step['peak_pss_mb']} "
                     f"| {step['largest_process_rss_mb']} |")
    lines += ["", "| notebook | floor (s) | setup cell: imports + `load_bert()` (s) | slowest other cell (s) "
              "| kernel peak (RSS, MB) |", "|---|---:|---:|---:|---:|"]
    for name, run in steps["floor"]["notebooks"].items():
        slow = next(cell for cell in run["slowest_cells"] if cell["cell"] != run["model_load_cell"])
        lines.append(f"| {name} | {run['seconds']:.1f} | {run['model_load_cell_seconds']} "
                     f"| cell {slow['cell']}: {slow['seconds']:.1f} | {run['kernel_peak_rss_mb']} |")
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: nothing for the whole measurement, --floor [NOTEBOOK ...] for the floor step alone."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--floor", nargs="*", metavar="NOTEBOOK", type=Path,
                        help="only run each notebook once (default: every notebook of _toc.yml) and write the "
                             "timings to --out")
    parser.add_argument("--out", type=Path, default=LOGS / "floor.json", help="where --floor writes (%(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure each step in turn, print the table, write _build/bench.json; fail when a step failed."""
    options = arguments(argv)
    if options.floor is not None:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(json.dumps(floor(options.floor or toc_notebooks()), indent=2))
        return 0
    LOGS.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
               "load_average_at_start": os.getloadavg(), "python": sys.version.split()[0]}
    (LOGS / "floor.json").unlink(missing_ok=True)
    steps = {"floor": measure("floor", FLOOR)}
    if steps["floor"]["returncode"]:
        sys.exit(f"bench: a notebook failed to run; see {LOGS / 'floor.log'}")
    steps["floor"]["notebooks"] = json.loads((LOGS / "floor.json").read_text())
    empty_build(BUILD)
    steps["clean_build"] = measure("clean_build", [*MAKE, "book"])
    steps["rebuild"] = measure("rebuild", [*MAKE, "book"])
    steps["nbval"] = measure("nbval", [*MAKE, "nbval", "NBVAL_FROM_CACHE="])  # every notebook in a kernel
    empty_build(BUILD)
    steps["make_test"] = measure("make_test", [*MAKE, "test"])
    report = table(steps)
    print(report)
    results = {"machine": machine, "targets": TARGETS, "steps": steps, "table": report}
    (BUILD / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    return max(step["returncode"] != 0 for step in steps.values())


if __name__ == "__main__":
    sys.exit(main())
