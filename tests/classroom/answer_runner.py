"""Run a chapter's exercise answers against its tests in plain Python, on the checkpoint BERT_BOOK_CHECKPOINT names.

`python -m tests.classroom.answer_runner <chapter>` prints JSON: for each exercise, per test, "" when it passes, else
its error, for the model solution, the `partial` answer and each tempting `wrong` answer. As in the notebook, an
exercise sees the setup and the model solutions of the exercises before it; each answer runs in its own copy of that
namespace; a test passes when its visible and hidden code raise nothing.
"""

from __future__ import annotations

import json
import sys
import traceback

from tools.book.toc import ROOT
from tools.classroom.schema import load_chapter


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
    import matplotlib

    matplotlib.use("Agg")
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


if __name__ == "__main__":
    try:
        print(json.dumps(run(sys.argv[1])))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
