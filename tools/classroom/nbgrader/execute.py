"""nbgrader's Execute step: the student's cells in a sandboxed kernel, the test cells in a trusted process."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode

from tools.classroom.policy import handles
from tools.classroom.policy.cgroups import oom_kills
from tools.classroom.policy.policy import POLICY
from tools.classroom.policy.relay import TrustedTests
from tools.classroom.policy.sandbox import (
    MEMORY_LIMIT_MB,
    kernel_manager_class,
    memory_cap,
    private_folder,
    process_cap,
    release,
)
from tools.classroom.policy.warm import find_zygote
from tools.classroom.protocol.trusted import is_test

SLOW_CELLS = ("install", "setup")  # loading torch, transformers and the checkpoint
NOTEBOOK_LIMIT = POLICY.notebook_s  # seconds for the whole notebook, its test cells included
STARTUP_LIMIT = POLICY.startup_s  # seconds for the sandboxed kernel to start and answer
CELL_OUTPUT_CAP = POLICY.cell_output  # characters of output one cell keeps
NOTEBOOK_OUTPUT_CAP = POLICY.notebook_output  # characters of output the whole notebook keeps
ERROR_CAP = 10_000  # characters of an error's message, and of each line of its traceback
MESSAGE_DROPPED = ("\n[output cut here by the grader: a message of {size} bytes from the kernel, over the cap of "
                   f"{POLICY.message} bytes, was dropped unread]\n")


def _grade_id(cell: NotebookNode) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def _not_graded(cell: NotebookNode, reason: str) -> None:
    """Mark a cell that did not run: an error output, so that nbgrader gives it no points."""
    cell.outputs = [NotebookNode(output_type="error", ename="NotGraded", evalue=reason,
                                 traceback=[f"NotGraded: {reason}"])]


def _test_outputs(cell: NotebookNode, result: dict) -> None:
    """Write a test cell's result as its outputs: none when it passed, else the error (nbgrader scores it 0)."""
    cell.outputs = [] if result["status"] == "passed" else [NotebookNode(
        output_type="error", ename=str(result.get("ename", "Error"))[:100],
        evalue=str(result.get("evalue", ""))[:ERROR_CAP], traceback=[str(line)[:ERROR_CAP] for line in
                                                                    result.get("traceback", [])[:50]])]


