"""Grading a class: a preflight, then one sandboxed `nbgrader autograde` per new or changed submission (cluster.py)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from tools.classroom.course import COURSE_ID, alembic_head, gradebook_url
from tools.classroom.execute import NOTEBOOK_LIMIT, STARTUP_LIMIT
from tools.classroom.grading import check_submission
from tools.classroom.policy import POLICY
from tools.classroom.sandbox import bwrap_problem
from tools.classroom.schema import ExerciseError
from tools.environment import venv_environment

NBGRADER_OVERHEAD = 300  # seconds for nbgrader's own steps around the notebook: its start, the gradebook, writing
# The outer limit of one submission exceeds everything inside it: the kernel's start, the notebook's own limit (every
# cell and probe), and nbgrader's steps. A notebook that runs out of its own time is partly graded, not lost.
SUBMISSION_LIMIT = STARTUP_LIMIT + NOTEBOOK_LIMIT + NBGRADER_OVERHEAD
CELL_TIMEOUT = POLICY.cell_s  # seconds for an answer or test cell (the setup cell has POLICY.setup_s)
WARM_CHAPTERS = 12  # warm trusted servers one plain `nbgrader autograde` process keeps (its chapters, in turn)


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


def _digest(course_dir: Path, chapter: str, student: str) -> str:
    """What the grade depends on: the submission's files, the assignment's source notebook, the grader's code."""
    digest = hashlib.sha256()
    folder = course_dir / "submitted" / student / chapter
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    paths += [course_dir / "source" / chapter / f"{chapter}.ipynb", *sorted(Path(__file__).parent.glob("*.py"))]
    for path in paths:
        digest.update(str(path.name).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def configure(config, course_dir: Path | str, db_url: str | None = None) -> None:
    """Set nbgrader's grading configuration: the gradebook (`db_url` or the course's), Execute in the sandbox."""
    import nbgrader.api
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        GetGrades,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )

    from tools.classroom.execute import SandboxedExecute
    from tools.classroom.feedback import HideHiddenTests

    nbgrader.api.get_alembic_version = alembic_head  # its answer for each new gradebook, without a new Python
    config.CourseDirectory.root = str(course_dir)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.db_url = db_url or gradebook_url(course_dir)
    config.OverwriteCells.add_missing_cells = True
    config.Execute.startup_timeout = STARTUP_LIMIT
    # plain nbgrader (the course's nbgrader_config.py): each chapter's setup run once per nbgrader process, ~0.5 GB each
    config.SandboxedExecute.warm_servers = WARM_CHAPTERS
    config.Autograde.autograde_preprocessors = [SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor,
                                                LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    # feedback goes to students: no hidden check, nor a traceback quoting one
    config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]


def scratch_url(course_dir: Path | str) -> str:
    """The db_url of a worker's scratch course: its own SQLite file, whatever $BERT_BOOK_GRADEBOOK_URL says."""
    return f"sqlite:///{Path(course_dir) / 'gradebook.db'}"


def nbgrader_config(course_dir: Path, report_path: Path | None = None, cell_timeout: int = CELL_TIMEOUT,
                    db_url: str | None = None, trusted_server: str = ""):
    """nbgrader's configuration for one grading run, built here: the course's nbgrader_config.py is not run."""
    from traitlets.config import Config

    config = Config()
    configure(config, course_dir, db_url)
    if report_path:
        config.SandboxedExecute.report_path = str(report_path)
    config.SandboxedExecute.cell_timeout = cell_timeout
    config.SandboxedExecute.trusted_server = trusted_server
    config.SandboxedExecute.warm_servers = 0  # a grading child lives for one submission: the caller's server or none
    return config


def _grade_one(course_dir: Path, chapter: str, student: str, report_path: Path, cell_timeout: int,
               trusted_server: str = "") -> int:
    """In a child process: nbgrader autograde for one student, its Execute step in the sandbox."""
    from nbgrader.apps import NbGraderAPI

    # a worker's scratch course: its own SQLite gradebook, never the course's (only the coordinator writes that)
    api = NbGraderAPI(config=nbgrader_config(course_dir, report_path, cell_timeout, scratch_url(course_dir),
                                             trusted_server))
    result = api.autograde(chapter, student, force=True, create=True)
    if not result["success"]:
        print(result.get("error", "") or result.get("log", ""), file=sys.stderr)
    return 0 if result["success"] else 1


