"""Grading a class: a preflight, then one sandboxed `nbgrader autograde` per new or changed submission (cluster.py)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from pathlib import Path

import nbformat

from tools.classroom.nbgrader.grading import check_submission
from tools.classroom.nbgrader.nbconfig import CELL_TIMEOUT
from tools.classroom.nbgrader.nbconfig import configure as configure  # what course folders' nbgrader_config.py import
from tools.classroom.nbgrader.records import Record, read_records, records_dir, write_record
from tools.classroom.policy import runs
from tools.classroom.policy.sandbox import bwrap_problem
from tools.classroom.run.submission import stop_children
from tools.environment import ROOT
from tools.exercises.schema import ExerciseError


def _digest(course_dir: Path, chapter: str, student: str) -> str:
    """What the grade depends on: the submission's files, the assignment's source notebook, the grader's code."""
    digest = hashlib.sha256()
    folder = course_dir / "submitted" / student / chapter
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    grader = sorted((ROOT / "tools" / "classroom").rglob("*.py"))
    paths += [course_dir / "source" / chapter / f"{chapter}.ipynb", *grader]
    for path in paths:
        digest.update(str(path.name).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def preflight(course_dir: Path, chapter: str) -> str:
    """Fail before grading anyone unless the solution version gets every point in the sandbox; if it does not, the
    sandbox's self-check (bwrap_problem) names what is broken when it can. Returns the socket of the warm trusted
    server it graded with ('' if none), which the workers on this machine share."""

    from tools.classroom.nbgrader.execute import SandboxedExecute
    from tools.classroom.policy import warm

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
    runs.sweep()  # the run folders (and tmpfs mounts) of a grader killed on this machine before
    server = preflight(course_dir, chapter) if todo else ""  # one warm trusted server for this machine
    where = f"the Dask scheduler at {scheduler}" if scheduler else f"{workers} workers"
    log(f"{chapter}: grading {len(todo)} submissions on {where} "
        f"({len(students) - len(todo)} unchanged or refused)")
    folder = records_dir(course_dir, chapter)
    folder.mkdir(parents=True, exist_ok=True)
    for student in students:  # the refused now; each graded one as soon as it is done, so a stopped run resumes
        if student in records and student not in todo:
            write_record(folder, records[student])
    source = (course_dir / "source" / chapter / f"{chapter}.ipynb").read_text()
    tasks = [dict(chapter=chapter, student=s, source=source, digest=checked[s][0], notes=checked[s][1],
                  notebook=(course_dir / "submitted" / s / chapter / f"{chapter}.ipynb").read_text(),
                  cell_timeout=cell_timeout, trusted_server=server) for s in todo]
    bar = _progress_bar(len(todo), chapter, progress)
    for result in _results(tasks, workers, scheduler):
        record = Record(**result["record"])
        if result["notebook"] is not None:  # only the coordinator writes the gradebook
            from tools.classroom.run.cluster import save_graded

            failure = save_graded(course_dir, chapter, record.student, result["notebook"])
            if failure:
                record = Record(record.student, "not graded", failure, record.flags, record.digest, record.seconds)
        records[record.student] = record
        write_record(folder, record)
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
    from tools.classroom.run import cluster

    if not tasks:
        return
    if workers == 1 and not scheduler:
        try:
            for task in tasks:
                yield cluster.grade_remote(task)
        except BaseException:  # Ctrl-C or a crash: the running submission is stopped with its sandbox
            stop_children()
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
