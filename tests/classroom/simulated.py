"""A simulated class: the kinds of submission a teacher of 200 meets, each with the grade and status it deserves."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tests.classroom.conftest import CHAPTERS, MAIN, released
from tools.book.toc import ROOT
from tools.classroom.nbgrader.grading import fill_answers

CHAPTER = CHAPTERS[MAIN]
PAD, WORDPIECE, FIFTH = CHAPTER.exercises  # 2, 3 and 2 autograded points (+3 by hand)


def solutions() -> dict[str, str]:
    """The model answers, the hand-graded written answer included."""
    answers = {exercise.id: exercise.solution for exercise in CHAPTER.exercises}
    answers.update({exercise.written_id: exercise.manual.answer for exercise in CHAPTER.exercises if exercise.manual})
    return answers


def with_answer(exercise, code: str) -> dict[str, str]:
    """The solutions, one exercise's answer replaced."""
    return dict(solutions(), **{exercise.id: code})


# What a student could try to read or write from inside the grading kernel; {course} is the course directory.
SNOOP = '''
import os, pathlib
seen = {"env": sorted(k for k in os.environ if "NBGRADER" in k or "GRADE" in k)}
for target in ["{course}/nbgrader_config.py", "{course}/source/{chapter}/{chapter}.ipynb",
               "{course}/gradebook.db", "/root/.bashrc", "/etc/shadow"]:
    try:
        seen[target] = open(target).read()[:300]
    except Exception as error:
        seen[target] = type(error).__name__
for target in ["{course}/outside.txt", "{course}/../outside.txt", "/outside.txt", "{home}/outside.txt",
               "{helpers}/outside.py"]:
    try:
        pathlib.Path(target).write_text("written by a student")
        seen["wrote " + target] = "yes"
    except Exception as error:
        seen["wrote " + target] = type(error).__name__
try:
    import socket
    socket.create_connection(("1.1.1.1", 80), timeout=3)
    seen["network"] = "yes"
except Exception as error:
    seen["network"] = type(error).__name__
print(seen)
'''

TAMPER_CONFIG = '''
try:
    with open("{course}/nbgrader_config.py", "a") as config:
        config.write("\\nimport os; os.system('touch {course}/pwned')\\n")
except Exception as error:
    print("could not tamper:", type(error).__name__)
'''


# A torch.py handed in beside the notebook: were it copied beside the kernel, `import torch` in the setup would run
# it, and the norm the hidden check computes would be the student's 0.0.
FAKE_TORCH = """import importlib, os, sys
here = os.path.dirname(os.path.abspath(__file__))
del sys.modules["torch"]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
real = importlib.import_module("torch")
real.linalg.vector_norm = lambda *args, **kwargs: real.tensor(0.0)
sys.modules["torch"] = real
"""
# An answer function that prints the source of the cell that calls it: the hidden check's.
CALLER_PRINTER = "import linecache, sys\nprint(''.join(linecache.getlines(sys._getframe(1).f_code.co_filename)))\n"
# An IPython hook that prints every cell before it runs, and one that prints all of them again after each cell.
CELL_ECHO = """
seen = []
def echo(info):
    seen.append(info.raw_cell)
    print(info.raw_cell)
get_ipython().events.register("pre_run_cell", echo)
get_ipython().events.register("post_run_cell", lambda result: print(repr(seen)))
"""