def _record(student: str, digest: str, seconds: float, report: dict | None, failure: str, notes: list[str]) -> Record:
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


RUNNING: set = set()  # the children grading now (children.Forked or subprocess.Popen), stopped at once on Ctrl-C


def _signal(child, number: int) -> None:
    """Signal a child's session (its sandbox in it), or the child alone if it has not made its session yet."""
    try:
        os.killpg(child.pid, number)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, number)


def _stop_children() -> None:
    """End every grading child and its sandbox (bwrap dies with its parent): SIGTERM, then SIGKILL."""
    for child in list(RUNNING):
        _signal(child, signal.SIGTERM)
    for child in list(RUNNING):
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal(child, signal.SIGKILL)
            child.wait()


def grade_student(course_dir: Path, chapter: str, student: str, digest: str, notes: list[str],
                  cell_timeout: int = CELL_TIMEOUT, trusted_server: str = "") -> Record:
    """Grade one submission in a child process with a wall-clock limit; its record says how it went."""
    from tools.classroom import children

    with tempfile.TemporaryDirectory(prefix="grade-report-") as folder:
        report_path, log_path = Path(folder) / "report.json", Path(folder) / "log.txt"
        started = time.monotonic()
        child = children.start([str(course_dir), chapter, student, str(report_path), str(cell_timeout),
                                trusted_server], venv_environment(), log_path)
        RUNNING.add(child)
        try:
            code = child.wait(timeout=SUBMISSION_LIMIT)
            failure = "" if code == 0 else f"nbgrader failed: {real_error(log_path.read_text(errors='replace'))}"
        except subprocess.TimeoutExpired:
            _signal(child, signal.SIGKILL)
            child.wait()
            failure = f"grading took longer than {SUBMISSION_LIMIT} s"
        finally:
            RUNNING.discard(child)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    return _record(student, digest, round(time.monotonic() - started, 1), report, failure, notes)


