"""Every exercise's tests tell right from wrong: the model solution earns full marks, each tempting wrong answer
less, the `partial` answer exactly its declared tests, on the packaged checkpoint and on an untrained BERT."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.classroom.conftest import CHAPTERS
from tools.book.any_bert import make_checkpoint
from tools.book.toc import ROOT

CHECKPOINTS = ["packaged", "width-96"]


@pytest.fixture(scope="session")
def answers(tmp_path_factory):
    """{checkpoint: {chapter: results}}: one answer_runner runs every chapter on both checkpoints (a child each)."""
    untrained = make_checkpoint("width-96", tmp_path_factory.mktemp("width-96"))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "tests.classroom.answer_runner", "--checkpoint", "packaged",
               "--checkpoint", f"width-96={untrained}", *CHAPTERS]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(found) == CHECKPOINTS
    return found


def _points(exercise, errors: list[str]) -> int:
    return sum(test.points for test, error in zip(exercise.tests, errors, strict=True) if not error)


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
@pytest.mark.parametrize("name", list(CHAPTERS))
def test_tests_give_full_marks_to_solutions_and_less_to_tempting_wrong_answers(name, checkpoint, answers):
    results = answers[checkpoint][name]
    assert "error" not in results, results.get("error")
    for exercise in CHAPTERS[name].exercises:
        if not exercise.tests:
            continue
        got = results[exercise.id]
        assert not any(got["solution"]), f"{exercise.id}: the model solution fails: {got['solution']}"
        if exercise.partial:
            passed = tuple(n for n, error in enumerate(got["partial"], start=1) if not error)
            assert passed == exercise.partial.passes, f"{exercise.id}: the partial answer passes {passed}"
        for wrong, passes in zip(exercise.wrong, got["wrong"], strict=True):
            assert _points(exercise, passes) < exercise.auto_points, f"{exercise.id}: full marks for {wrong.why}"


@pytest.mark.parametrize("name", list(CHAPTERS))
def test_every_autograded_exercise_has_a_tempting_wrong_answer(name):
    missing = [e.id for e in CHAPTERS[name].exercises if e.tests and not e.wrong]
    assert not missing, f"exercises without a `wrong:` answer: {missing}"
