"""Run chapters' exercise answers against their tests in plain Python, on one or more checkpoints.

`python -m tests.classroom.answer_runner [--checkpoint NAME[=DIR] ...] CHAPTER [CHAPTER ...]` prints one JSON line:
for each checkpoint (NAME alone, or `packaged` when none is given: the one BERT_BOOK_CHECKPOINT names as the caller
set it), for each chapter, for each exercise, per test, "" when it passes, else its error, for the model solution,
the `partial` answer and each tempting `wrong` answer (or, for a chapter whose run failed, {"error": its
traceback}). As in the notebook, an exercise sees the setup and the model solutions of the exercises before it; each
answer runs in its own copy of that namespace; a test passes when its visible and hidden code raise nothing. Each
chapter runs in a child forked after the imports every chapter shares (torch, transformers, the helpers) and after
its checkpoint was read and checked, so chapters share no state and pay for the imports and the checkpoint once:
load_bert() hands each child a fresh copy of the cached model, as it does every later caller in one process, and
reading a checkpoint draws no random numbers, so each child's draws are those of a fresh process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import tempfile
import traceback
from pathlib import Path

from helpers.checkpoint import ENV_VAR, load_bert
from tools.book.toc import ROOT
from tools.exercises.schema import load_chapter


def _passes(namespace: dict, exercise, answer: str) -> list[str]:
    """Per test, "" when it passes after the answer ran in a copy of the namespace, else the error it raised."""
    scope = dict(namespace)
    try:
        exec(compile(exercise.answer_source(answer), f"<{exercise.id} answer>", "exec"), scope)
    except Exception as error:  # a wrong answer may raise anything: it then earns nothing
        return [f"the answer raised {type(error).__name__}: {error}"[:300]] * len(exercise.tests)
    results = []
    for number, test in enumerate(exercise.tests, start=1):
        try:
            exec(compile(test.visible + test.hidden, f"<{exercise.id} test {number}>", "exec"), scope)
            results.append("")
        except Exception as error:
            results.append(f"{type(error).__name__}: {error}"[:300])
    return results


def run(chapter_name: str) -> dict:
    """{exercise id: {"solution": [...], "partial": [...] or None, "wrong": [[...], ...]}}, in the notebook's order."""
    chapter = load_chapter(ROOT / "exercises" / f"{chapter_name}.yml")
    namespace: dict = {}
    exec(compile(chapter.setup, "<setup>", "exec"), namespace)
    results = {}
    for exercise in chapter.exercises:
        results[exercise.id] = {
            "solution": _passes(namespace, exercise, exercise.solution),
            "partial": _passes(namespace, exercise, exercise.partial.solution) if exercise.partial else None,
            "wrong": [_passes(namespace, exercise, wrong.solution) for wrong in exercise.wrong],
        }
        exec(compile(exercise.answer_source(), f"<{exercise.id} solution>", "exec"), namespace)  # the next see it
    return results


def _preload() -> None:
    """Import what every chapter's setup imports, before any fork (no torch thread pool has started yet)."""
    import matplotlib

    matplotlib.use("Agg")
    import helpers

    for module in pkgutil.iter_modules(helpers.__path__):
        importlib.import_module(f"helpers.{module.name}")


def run_forked(chapter_name: str) -> dict:
    """run(chapter_name) in a forked child; its error's traceback as {"error": ...} when it raised or died."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "results.json"
        pid = os.fork()
        if pid == 0:  # the child: write the results, never return into the parent's code
            code = 1
            try:
                output.write_text(json.dumps(run(chapter_name)))
                code = 0
            except BaseException:
                output.write_text(json.dumps({"error": traceback.format_exc()}))
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if not output.exists():
            return {"error": f"the child running {chapter_name} ended with wait status {status} and wrote nothing"}
        return json.loads(output.read_text())


def run_checkpoint(directory: str | None, chapters: list[str], asked: str | None) -> dict:
    """{chapter: run_forked(chapter)} on the checkpoint in directory (None: `asked`, the caller's
    BERT_BOOK_CHECKPOINT, unset for the packaged one), read and checked once before the forks."""
    setting = directory if directory is not None else asked
    if setting is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = setting
    load_bert()  # cached for the children; the copy it returns is dropped
    return {name: run_forked(name) for name in chapters}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", action="append", metavar="NAME[=DIR]", default=[],
                        help="a checkpoint to run the chapters on; repeat for more (default: packaged)")
    parser.add_argument("chapters", nargs="+")
    args = parser.parse_args(argv)
    checkpoints = dict(item.split("=", 1) if "=" in item else (item, None) for item in args.checkpoint or ["packaged"])
    asked = os.environ.get(ENV_VAR)
    _preload()
    found = {name: run_checkpoint(directory, args.chapters, asked) for name, directory in checkpoints.items()}
    print(json.dumps(found))


if __name__ == "__main__":
    main()
