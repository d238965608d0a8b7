"""A submission's grading record: its status, reasons and caps, written atomically per student per chapter."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Record:
    """One submission's grading: status 'graded', 'partly graded', 'not graded' or 'refused', with the reasons."""

    student: str
    status: str
    reason: str = ""
    flags: list[str] = field(default_factory=list)
    digest: str = ""
    seconds: float = 0.0
    not_graded_cells: list[str] = field(default_factory=list)
    process_cap: str = ""  # which cap bound the sandbox's processes (sandbox.process_cap)
    memory_cap: str = ""  # how the sandbox's memory was capped (sandbox.memory_cap): "none ..." where it was not
    kernel: str = ""  # "forked" by the kernel zygote (warm.py), or "fresh": a new sandboxed process
    sandbox_notes: list[str] = field(default_factory=list)  # a server or zygote refused, a cap that could not be set


def records_dir(course_dir: Path, chapter: str) -> Path:
    """Where the grading records of a chapter are kept: <course>/grading/<chapter>/<student>.json."""
    return Path(course_dir) / "grading" / chapter


def read_records(course_dir: Path | str, chapter: str) -> dict[str, Record]:
    """The grading records of a chapter, by student."""
    folder = records_dir(Path(course_dir), chapter)
    return {path.stem: Record(**json.loads(path.read_text())) for path in sorted(folder.glob("*.json"))}


def make_record(student: str, digest: str, seconds: float, report: dict | None, failure: str,
                notes: list[str]) -> Record:
    """The record of a submission graded in a child: from its Execute report, or the failure that left none."""
    if report is None:
        return Record(student, "not graded", failure or "the grader stopped before the notebook ran", notes, digest,
                      seconds)
    flags = notes + [f"{cell} ran past its time limit" for cell in report["timeouts"]]
    flags += [f"output of {where} cut at the grader's cap" for where in report.get("truncated", [])]
    if report.get("oom_kills"):
        flags.append(f"the sandbox reached its memory cap: {report['oom_kills']} of its processes killed")
    sandboxed = {"process_cap": report.get("process_cap", ""), "memory_cap": report.get("memory_cap", ""),
                 "kernel": report.get("kernel", ""), "sandbox_notes": report.get("notes", [])}
    if failure:
        return Record(student, "not graded", failure, flags, digest, seconds, **sandboxed)
    if report["stopped"]:
        return Record(student, "partly graded", report["stopped"], flags, digest, seconds, report["not_graded"],
                      **sandboxed)
    return Record(student, "graded", "", flags, digest, seconds, **sandboxed)


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit|Interrupt|Timeout)\w*)(?::\s*(.*))?$")


def real_error(log: str) -> str:
    """The first line of the real error in a log: the last `SomeError: message` that is not nbgrader's wrapper."""
    found = [line.strip() for line in log.splitlines() if ERROR_LINE.match(line.strip())]
    real = [line for line in found if "NbGraderException" not in line and "Please see the above traceback" not in line]
    lines = real or found or [line.strip() for line in log.splitlines() if line.strip()] or ["no message"]
    return lines[-1][:300]


def write_record(folder: Path, record: Record) -> None:
    """Write one record atomically: an interrupted write leaves the old record or none, never half of one."""
    temporary = folder / f".{record.student}.json.tmp"
    temporary.write_text(json.dumps(asdict(record), indent=1))
    temporary.replace(folder / f"{record.student}.json")