class SandboxedExecute(Execute):
    """The student's cells in a bwrap sandbox, cell by cell; each test cell in the trusted process, in order."""

    setup_timeout = Integer(POLICY.setup_s, help="seconds for the setup (and install) cell").tag(config=True)
    cell_timeout = Integer(POLICY.cell_s, help="seconds for any other cell").tag(config=True)
    notebook_timeout = Integer(NOTEBOOK_LIMIT, help="seconds for the whole notebook, tests included").tag(config=True)
    iopub_timeout = Integer(30, help="seconds a cell's last outputs may take after its reply: a large output (one "
                                     "the gate drops unread, too) still arrives whole").tag(config=True)
    memory_mb = Integer(MEMORY_LIMIT_MB, help="the kernel's memory cap (RLIMIT_DATA), in MiB").tag(config=True)
    report_path = Unicode("", help="where to write the JSON report of the run").tag(config=True)
    trusted_server = Unicode("", help="the socket of a warm trusted server (warm.py), or ''").tag(config=True)
    warm_servers = Integer(0, help="without trusted_server: the chapters whose warm server (warm.py) this process "
                                   "keeps for the next submissions (plain nbgrader), or 0: a fresh trusted process "
                                   "per submission").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        # The submission contributes its notebook only: a torch.py or an ipykernel_launcher.py handed in beside it
        # would be first on the kernel's sys.path, and stay in the submission folder.
        # The kernel is forked by the zygote beside the warm trusted server where one listens, in its folder.
        server = self.trusted_server or self._warm_server(resources)
        zygote, no_zygote = find_zygote(server)
        try:  # through descriptors of the checked folders: the zygote's may be gone, its name someone else's
            scratch = handles.make_folder(Path(zygote).parent / "kernels", 0, "grading-") if zygote else None
        except OSError as error:
            zygote, no_zygote, scratch = "", f"a fresh kernel: {error}", None
        if scratch is None:  # in a private run folder of its own, not listable by anyone else
            scratch = private_folder("grading-")
        self.kernel_manager_class = kernel_manager_class(scratch, self.memory_mb, zygote)
        report = {"stopped": None, "timeouts": [], "not_graded": [], "seconds": {}, "truncated": [],
                  "process_cap": process_cap(scratch)[1], "kernel": "forked" if zygote else "fresh",
                  "memory_cap": memory_cap(scratch, self.memory_mb)[1], "notes": [no_zygote] if no_zygote else []}
        started = self._started = time.monotonic()
        self._scratch = scratch
        self._kept, self._grader_cell, self._report = {}, False, report
        self._tests = TrustedTests(scratch, self._run_in_kernel, self.memory_mb, server)
        try:
            self._run(nb, resources, km, report, started)
        finally:
            with contextlib.ExitStack() as cleanup:  # in reverse order, each even if one before it failed
                cleanup.callback(self._write_report, report)
                cleanup.callback(release, scratch)  # its tmpfs unmounted first, then removed, however deep
                cleanup.callback(lambda: report["seconds"].update(notebook=round(time.monotonic() - started, 2)))
                for gate in self.kernel_manager_class.gates:
                    cleanup.callback(gate.close)
                cleanup.callback(self._tests.close)
                report["notes"] += [self._tests.refused] if self._tests.refused else []
                report["trusted_memory_cap"] = self._tests.fork_cap or "its own sandbox's (a fresh trusted process)"
                if self._tests.fork_cap.startswith("none"):
                    report["notes"].append(f"the trusted fork's memory: {self._tests.fork_cap}")
                report["oom_kills"] = oom_kills(scratch)
                report["dropped"] = self._dropped()
        return self.nb, self.resources

    def _write_report(self, report: dict) -> None:
        if self.report_path:
            Path(self.report_path).write_text(json.dumps(report, indent=1))

    def _warm_server(self, resources) -> str:
        """With warm_servers: this process's server for the assignment's source notebook (the teacher's), or ''."""
        ids = (resources or {}).get("nbgrader", {})
        if not self.warm_servers or "assignment" not in ids or "notebook" not in ids:
            return ""
        from nbgrader.coursedir import CourseDirectory

        from tools.classroom.policy import warm

        course = CourseDirectory(config=self.config)
        source = Path(course.format_path(course.source_directory, ".", ids["assignment"])) / f"{ids['notebook']}.ipynb"
        chapters = tuple(sorted(source.parent.parent.glob("*/*.ipynb")))  # the course's: one zygote imports for all
        try:
            return warm.server_for(source.read_text(), keep=self.warm_servers, course=chapters)
        except OSError:  # no source notebook: a fresh trusted process, as without warm_servers
            return ""

    def output(self, outs, msg, display_id, cell_index):
        """Keep an output while its cell and the notebook are under their caps; errors always (they decide points)."""
        if self._grader_cell:  # the grader's own requests: what the student's code prints there is dropped
            return None
        content = msg.get("content", {})
        if msg.get("msg_type") == "error":  # cut to a readable size, never dropped: a dropped error would be a pass
            content["evalue"] = str(content.get("evalue", ""))[:ERROR_CAP]
            content["traceback"] = [str(line)[:ERROR_CAP] for line in content.get("traceback", [])[:50]]
            return super().output(outs, msg, display_id, cell_index)
        size = sum(len(str(value)) for value in content.values())
        total = sum(self._kept.values())
        kept = self._kept.get(cell_index, 0)
        if kept + size <= CELL_OUTPUT_CAP and total + size <= NOTEBOOK_OUTPUT_CAP \
                and cell_index not in self._report["truncated"]:
            self._kept[cell_index] = kept + size
            return super().output(outs, msg, display_id, cell_index)
        if cell_index not in self._report["truncated"]:
            self._report["truncated"].append(cell_index)
            cap = "notebook's" if kept + size <= CELL_OUTPUT_CAP else "cell's"
            room = min(CELL_OUTPUT_CAP - kept, NOTEBOOK_OUTPUT_CAP - total)
            if msg.get("msg_type") == "stream" and room > 0:  # the text up to the cap, then the note
                content["text"] = str(content.get("text", ""))[:room]
                self._kept[cell_index] = kept + room
                super().output(outs, msg, display_id, cell_index)
            outs.append(NotebookNode(output_type="stream", name="stderr",
                                     text=f"\n[output cut here by the grader: the {cap} output cap was reached]\n"))
        return None

    def _dropped(self) -> list[int]:
        """The sizes of the kernel's messages its gate dropped so far (over the cap: never read by this process)."""
        return [size for gate in self.kernel_manager_class.gates for size in gate.dropped]

    def _run_in_kernel(self, code: str, timeout: float) -> str | None:
        """Run one grader cell in the student's kernel, its outputs dropped; None, or why it did not finish."""
        cell = NotebookNode(cell_type="code", source=code, metadata={}, outputs=[], execution_count=None)
        index = self._index
        kept = self.nb.cells[index]  # nbclient stores the cell it ran at its index: put the notebook's back
        self.timeout = int(max(1, timeout))
        self._grader_cell = True
        try:
            self.execute_cell(cell, index, store_history=False)
        except DeadKernelError:
            self._dead = True
            return "the student's kernel died"
        except Exception as error:  # noqa: BLE001 (nbclient's timeouts and errors: the request failed)
            return f"the student's kernel did not answer ({type(error).__name__})"
        finally:
            self.nb.cells[index] = kept
            self._grader_cell = False
        errors = [out.get("ename") for out in cell.outputs if out.get("output_type") == "error"]
        if "CellTimeoutError" in errors:
            if _grade_id(kept) not in self._report["timeouts"]:
                self._report["timeouts"].append(_grade_id(kept))
            return f"the student's code ran past the cell's time limit of {self.timeout} s"
        return f"the student's kernel did not answer ({errors[0]})" if errors else None

    def _death(self, where: str) -> str:
        """Why the kernel died, `where`: its sandbox's memory cgroup killed it, or it crashed, exited or hit RLIMIT."""
        if oom_kills(self._scratch):
            return f"the kernel died: its sandbox ran out of memory at its cap of {self.memory_mb} MiB, {where}"
        return (f"the kernel died (it crashed, exited, or ran out of memory at the cap of {self.memory_mb} MiB) "
                f"{where}")

    def _run(self, nb, resources, km, report, started) -> None:
        self._stopped, self._last, self._dead, self._count = None, "the kernel's start", False, 0
        setup = next((cell.source for cell in nb.cells if _grade_id(cell) == "setup"), "")
        self._tests.start(setup, self.setup_timeout)  # the trusted copy of the setup runs beside the notebook
        # The kernel is killed at the end, not asked to shut down: its sandbox (bwrap --die-with-parent, its own
        # pid namespace) dies with it, and nothing in it is worth a polite exit (1.5-2.5 s each).
        self.shutdown_kernel = "immediate"
        super().preprocess(nb, resources, km)  # nbconvert's: the client reset, the kernel, each cell through here
        report["stopped"] = self._stopped

    def preprocess_cell(self, cell, resources, index):
        """One cell: a test cell in the trusted process, any other in the kernel, under the time left; none after
        the notebook stopped (out of time, or its kernel died)."""
        report, started = self._report, self._started
        if cell.cell_type != "code":
            return cell, resources
        grade_id, self._index = _grade_id(cell), index
        left = self.notebook_timeout - (time.monotonic() - started)
        if self._stopped is None and left <= 0:
            self._stopped = f"the notebook ran past its limit of {self.notebook_timeout} s"
        if self._stopped is not None:
            _not_graded(cell, self._stopped)
            report["not_graded"].append(grade_id)
            return cell, resources
        tick = time.monotonic()
        if is_test(cell):
            result = self._tests.run(grade_id, cell.source, min(self.cell_timeout, left), self.setup_timeout)
            _test_outputs(cell, result)
            self._count += 1
            cell.execution_count = self._count
            report["seconds"][grade_id] = round(time.monotonic() - tick, 2)
            if result.get("timed_out") and grade_id not in report["timeouts"]:
                report["timeouts"].append(grade_id)
            if self._dead:  # this cell's checks did not finish: it is not graded, like those after it
                self._stopped = self._death(f"while {grade_id} called the student's code")
                _not_graded(cell, self._stopped)
                report["not_graded"].append(grade_id)
            return cell, resources
        limit = self.setup_timeout if grade_id in SLOW_CELLS else self.cell_timeout
        self.timeout = int(max(1, min(limit, left)))
        dropped = len(self._dropped())
        try:
            super().preprocess_cell(cell, resources, index)
            if not run_sync(self.kc.is_alive)():  # a kernel that died after its reply: what nbclient checks too
                raise DeadKernelError("Kernel died")
        except DeadKernelError:
            self._stopped = self._death(f"in cell {grade_id or index} or just before it, in {self._last}")
            if not any(out.get("output_type") == "error" for out in cell.outputs):
                _not_graded(cell, self._stopped)
            report["not_graded"].append(grade_id)
            return cell, resources
        self._count = max(self._count, cell.get("execution_count") or 0)
        for size in self._dropped()[dropped:]:  # said in the cell and the record; the cell's other outputs kept
            note = MESSAGE_DROPPED.format(size=size)
            cell.outputs.append(NotebookNode(output_type="stream", name="stderr", text=note))
            if index not in report["truncated"]:
                report["truncated"].append(index)
        report["seconds"][grade_id or str(index)] = round(time.monotonic() - tick, 2)
        self._last = grade_id or str(index)
        if any(out.get("ename") == "CellTimeoutError" for out in cell.outputs):
            report["timeouts"].append(grade_id)
            if self._run_in_kernel("pass", 15):  # interrupted, or deaf to interrupts?
                self._stopped = f"the kernel did not answer after cell {grade_id} ran past its time limit"
        return cell, resources