def kinds(course: Path) -> dict[str, dict]:
    """Student id -> {answers or a notebook edit, the status and autograded points it deserves, why}."""
    places = {"{course}": str(course), "{home}": str(Path.home()), "{chapter}": MAIN,
              "{helpers}": str(ROOT / "helpers")}
    snoop = SNOOP
    for name, value in places.items():
        snoop = snoop.replace(name, value)
    tamper = TAMPER_CONFIG.replace("{course}", str(course))
    partial = {PAD.id: PAD.solution, WORDPIECE.id: WORDPIECE.partial.solution, FIFTH.id: None}
    full = CHAPTER.auto_points
    return {
        "correct": dict(answers=solutions(), status="graded", points=full),
        "blank": dict(answers={}, status="graded", points=0),
        "partial": dict(answers=partial, status="graded", points=PAD.auto_points + 1),
        # normalises the shared table in place: pad_norm is 1.0; the tests read their own model, never the student's
        "tempting-wrong": dict(answers=with_answer(PAD, "pad_id = tokenizer.pad_token_id\n"
                                                   "table /= table.norm(dim=1, keepdim=True)\n"
                                                   "pad_norm = float(table[pad_id].norm())"),
                               status="graded", points=full - 1),
        "raising": dict(answers=with_answer(WORDPIECE, "raise RuntimeError('student bug')"), status="graded",
                        points=full - WORDPIECE.auto_points),
        # a loop that never ends, asleep (no CPU burnt while it waits for the interrupt at the cell's time limit)
        "infinite-loop": dict(answers=with_answer(WORDPIECE, "import time\nwhile True:\n    time.sleep(0.01)"),
                              status="graded",
                              points=full - WORDPIECE.auto_points, flag="ran past its time limit"),
        # a list that grows until the cap: a MemoryError in its cell, or (the list still held) a kernel that dies soon
        # after; the last exercise, so that either way exactly its points are lost
        "memory-bomb": dict(answers=with_answer(FIFTH, "hog = []\nwhile True:\n    hog.append(bytearray(10**8))"),
                            status=("graded", "partly graded"), points=full - FIFTH.auto_points),
        "huge-tensor": dict(answers=with_answer(WORDPIECE, "huge = torch.ones(10**10)"), status="graded",
                            points=full - WORDPIECE.auto_points),
        "crasher": dict(answers=with_answer(WORDPIECE, "import os\nos._exit(1)"), status="partly graded",
                        points=PAD.auto_points, reason="the kernel died"),
        "file-writer": dict(answers=with_answer(PAD, PAD.solution + snoop), status="graded", points=full),
        "config-tamperer": dict(answers=with_answer(PAD, PAD.solution + tamper), status="graded", points=full),
        # tricks that changed how later cells ran, when the checks ran in the kernel: now they change the student's
        # own cells only (every later answer is lost here), and the checks run in a process of their own
        "input-transformer": dict(answers=with_answer(PAD, "get_ipython().input_transformers_cleanup.append("
                                                      "lambda lines: [])"), status="graded", points=0),
        "monkeypatcher": dict(answers=with_answer(PAD, "import torch\ntorch.linalg.vector_norm = lambda *a, **k: "
                                                  "torch.tensor(1.0)\nimport math\nmath.isclose = lambda *a: True\n"
                                                  "pad_id, pad_norm = 0, 1.0"),
                              status="graded", points=full - 1),  # pad_id is right, pad_norm is not
        "module-swapper": dict(answers=with_answer(PAD, "import sys, types\nsys.modules['torch.linalg'] = "
                                                   "types.ModuleType('torch.linalg')\npad_id, pad_norm = 0, 1.0"),
                               status="graded", points=full - 1),
        # a wrong answer, and the test cell that would catch it edited to pass: nbgrader grades the real test
        "edited-test": dict(answers=with_answer(PAD, "pad_id = 1\npad_norm = 2.0"), edit=PAD.test_id(1),
                            status="graded", points=full - PAD.auto_points, flag="was edited"),
        "reordered": dict(answers=solutions(), swap=(PAD.test_id(1), PAD.test_id(2)), status="refused",
                          points=None, reason="reordered"),
        "renamed": dict(answers=solutions(), name=f"{MAIN} (1).ipynb", status="refused", points=None,
                        reason=f"expected {MAIN}.ipynb, found {MAIN} (1).ipynb"),
        # damaged files: refused with what to do, never a silent zero (nbgrader never sees them)
        "broken-json": dict(answers=solutions(), cut=True, status="refused", points=None,
                            reason="not a readable notebook (NotJSONError"),
        "deleted-setup": dict(answers=solutions(), delete="setup", status="refused", points=None,
                              reason="setup cell was deleted"),
        # a deleted test cell: nbgrader puts it back from the source version and grades it
        "deleted-test": dict(answers=solutions(), delete=WORDPIECE.test_id(1), status="graded", points=full,
                             flag=f"test cell {WORDPIECE.test_id(1)!r} was deleted; nbgrader puts it back"),
        # a wrong norm and a torch.py beside the notebook: only the notebook reaches the sandbox
        "extra-files": dict(answers=with_answer(PAD, "pad_id = tokenizer.pad_token_id\npad_norm = 0.0"),
                            files={"torch.py": FAKE_TORCH, "ipykernel_launcher.py": "raise SystemExit(0)\n"},
                            status="graded", points=full - 1),
        # right answers that try to carry the hidden checks into the feedback (tests on leaks read it)
        "leak-caller": dict(answers=with_answer(WORDPIECE, CALLER_PRINTER + WORDPIECE.solution), status="graded",
                            points=full),
        # 5 MB printed by an answer: the graded notebook keeps the cell's first 1 MB and a note, and a later wrong
        # answer still fails its hidden check (a cap never drops the error that costs the points)
        "output-bomb": dict(answers={PAD.id: PAD.solution + "for _ in range(5000):\n    print('x' * 1000)",
                                     WORDPIECE.id: WORDPIECE.partial.solution, FIFTH.id: FIFTH.solution},
                            status="graded", points=full - 2, flag="cut at the grader's cap"),
        "leak-echo": dict(answers=with_answer(PAD, PAD.solution + CELL_ECHO), status="graded", points=full),
    }


def submit_class(course: Path, students: dict[str, dict]) -> None:
    """Write each kind's notebook into nbgrader's layout submitted/<student>/<chapter>/<chapter>.ipynb."""
    for student, kind in students.items():
        notebook = fill_answers(released(course, MAIN), CHAPTER, kind["answers"])
        ids = [cell.metadata["nbgrader"]["grade_id"] for cell in notebook.cells]
        if "edit" in kind:
            notebook.cells[ids.index(kind["edit"])].source = "assert True  # edited by the student"
        if "swap" in kind:
            i, j = (ids.index(grade_id) for grade_id in kind["swap"])
            notebook.cells[i], notebook.cells[j] = notebook.cells[j], notebook.cells[i]
        if "delete" in kind:
            notebook.cells.pop(ids.index(kind["delete"]))
        folder = course / "submitted" / student / MAIN
        folder.mkdir(parents=True, exist_ok=True)
        text = nbformat.writes(notebook)
        (folder / kind.get("name", f"{MAIN}.ipynb")).write_text(text[: len(text) // 2] if kind.get("cut") else text)
        for name, text in kind.get("files", {}).items():
            (folder / name).write_text(text)
