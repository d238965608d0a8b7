"""`python -m tools.classroom`: the exercises' command line (see book/teachers.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tools.classroom
from tools.classroom.nbgrader.grading import read_scores
from tools.classroom.nbgrader.nbconfig import nbgrader_main
from tools.classroom.run import platforms
from tools.classroom.run.classgrade import CELL_TIMEOUT, grade_class
from tools.classroom.run.export import COLUMNS, write_gradebook
from tools.classroom.run.feedback import write_feedback
from tools.classroom.run.one import grade_one
from tools.exercises.book_sync import BOOK_DIR, TEACHERS_PAGE, check_book, sync_book
from tools.exercises.course import COURSE_DIR, build_assignments
from tools.exercises.schema import ExerciseError


def _print_scores(chapter_name: str, scores: dict[str, dict]) -> None:
    print(f"{chapter_name}: scores from nbgrader's gradebook")
    print(f"  {'student':20} {'autograded':>12} {'total':>12}  hand grading")
    for student, score in sorted(scores.items()):
        if not score["graded"]:
            print(f"  {student:20} NOT GRADED: nbgrader stopped on this submission (see its log); its 0 is no score")
            continue
        auto = f"{score['auto_score']:g}/{score['max_auto_score']:g}"
        total = f"{score['score']:g}/{score['max_score']:g}"
        print(f"  {student:20} {auto:>12} {total:>12}  {'pending' if score['needs_manual_grade'] else 'done'}")


def _print_summary(records: list) -> None:
    """How many submissions got each status; for the others, each reason with its count."""
    print("summary: " + ", ".join(f"{sum(r.status == status for r in records)} {status}"
                                  for status in ("graded", "partly graded", "not graded", "refused")))
    reasons: dict[tuple[str, str], int] = {}
    for record in records:
        if record.status != "graded":
            key = (record.status, record.reason[:150])
            reasons[key] = reasons.get(key, 0) + 1
    for (status, reason), count in sorted(reasons.items()):
        print(f"  {count:4} {status}: {reason}")


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; return the exit status: 0 done, 1 problems found, 2 an exercise file or course is wrong."""
    parser = argparse.ArgumentParser(prog="python -m tools.classroom", description=tools.classroom.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("assignments", help="write the nbgrader course directory, student versions, zips")
    build.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    for name, text in (("sync-book", "write the exercise cells into the chapters and the teachers' table"),
                       ("check-book", "list chapters whose exercise cells are out of sync with exercises/")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--book-dir", type=Path, default=BOOK_DIR)
        command.add_argument("--teachers-page", type=Path, default=TEACHERS_PAGE)
    for name in ("grade", "autograde"):
        grade = commands.add_parser(name, help="grade new and changed submissions, each in a sandbox, on Dask workers")
        grade.add_argument("chapter")
        grade.add_argument("--student", action="append", help="only this student (repeatable)")
        grade.add_argument("--workers", type=int, default=2,
                           help="local Dask worker processes, one sandbox each (default 2; 1: no Dask)")
        grade.add_argument("--scheduler", help="the address of a Dask scheduler whose workers grade (a cluster)")
        grade.add_argument("--all", action="store_true", help="grade unchanged submissions again too")
        grade.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT, help="seconds per answer or test cell")
        grade.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    one = commands.add_parser("grade-one", help="grade one notebook in its sandbox; write a JSON results file")
    one.add_argument("chapter")
    one.add_argument("notebook", type=Path, help="the student's .ipynb file")
    one.add_argument("--output", type=Path, required=True, help="where to write the results (JSON)")
    one.add_argument("--gradescope", type=Path, help="also write Gradescope's results.json here")
    one.add_argument("--prairielearn", type=Path, help="also write a PrairieLearn external grader's results.json here")
    one.add_argument("--student", help="the student id (default: the notebook's file name)")
    one.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT, help="seconds per answer or test cell")
    one.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    export = commands.add_parser("export", help="write the chapter's gradebook with a status column as CSV")
    export.add_argument("chapter")
    export.add_argument("--output", type=Path, help="CSV file (default: <course-dir>/grades-<chapter>.csv)")
    export.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    feedback = commands.add_parser("feedback", help="write the feedback pages: the hidden checks left out, and "
                                   "'not graded: <reason>' instead of a score where there is none")
    feedback.add_argument("chapter")
    feedback.add_argument("--student", action="append", help="only this student (repeatable)")
    feedback.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    show = commands.add_parser("scores", help="print the scores in nbgrader's gradebook")
    show.add_argument("chapter")
    show.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    run = commands.add_parser("nbgrader", help="run an nbgrader command in the course directory (its config applies)")
    run.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    run.add_argument("arguments", nargs=argparse.REMAINDER, help="nbgrader's own arguments, e.g. autograde CHAPTER")
    args = parser.parse_args(argv)
    if args.command == "nbgrader":
        return nbgrader_main(args.course_dir, args.arguments)
    try:
        if args.command == "assignments":
            for line in build_assignments(args.course_dir):
                print(line)
        elif args.command == "sync-book":
            for line in sync_book(args.book_dir, teachers_page=args.teachers_page):
                print(line)
        elif args.command == "check-book":
            problems = check_book(args.book_dir, teachers_page=args.teachers_page)
            print("\n".join(problems) if problems else "every chapter's exercise cells are in sync")
            return 1 if problems else 0
        elif args.command in ("grade", "autograde"):
            records = grade_class(args.course_dir, args.chapter, args.workers, args.student, args.all,
                                  args.cell_timeout, scheduler=args.scheduler, progress=True)
            print(f"{'student':20} {'status':14} reason")
            for student, record in sorted(records.items()):
                if args.student and student not in args.student:
                    continue
                print(f"{student:20} {record.status.upper():14} {record.reason}")
                for flag in record.flags:
                    print(f"{'':35} note: {flag}")
            _print_scores(args.chapter, {s: v for s, v in read_scores(args.course_dir, args.chapter).items()
                                         if records.get(s) and records[s].status in ("graded", "partly graded")})
            asked = [r for s, r in records.items() if not args.student or s in args.student]
            _print_summary(asked)
            return 0 if all(r.status == "graded" for r in asked) else 1
        elif args.command == "grade-one":
            results = grade_one(args.course_dir, args.chapter, args.notebook, args.output, args.student,
                                args.cell_timeout, {platforms.gradescope: args.gradescope,
                                                    platforms.prairielearn: args.prairielearn})
            score = "" if results["auto_score"] is None else \
                f" {results['auto_score']:g}/{results['max_auto_score']:g} autograded"
            print(f"{results['student']}: {results['status']}{score} {results['reason']} -> {args.output}")
            return 0 if results["status"] == "graded" else 1
        elif args.command == "export":
            target = args.output or args.course_dir / f"grades-{args.chapter}.csv"
            rows = write_gradebook(args.course_dir, args.chapter, target)
            counts = {status: sum(row["status"] == status for row in rows) for status in
                      ("graded", "partly graded", "not graded", "refused")}
            print(f"{target}: {len(rows)} rows ({', '.join(f'{n} {s}' for s, n in counts.items())}); columns: "
                  f"{', '.join(COLUMNS)}")
        elif args.command == "feedback":
            rows = write_feedback(args.course_dir, args.chapter, args.student)
            print(f"{args.course_dir / 'feedback'}: {len(rows)} pages; those without a score say why:")
            for row in rows:
                print(f"  {row['student']:20} {row['feedback']}")
            return 0 if all(row["status"] == "graded" for row in rows) else 1
        elif args.command == "scores":
            _print_scores(args.chapter, read_scores(args.course_dir, args.chapter))
    except ExerciseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the running submissions were stopped; each finished one has its record
        print("stopped: the submissions graded so far keep their records; run the command again to grade the rest",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