def preflight(course_dir: Path, chapter: str) -> str:
    """Fail before grading anyone unless the solution version gets every point in the sandbox; if it does not, the
    sandbox's self-check (bwrap_problem) names what is broken when it can. Returns the socket of the warm trusted
    server it graded with ('' if none), which the workers on this machine share."""

    from tools.classroom import warm
    from tools.classroom.execute import SandboxedExecute

    source = nbformat.read(course_dir / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    report, crash, server = {"stopped": None}, None, ""
    try:
        server = warm.server_for(nbformat.writes(source))  # warm for the workers too
        with tempfile.TemporaryDirectory(prefix="preflight-") as folder:
            report_path = Path(folder) / "report.json"
            SandboxedExecute(report_path=str(report_path), trusted_server=server).preprocess(
                source, {"metadata": {"path": folder}})
            report = json.loads(report_path.read_text())
    except Exception as error:  # noqa: BLE001 (no sandbox, or a kernel that would not start: said below)
        crash = f"{type(error).__name__}: {error}"
    failed = [(cell.metadata.get("nbgrader", {}).get("grade_id"), out) for cell in source.cells
              if cell.cell_type == "code" for out in cell.get("outputs", []) if out.output_type == "error"]
    if not (crash or failed or report["stopped"]):
        return server
    problem = bwrap_problem()
    if problem:
        raise ExerciseError(f"cannot grade: {problem}. The grading environment is broken; nobody was graded")
    grade_id, error = failed[0] if failed else ("", {"ename": "", "evalue": crash or report["stopped"]})
    raise ExerciseError(f"cannot grade {chapter}: the solution version fails in the grading sandbox, at cell "
                        f"{grade_id!r}: {error['ename']}: {error['evalue'][:300]}. The grading environment is "
                        "broken (is torch importable? are the book's helpers there?); nobody was graded")


def grade_class(course_dir: Path | str, chapter: str, workers: int = 2, students: list[str] | None = None,
                regrade_all: bool = False, cell_timeout: int = CELL_TIMEOUT, log=print, scheduler: str | None = None,
                progress: bool = False) -> dict[str, Record]:
    """Grade the new and changed submissions of a chapter on Dask workers; return every student's record."""
    course_dir = Path(course_dir).resolve()
    if not (course_dir / "source" / chapter / f"{chapter}.ipynb").exists():
        raise ExerciseError(f"no assignment {chapter!r} under {course_dir / 'source'}; run `make assignments`")
    if workers < 1:
        raise ExerciseError(f"--workers must be 1 or more, not {workers}")
    found = sorted(p.parent.name for p in (course_dir / "submitted").glob(f"*/{chapter}") if p.is_dir())
    students = found if students is None else students
    records = read_records(course_dir, chapter)
    todo, checked = [], {}
    for student in students:
        digest = _digest(course_dir, chapter, student) if student in found else ""
        old = records.get(student)
        if old and old.digest == digest and digest and not regrade_all:
            continue  # unchanged since it was graded: its grades, hand grades included, stay as they are
        errors, notes = check_submission(course_dir, chapter, student)
        if errors:
            records[student] = Record(student, "refused", " ".join(errors), notes, digest)
            continue
        todo.append(student)
        checked[student] = (digest, notes)
    server = preflight(course_dir, chapter) if todo else ""  # one warm trusted server for this machine
    where = f"the Dask scheduler at {scheduler}" if scheduler else f"{workers} workers"
    log(f"{chapter}: grading {len(todo)} submissions on {where} "
        f"({len(students) - len(todo)} unchanged or refused)")
    folder = records_dir(course_dir, chapter)
    folder.mkdir(parents=True, exist_ok=True)
    for student in students:  # the refused now; each graded one as soon as it is done, so a stopped run resumes
        if student in records and student not in todo:
            _write_record(folder, records[student])
    source = (course_dir / "source" / chapter / f"{chapter}.ipynb").read_text()
    tasks = [dict(chapter=chapter, student=s, source=source, digest=checked[s][0], notes=checked[s][1],
                  notebook=(course_dir / "submitted" / s / chapter / f"{chapter}.ipynb").read_text(),
                  cell_timeout=cell_timeout, trusted_server=server) for s in todo]
    bar = _progress_bar(len(todo), chapter, progress)
    for result in _results(tasks, workers, scheduler):
        record = Record(**result["record"])
        if result["notebook"] is not None:  # only the coordinator writes the gradebook
            from tools.classroom.cluster import save_graded

            failure = save_graded(course_dir, chapter, record.student, result["notebook"])
            if failure:
                record = Record(record.student, "not graded", failure, record.flags, record.digest, record.seconds)
        records[record.student] = record
        _write_record(folder, record)
        (bar.write if bar else log)(f"  {record.student}: {record.status} ({record.seconds:g} s)")
        if bar:
            bar.update()
    if bar:
        bar.close()
    return records


def _progress_bar(total: int, chapter: str, shown: bool):
    """A tqdm bar (count, rate, time left) on stderr, or None."""
    if not shown or not total:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=chapter, unit="submission", smoothing=0.1)


def _results(tasks: list[dict], workers: int, scheduler: str | None):
    """Each task's result as it finishes: in this process for one local worker, else on Dask; Ctrl-C stops all."""
    from tools.classroom import cluster

    if not tasks:
        return
    if workers == 1 and not scheduler:
        try:
            for task in tasks:
                yield cluster.grade_remote(task)
        except BaseException:  # Ctrl-C or a crash: the running submission is stopped with its sandbox
            _stop_children()
            raise
        return
    from distributed import as_completed as completed

    with cluster.open_client(workers, scheduler) as client:
        futures = [client.submit(cluster.grade_remote, task, key=f"grade-{task['student']}-{task['digest'][:12]}",
                                 pure=False, retries=0) for task in tasks]
        try:
            for future in completed(futures):
                yield future.result()
        except BaseException:  # nothing more starts; the running ones end with their sandboxes, on every worker
            client.cancel(futures)
            with contextlib.suppress(Exception):
                client.run(cluster.stop_running)
            raise


def _write_record(folder: Path, record: Record) -> None:
    """Write one record atomically: an interrupted write leaves the old record or none, never half of one."""
    temporary = folder / f".{record.student}.json.tmp"
    temporary.write_text(json.dumps(asdict(record), indent=1))
    temporary.replace(folder / f"{record.student}.json")


if __name__ == "__main__":
    sys.exit(_grade_one(Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]),
                        sys.argv[6]))
