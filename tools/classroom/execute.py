"""nbgrader's Execute step, with the kernel in a sandbox, per-cell time limits, probes, and a report of what ran."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode

from tools.classroom.probes import Integrity, probe_source, read_probe
from tools.classroom.sandbox import MEMORY_LIMIT_MB, kernel_manager_class

SLOW_CELLS = ("install", "setup")  # loading torch, transformers and the checkpoint
NOTEBOOK_LIMIT = 900  # seconds for the whole notebook, probes included
STARTUP_LIMIT = 180  # seconds for the sandboxed kernel to start and answer
CELL_OUTPUT_CAP = 1_000_000  # characters of output one cell keeps (a probe has its own budget)
NOTEBOOK_OUTPUT_CAP = 5_000_000  # characters of output the whole notebook keeps
ERROR_CAP = 10_000  # characters of an error's message, and of each line of its traceback


def _grade_id(cell: NotebookNode) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def _not_graded(cell: NotebookNode, reason: str) -> None:
    """Mark a cell that did not run: an error output, so that nbgrader gives it no points."""
    cell.outputs = [NotebookNode(output_type="error", ename="NotGraded", evalue=reason,
                                 traceback=[f"NotGraded: {reason}"])]


class SandboxedExecute(Execute):
    """Run the notebook in a bwrap sandbox, one kernel, cell by cell; what could not run is reported, not scored."""

    setup_timeout = Integer(300, help="seconds for the setup (and install) cell").tag(config=True)
    cell_timeout = Integer(30, help="seconds for any other cell").tag(config=True)
    notebook_timeout = Integer(NOTEBOOK_LIMIT, help="seconds for the whole notebook, probes included").tag(config=True)
    memory_mb = Integer(MEMORY_LIMIT_MB, help="the kernel's memory cap (RLIMIT_DATA), in MiB").tag(config=True)
    report_path = Unicode("", help="where to write the JSON report of the run").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        # The submission contributes its notebook only: a torch.py or an ipykernel_launcher.py handed in beside it
        # would be first on the kernel's sys.path, and stay in the submission folder.
        scratch = Path(tempfile.mkdtemp(prefix="grading-"))
        self.kernel_manager_class = kernel_manager_class(scratch, self.memory_mb)
        report = {"stopped": None, "timeouts": [], "not_graded": [], "tampering": [], "restored": [], "seconds": {},
                  "truncated": []}
        started = self._started = time.monotonic()
        self._kept, self._probing, self._report = {}, False, report
        try:
            self._run(nb, resources, km, report, started)
        finally:
            report["seconds"]["notebook"] = round(time.monotonic() - started, 2)
            shutil.rmtree(scratch, ignore_errors=True)
            if self.report_path:
                Path(self.report_path).write_text(json.dumps(report, indent=1))
        return self.nb, self.resources

    def output(self, outs, msg, display_id, cell_index):
        """Keep an output while its cell and the notebook are under their caps; errors always (they decide points)."""
        content = msg.get("content", {})
        if msg.get("msg_type") == "error":  # cut to a readable size, never dropped: a dropped error would be a pass
            content["evalue"] = str(content.get("evalue", ""))[:ERROR_CAP]
            content["traceback"] = [str(line)[:ERROR_CAP] for line in content.get("traceback", [])[:50]]
            return super().output(outs, msg, display_id, cell_index)
        size = sum(len(str(value)) for value in content.values())
        key = "probe" if self._probing else cell_index
        total = sum(kept for where, kept in self._kept.items() if where != "probe")
        fits = self._kept.get(key, 0) + size <= CELL_OUTPUT_CAP and (
            self._probing or total + size <= NOTEBOOK_OUTPUT_CAP)
        if fits and key not in self._report["truncated"]:
            self._kept[key] = self._kept.get(key, 0) + size
            return super().output(outs, msg, display_id, cell_index)
        if key not in self._report["truncated"]:
            self._report["truncated"].append(key)
            cap = "notebook's" if self._kept.get(key, 0) + size <= CELL_OUTPUT_CAP else "cell's"
            room = min(CELL_OUTPUT_CAP - self._kept.get(key, 0),
                       CELL_OUTPUT_CAP if self._probing else NOTEBOOK_OUTPUT_CAP - total)
            if msg.get("msg_type") == "stream" and room > 0:  # the text up to the cap, then the note
                content["text"] = str(content.get("text", ""))[:room]
                self._kept[key] = self._kept.get(key, 0) + room
                super().output(outs, msg, display_id, cell_index)
            outs.append(NotebookNode(output_type="stream", name="stderr",
                                     text=f"\n[output cut here by the grader: the {cap} output cap was reached]\n"))
        return None

    def _probe(self, mode: str, index: int, timeout: int = 120) -> tuple[dict | None, str]:
        """Run a probe; (its state or None if it did not run as written, the error it raised or '')."""
        code, nonce = probe_source(mode)
        cell = NotebookNode(cell_type="code", source=code, metadata={}, outputs=[], execution_count=None)
        left = self.notebook_timeout - (time.monotonic() - self._started)
        self.timeout = int(max(1, min(timeout, left)))  # a deep copy and a hash of the model: seconds when loaded
        index = min(index, len(self.nb.cells) - 1)
        kept = self.nb.cells[index]  # nbclient stores the cell it ran at its index: put the notebook's back
        self._probing, self._kept["probe"] = True, 0
        if "probe" in self._report["truncated"]:
            self._report["truncated"].remove("probe")
        try:
            self.execute_cell(cell, index, store_history=False)
        except DeadKernelError:
            return None, "the kernel died"
        finally:
            self.nb.cells[index] = kept
            self._probing = False
        errors = [f"{out.ename}: {out.evalue}"[:200] for out in cell.outputs if out.output_type == "error"]
        return read_probe(cell.outputs, nonce), "; ".join(errors)

    def _check(self, integrity: Integrity, index: int, where: str) -> str | None:
        """Probe the kernel; why grading must stop (tampering, or a kernel that cannot run the probe), or None."""
        state, error = self._probe("check", index)
        if state is None and error:  # it ran and failed (out of memory, most often): no sign of tampering
            return f"the grader's check {where} failed in the kernel ({error})"
        integrity.check(state, where)
        return "; ".join(integrity.tampering) or None

    def _run(self, nb, resources, km, report, started) -> None:
        NotebookClient.__init__(self, nb, km)  # as nbconvert's ExecutePreprocessor.preprocess does
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        integrity, stopped, last = None, None, "the kernel's start"
        with self.setup_kernel():
            self.nb.metadata["language_info"] = self.wait_for_reply(self.kc.kernel_info())["content"][
                "language_info"]
            for index, cell in enumerate(self.nb.cells):
                if cell.cell_type != "code":
                    continue
                grade_id = _grade_id(cell)
                left = self.notebook_timeout - (time.monotonic() - started)
                if stopped is None and left <= 0:
                    stopped = f"the notebook ran past its limit of {self.notebook_timeout} s"
                if stopped is None and integrity and cell.metadata.get("nbgrader", {}).get("grade"):
                    stopped = self._check(integrity, index, f"before {grade_id}")
                if stopped is not None:
                    _not_graded(cell, stopped)
                    report["not_graded"].append(grade_id)
                    continue
                limit = self.setup_timeout if grade_id in SLOW_CELLS else self.cell_timeout
                self.timeout = int(max(1, min(limit, left)))
                tick = time.monotonic()
                try:
                    self.preprocess_cell(cell, resources, index)
                    run_sync(self._async_check_alive)()
                except DeadKernelError:
                    stopped = (f"the kernel died (it crashed, exited, or ran out of memory at the cap of "
                               f"{self.memory_mb} MiB) in cell {grade_id or index} or just before it, in {last}")
                    if not any(out.get("output_type") == "error" for out in cell.outputs):
                        _not_graded(cell, stopped)
                    report["not_graded"].append(grade_id)
                    continue
                report["seconds"][grade_id or str(index)] = round(time.monotonic() - tick, 2)
                last = grade_id or str(index)
                if any(out.get("ename") == "CellTimeoutError" for out in cell.outputs):
                    report["timeouts"].append(grade_id)
                    if self._probe("alive", index, timeout=15)[0] is None:  # interrupted, or deaf to interrupts?
                        stopped = f"the kernel did not answer after cell {grade_id} ran past its time limit"
                if grade_id == "setup":
                    baseline, error = self._probe("baseline", index)
                    if baseline is None:
                        stopped = f"the grader could not take its baseline after the setup cell {error}".strip()
                    else:
                        integrity = Integrity(baseline)
            if stopped is None and integrity:
                stopped = self._check(integrity, len(self.nb.cells), "at the end")
                report["peak_mb"] = integrity.peak_mb
        report["stopped"] = stopped
        if integrity:
            report["tampering"], report["restored"] = integrity.tampering, integrity.restored
        self.set_widgets_metadata()
