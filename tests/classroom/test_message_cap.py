"""A kernel's ZeroMQ message over the cap is dropped by the socket before the grader buffers it: a student cannot
swell the grading process (the grader's uid, in no sandbox group) with one huge output (attack review 46b-2)."""

from __future__ import annotations

import json
import subprocess
import sys

from tools.environment import ROOT

RUN = r"""
import json, resource, sys, tempfile
from pathlib import Path
import nbformat
from tools.classroom.nbgrader.execute import SandboxedExecute
from tools.classroom.policy import sandbox

def run(cap):
    sandbox.MESSAGE_CAP = cap
    cell = nbformat.v4.new_code_cell
    notebook = nbformat.v4.new_notebook(cells=[
        cell("x = 1\n", metadata={"nbgrader": {"grade_id": "setup"}}),
        cell("from IPython.display import display\ndisplay({'text/plain': 'x' * (64 << 20)}, raw=True)\n",
             metadata={"nbgrader": {"grade_id": "a", "solution": True}}),
        cell("assert x == 1\n", metadata={"nbgrader": {"grade_id": "t", "grade": True, "points": 1}})])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    folder = Path(tempfile.mkdtemp())
    SandboxedExecute(report_path=str(folder / "r.json"), cell_timeout=60).preprocess(
        notebook, {"metadata": {"path": str(folder)}})
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10
    return {"grew_mib": grew, "kept": len(json.dumps(notebook.cells[1].outputs)),
            "names": [out.get("ename") for out in notebook.cells[1].outputs], "test": notebook.cells[2].outputs,
            "truncated": json.loads((folder / "r.json").read_text())["truncated"]}

print(json.dumps(run(int(sys.argv[1]) or sandbox.MESSAGE_CAP)))
"""


def test_a_64_mib_output_is_dropped_before_the_grader_buffers_it(bwrap):
    outcomes = []
    for cap in (0, 1 << 30):  # each in a process of its own: ru_maxrss is the process's peak
        result = subprocess.run([sys.executable, "-c", RUN, str(cap)], cwd=ROOT, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        outcomes.append(json.loads(result.stdout.strip().splitlines()[-1]))
    capped, uncapped = outcomes
    assert capped["grew_mib"] < 32 and capped["kept"] < 2 << 20 and capped["test"] == [], capped
    assert capped["names"] == ["OutputCapError"] and capped["truncated"] == [1], capped  # said, never a pass
    assert uncapped["grew_mib"] >= 64, uncapped  # the control: without the cap the grader holds it (then cuts it)
