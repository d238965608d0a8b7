"""Run a chapter's exercise answers against its tests in plain Python, on the checkpoint BERT_BOOK_CHECKPOINT names.

`python -m tests.classroom.answer_runner <chapter>` prints JSON: for each exercise, which of its tests pass for the
model solution, for the `partial` answer and for each tempting `wrong` answer. Each answer runs in its own copy of
the namespace the chapter's setup made; a test passes when its visible and hidden code raise nothing.
"""

from __future__ import annotations

import json
import sys
import traceback

from tools.book.toc import ROOT
from tools.classroom.schema import load_chapter


def _passes(namespace: dict, exercise, answer: str) -> list[bool]:
    """Which tests pass after the answer runs in a fresh copy of the namespace (an answer that raises passes none)."""
    scope = dict(namespace)
    try:
        exec(compile(exercise.answer_source(answer), f"<{exercise.id} answer>", "exec"), scope)
    except Exception:  # a wrong answer may raise anything: it then earns nothing
        return [False] * len(exercise.tests)
    results = []
    for number, test in enumerate(exercise.tests, start=1):
        try:
            exec(compile(test.visible + test.hidden, f"<{exercise.id} test {number}>", "exec"), scope)
            results.append(True)
        except Exception:
            results.append(False)
    return results


def run(chapter_name: str) -> dict:
    """{exercise id: {"solution": [...], "partial": [...] or None, "wrong": [[...], ...]}}; solutions run first."""
    import matplotlib

    matplotlib.use("Agg")
    chapter = load_chapter(ROOT / "exercises" / f"{chapter_name}.yml")
    namespace: dict = {}
    exec(compile(chapter.setup, "<setup>", "exec"), namespace)
    results = {e.id: {"solution": _passes(namespace, e, e.solution)} for e in chapter.exercises}
    for exercise in chapter.exercises:
        result = results[exercise.id]
        result["partial"] = _passes(namespace, exercise, exercise.partial.solution) if exercise.partial else None
        result["wrong"] = [_passes(namespace, exercise, wrong.solution) for wrong in exercise.wrong]
    return results


if __name__ == "__main__":
    try:
        print(json.dumps(run(sys.argv[1])))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
