"""The exercise files exercises/<chapter>.yml: their schema, checks and loading, in the book's order."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools.book.toc import toc_pages
from tools.environment import ROOT

EXERCISES_DIR = ROOT / "exercises"
KINDS = {
    "number": "read off a number",
    "function": "write a function",
    "figure": "make a figure and explain it",
    "explain": "explain in a few sentences",
}
ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class ExerciseError(ValueError):
    """An exercise file, a chapter notebook or a submission is not what the tools expect; the message says why."""


@dataclass(frozen=True)
class Test:
    """One autograded test cell: visible checks, hidden checks, and the points it is worth."""

    points: int
    visible: str = ""
    hidden: str = ""


@dataclass(frozen=True)
class Manual:
    """A written answer graded by hand: what the student is asked, a model answer, and how to give the points."""

    points: int
    prompt: str
    answer: str
    rubric: str


@dataclass(frozen=True)
class Partial:
    """A plausible half-right answer and the test numbers (1-based) it passes: proof that the tests tell them apart."""

    solution: str
    passes: tuple[int, ...]


@dataclass(frozen=True)
class Wrong:
    """A tempting wrong answer and why it is wrong: the tests must give it less than full marks."""

    solution: str
    why: str


@dataclass(frozen=True)
class Exercise:
    """One exercise: the prompt and objective, starter and solution code, its tests and any hand-graded part."""

    id: str
    title: str
    objective: str
    kind: str
    difficulty: int
    minutes: int
    prompt: str
    solution: str
    tests: tuple[Test, ...]
    starter: str = ""
    manual: Manual | None = None
    partial: Partial | None = None
    wrong: tuple[Wrong, ...] = ()

    @property
    def auto_points(self) -> int:
        return sum(test.points for test in self.tests)

    @property
    def manual_points(self) -> int:
        return self.manual.points if self.manual else 0

    @property
    def points(self) -> int:
        return self.auto_points + self.manual_points

    @property
    def answer_id(self) -> str:
        return f"{self.id}-answer"

    @property
    def written_id(self) -> str:
        return f"{self.id}-written"

    def test_id(self, number: int) -> str:
        return f"{self.id}-test-{number}"

    def answer_source(self, solution: str | None = None, markers: bool = False) -> str:
        """The answer cell: the starter code, then the solution (between nbgrader's markers when asked)."""
        return answer_code(self.starter, self.solution if solution is None else solution, markers)


@dataclass(frozen=True)
class Chapter:
    """The exercises of one chapter; the chapter's name is also the assignment's and the notebook's name."""

    name: str
    title: str
    prefix: str
    setup: str
    exercises: tuple[Exercise, ...]
    more_to_try: str = ""

    @property
    def auto_points(self) -> int:
        return sum(exercise.auto_points for exercise in self.exercises)

    @property
    def manual_points(self) -> int:
        return sum(exercise.manual_points for exercise in self.exercises)

    @property
    def points(self) -> int:
        return self.auto_points + self.manual_points

    @property
    def minutes(self) -> int:
        return sum(exercise.minutes for exercise in self.exercises)

    def label(self, exercise: Exercise) -> str:
        return f"{self.prefix}-{exercise.id}"


def byline(exercise: Exercise) -> str:
    """The italic line under an exercise's title: its kind, difficulty, expected time and points."""
    stars = "★" * exercise.difficulty + "☆" * (3 - exercise.difficulty)
    return (f"*{KINDS[exercise.kind].capitalize()} · difficulty {stars} · about {exercise.minutes} minutes · "
            f"{_points_text(exercise)}*")


def _points_text(exercise: Exercise) -> str:
    if exercise.manual_points and exercise.auto_points:
        return f"{_points(exercise.points)} ({exercise.auto_points} autograded, {exercise.manual_points} by hand)"
    if exercise.manual_points:
        return f"{_points(exercise.points)} (graded by hand)"
    return f"{_points(exercise.points)} (autograded)"


def _points(n: int) -> str:
    return f"{n} point" if n == 1 else f"{n} points"


def answer_code(starter: str, code: str, markers: bool = False) -> str:
    """The starter, then code indented to continue it; code after two blank lines stays at the top level."""
    # A solution whose starter opens a function is that function's body; after two blank lines (as PEP 8 separates
    # top-level code) may follow code that uses the function, a figure or a check, which is not indented. With
    # markers, nbgrader's solution region covers both.
    indent = _indent_after(starter)
    inside, _, after = code.strip("\n").partition("\n\n\n")
    body = textwrap.indent(inside, indent)
    if after.strip():
        body += "\n\n\n" + after.strip("\n")
    if markers:
        body = f"{indent}### BEGIN SOLUTION\n{body}\n{'' if after.strip() else indent}### END SOLUTION"
    return "\n".join(part for part in (starter.rstrip("\n"), body) if part)


def _indent_after(starter: str) -> str:
    """A solution continues its starter: indented like the starter's last line, one level more after a ':'."""
    lines = [line for line in starter.splitlines() if line.strip()]
    if not lines:
        return ""
    indent = re.match(r"\s*", lines[-1]).group(0)
    return indent + "    " if lines[-1].rstrip().endswith(":") else indent


def _text(data: dict, key: str, where: str, required: bool = True) -> str:
    value = data.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ExerciseError(f"{where}: '{key}' must be text, got {type(value).__name__}")
    if required and not value.strip():
        raise ExerciseError(f"{where}: '{key}' is missing or empty")
    return value.strip("\n") + "\n" if value.strip() else ""


def _int(data: dict, key: str, where: str, low: int, high: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ExerciseError(f"{where}: '{key}' must be a whole number from {low} to {high}, got {value!r}")
    return value


def _compiles(code: str, where: str) -> None:
    try:
        compile(code, where, "exec")
    except SyntaxError as error:
        raise ExerciseError(f"{where}: Python syntax error on line {error.lineno}: {error.msg}") from None


def _exercise(data: dict, where: str) -> Exercise:
    known = {"id", "title", "objective", "kind", "difficulty", "minutes", "prompt", "starter", "solution", "tests",
             "manual", "partial", "wrong"}
    if not isinstance(data, dict):
        raise ExerciseError(f"{where}: each exercise must be a mapping of keys to values")
    unknown = set(data) - known
    if unknown:
        raise ExerciseError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(known)}")
    exercise_id = data.get("id")
    if not isinstance(exercise_id, str) or not ID_PATTERN.match(exercise_id):
        raise ExerciseError(f"{where}: 'id' must match {ID_PATTERN.pattern} (it names nbgrader cells), got "
                            f"{exercise_id!r}")
    where = f"{where} ({exercise_id})"
    kind = data.get("kind")
    if kind not in KINDS:
        raise ExerciseError(f"{where}: 'kind' must be one of {sorted(KINDS)}, got {kind!r}")
    tests = []
    for number, test in enumerate(data.get("tests") or [], start=1):
        if not isinstance(test, dict) or set(test) - {"points", "visible", "hidden"}:
            raise ExerciseError(f"{where}: test {number} must have 'points' and 'visible' and/or 'hidden' code")
        visible = _text(test, "visible", f"{where} test {number}", required=False)
        hidden = _text(test, "hidden", f"{where} test {number}", required=False)
        if not (visible + hidden).strip():
            raise ExerciseError(f"{where}: test {number} has no code")
        _compiles(visible + hidden, f"{where} test {number}")
        tests.append(Test(_int(test, "points", f"{where} test {number}", 1, 20), visible, hidden))
    manual = None
    if data.get("manual") is not None:
        spec = data["manual"]
        if not isinstance(spec, dict):
            raise ExerciseError(f"{where}: 'manual' must have points, prompt, answer and rubric")
        manual = Manual(_int(spec, "points", f"{where} manual", 1, 20), _text(spec, "prompt", f"{where} manual"),
                        _text(spec, "answer", f"{where} manual"), _text(spec, "rubric", f"{where} manual"))
    if not tests and manual is None:
        raise ExerciseError(f"{where}: an exercise needs at least one test or a hand-graded 'manual' part")
    starter = _text(data, "starter", where, required=False)
    solution = _text(data, "solution", where)
    _compiles(answer_code(starter, solution), f"{where} solution")
    partial = None
    if data.get("partial") is not None:
        spec = data["partial"]
        passes = spec.get("passes") if isinstance(spec, dict) else None
        if not isinstance(passes, list) or not all(isinstance(n, int) and 1 <= n <= len(tests) for n in passes):
            raise ExerciseError(f"{where}: 'partial' needs 'solution' code and 'passes', a list of test numbers "
                                f"from 1 to {len(tests)}")
        partial = Partial(_text(spec, "solution", f"{where} partial"), tuple(sorted(passes)))
        _compiles(answer_code(starter, partial.solution), f"{where} partial")
    wrong = []
    for number, spec in enumerate(data.get("wrong") or [], start=1):
        if not isinstance(spec, dict) or set(spec) != {"solution", "why"}:
            raise ExerciseError(f"{where}: wrong answer {number} needs exactly 'solution' code and 'why' text")
        wrong.append(Wrong(_text(spec, "solution", f"{where} wrong {number}"), _text(spec, "why", f"{where} wrong")))
        _compiles(answer_code(starter, wrong[-1].solution), f"{where} wrong {number}")
    return Exercise(
        id=exercise_id, title=_text(data, "title", where).strip(), objective=_text(data, "objective", where).strip(),
        kind=kind, difficulty=_int(data, "difficulty", where, 1, 3), minutes=_int(data, "minutes", where, 1, 120),
        prompt=_text(data, "prompt", where), solution=solution, tests=tuple(tests), starter=starter, manual=manual,
        partial=partial, wrong=tuple(wrong),
    )


def load_chapter(path: Path | str) -> Chapter:
    """Read and check one exercises/<chapter>.yml file; raise ExerciseError naming the file and the problem."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ExerciseError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ExerciseError(f"{path}: expected a mapping with chapter, title, prefix, setup and exercises")
    where = str(path)
    name = data.get("chapter")
    if name != path.stem:
        raise ExerciseError(f"{path}: 'chapter' must be the file's stem {path.stem!r} (the chapter notebook's name), "
                            f"got {name!r}")
    prefix = data.get("prefix")
    if not isinstance(prefix, str) or not ID_PATTERN.match(prefix):
        raise ExerciseError(f"{path}: 'prefix' must match {ID_PATTERN.pattern}, got {prefix!r}")
    setup = _text(data, "setup", where)
    _compiles(setup, f"{where} setup")
    items = data.get("exercises")
    if not isinstance(items, list) or not items:
        raise ExerciseError(f"{path}: 'exercises' must be a non-empty list")
    exercises = tuple(_exercise(item, f"{path} exercise {number}") for number, item in enumerate(items, start=1))
    ids = [exercise.id for exercise in exercises]
    if len(set(ids)) != len(ids):
        raise ExerciseError(f"{path}: exercise ids must be unique, got {ids}")
    return Chapter(name=name, title=_text(data, "title", where).strip(), prefix=prefix, setup=setup,
                   exercises=exercises, more_to_try=_text(data, "more_to_try", where, required=False))


def load_chapters(directory: Path | str = EXERCISES_DIR) -> list[Chapter]:
    """Every exercises/*.yml file, in the order of the book's table of contents (then by name)."""
    paths = sorted(Path(directory).glob("*.yml"))
    if not paths:
        raise ExerciseError(f"no exercise files (*.yml) in {directory}")
    try:
        order = [Path(page).stem for page in toc_pages()]
    except (OSError, yaml.YAMLError):  # no readable _toc.yml: by name alone
        order = []
    paths.sort(key=lambda path: (order.index(path.stem) if path.stem in order else len(order), path.stem))
    return [load_chapter(path) for path in paths]
