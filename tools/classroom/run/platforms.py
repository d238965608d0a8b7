"""grade-one's results in the shapes other graders read: Gradescope's results.json, PrairieLearn's external grader's."""

from __future__ import annotations


def _tests(results: dict) -> list[tuple[str, float, float]]:
    """(cell, points, maximum) of each scored cell (a written answer not yet graded by hand has no score: left out);
    none when the notebook was not graded."""
    points, most = results.get("points") or {}, results.get("max_points") or {}
    return [(name, float(points[name]), float(most[name])) for name in sorted(most) if points.get(name) is not None]


def _note(results: dict) -> str:
    """The status line a student sees: the status, its reason, the flags (never a hidden check's text)."""
    return "; ".join(part for part in [results["status"], results.get("reason", ""), *results.get("flags", [])]
                     if part)


def gradescope(results: dict) -> dict:
    """Gradescope's autograder results.json: the score, one test per test cell, and the status as output."""
    tests = _tests(results)
    return {"score": sum(points for _, points, _ in tests), "output": _note(results),
            "execution_time": round(results["timings"]["command_s"]), "stdout_visibility": "hidden",
            "tests": [{"name": name, "score": points, "max_score": most, "visibility": "visible",
                       "status": "passed" if points == most else "failed"} for name, points, most in tests]}


def prairielearn(results: dict) -> dict:
    """PrairieLearn's external grader results.json: gradable, a score in [0, 1], one test per test cell."""
    tests = _tests(results)
    most = sum(most for _, _, most in tests)
    return {"gradable": results["status"] in ("graded", "partly graded"), "message": _note(results),
            "score": sum(points for _, points, _ in tests) / most if most else 0.0,
            "tests": [{"name": name, "points": points, "max_points": most} for name, points, most in tests]}
