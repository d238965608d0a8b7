"""`python -m tools.classroom`: the exercises' command line (see book/teachers.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tools.classroom
from tools.classroom.book_sync import BOOK_DIR, TEACHERS_PAGE, check_book, sync_book
from tools.classroom.course import COURSE_DIR, build_assignments
from tools.classroom.grading import autograde, read_scores
from tools.classroom.schema import ExerciseError


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
    grade = commands.add_parser("autograde", help="check submissions, run nbgrader autograde, print the scores")
    grade.add_argument("chapter")
    grade.add_argument("--student", action="append", help="only this student (repeatable)")
    grade.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    show = commands.add_parser("scores", help="print the scores in nbgrader's gradebook")
    show.add_argument("chapter")
    show.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    args = parser.parse_args(argv)
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
        elif args.command == "autograde":
            report = autograde(args.course_dir, args.chapter, args.student)
            for line in report.warnings:
                print("warning:", line)
            for student, errors in report.refused.items():
                for line in errors:
                    print(f"NOT GRADED ({student}):", line)
            if report.returncode:
                print(report.log)
                print(f"nbgrader autograde failed (exit {report.returncode}); its log is above")
            _print_scores(args.chapter, report.scores)
            return 0 if report.ok else 1
        elif args.command == "scores":
            _print_scores(args.chapter, read_scores(args.course_dir, args.chapter))
    except ExerciseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
