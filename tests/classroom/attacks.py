"""Cheats from issue 32, written into a course as submissions: `python -m tests.classroom.attacks COURSE_DIR`.

Each earned, against a grader that ran the hidden checks in the student's kernel, more than the blank notebook and
more than the same wrong answer without the trick (BASELINE names that answer). tests/classroom/test_sandbox.py
grades them with the simulated class and checks that none earns more than its baseline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from tests.classroom.simulated import CHAPTER, FAKE_TORCH, FIFTH, PAD, WORDPIECE, solutions, with_answer
from tools.classroom.nbgrader.grading import fill_answers

WRONG_NORM = "pad_id = tokenizer.pad_token_id\npad_norm = 0.0\n"
# An ipykernel_launcher.py beside the notebook: were it on the kernel's path, it would be the kernel.
LAUNCHER = ("import builtins\nbuiltins.abs = lambda x: 0\n"
            "from ipykernel import kernelapp\nkernelapp.launch_new_instance()\n")
ATTACKS = {
    "blank": ({}, {}),
    "honest": (solutions(), {}),
    "wrong-norm": (with_answer(PAD, WRONG_NORM), {}),  # the honest wrong answer the next five build on
    "code-object": (with_answer(PAD, "pad_id, pad_norm = 5, 0.0\nmodel.config.pad_token_id = 5\n"
                                "type(tokenizer).convert_tokens_to_ids.__code__ = (lambda self, tokens: 5).__code__"),
                    {}),
    "abs-rebound": (with_answer(PAD, WRONG_NORM + "abs = lambda x: 0"), {}),
    "torch-rebound": (with_answer(PAD, WRONG_NORM + "torch.linalg.vector_norm = lambda *a, **k: torch.tensor(0.0)"),
                      {}),
    "run-cell-hook": (with_answer(PAD, WRONG_NORM + "def swap(info):\n    ns = get_ipython().user_ns\n"
                                  "    if 'pad_norm -' in info.raw_cell:\n        ns['abs'] = lambda x: 0\n"
                                  "    else:\n        ns.pop('abs', None)\n"
                                  "get_ipython().events.register('pre_run_cell', swap)"), {}),
    "extra-torch-py": (with_answer(PAD, WRONG_NORM), {"torch.py": FAKE_TORCH}),
    "zero-share": (with_answer(FIFTH, "return 0.0"), {}),  # the honest wrong answer sklearn-patched builds on
    "sklearn-patched": (with_answer(FIFTH, "return 0.0\n\n\nimport numpy\nimport sklearn.metrics.pairwise as pairwise\n"
                                    "pairwise.cosine_similarity = lambda X, *a, **k: numpy.zeros((len(X), len(X)))"),
                        {}),
    "subclasses": ({PAD.id: "class I(int):\n    __eq__ = lambda s, o: True\n    __hash__ = int.__hash__\n\n\n"
                    "class Z(float):\n    __sub__ = lambda s, o: Z(0.0)\n\n\npad_id, pad_norm = I(7), Z(3.0)",
                    WORDPIECE.id: "class L(list):\n    __eq__ = lambda s, o: True\nreturn L()",
                    FIFTH.id: "class S(float):\n    __le__ = lambda s, o: True\n    __ge__ = lambda s, o: True\n"
                              "return S(0.5)"}, {}),
    # 6 MB printed by one cell: past the cell's cap (1 MB) and the whole notebook's (5 MB)
    "output-bomb": (with_answer(PAD, PAD.solution + "for _ in range(6000):\n    print('x' * 1000)"), {}),
    # the same wrong values as `subclasses`, plain: the baseline it is measured against
    "plain-wrong": ({PAD.id: "pad_id, pad_norm = 7, 3.0", WORDPIECE.id: "return []", FIFTH.id: "return 0.5"}, {}),
    "pad-five": (with_answer(PAD, "pad_id, pad_norm = 5, float(table[5].norm())"), {}),
    "config-edit": (with_answer(PAD, "pad_id, pad_norm = 5, float(table[5].norm())\nmodel.config.pad_token_id = 5\n"
                                "tokenizer.pad_token = tokenizer.convert_ids_to_tokens(5)"), {}),
    "post-run-hook": (with_answer(PAD, WRONG_NORM + "import builtins\nget_ipython().events.register("
                                  "'post_run_cell', lambda result: setattr(builtins, 'abs', lambda x: 0))"), {}),
    "extra-launcher": (with_answer(PAD, WRONG_NORM), {"ipykernel_launcher.py": LAUNCHER}),
    # children that sleep: the pids cap stops the forks, the answer's cell fails, the grader and the rest go on
    "fork-bomb": (with_answer(FIFTH, "import os, time\nfor _ in range(100000):\n    if os.fork() == 0:\n"
                                     "        time.sleep(30)\n        os._exit(0)\nreturn 0.0"), {}),
}
# The honest submission each attack builds on: it must earn no more than that one.
BASELINE = {"code-object": "pad-five", "abs-rebound": "wrong-norm", "torch-rebound": "wrong-norm",
            "run-cell-hook": "wrong-norm", "extra-torch-py": "wrong-norm", "sklearn-patched": "zero-share",
            "subclasses": "plain-wrong", "config-edit": "pad-five", "post-run-hook": "wrong-norm",
            "extra-launcher": "wrong-norm", "fork-bomb": "zero-share", "output-bomb": "honest"}


# Attacks whose notebook is the same as a kind of the simulated class (simulated.py): graded once, as that kind.
SAME_AS_KIND = {"blank": "blank", "honest": "correct"}


def attack_notebook(course: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The released notebook of the chapter with `answers` filled in."""
    released = nbformat.read(course / "release" / CHAPTER.name / f"{CHAPTER.name}.ipynb", as_version=4)
    return fill_answers(released, CHAPTER, answers)


def submit_attacks(course: Path, prefix: str = "", skip=()) -> None:
    """Write every attack but those in `skip` under submitted/<prefix><attack>/<chapter>/."""
    for student, (answers, files) in ATTACKS.items():
        if student in skip:
            continue
        folder = course / "submitted" / f"{prefix}{student}" / CHAPTER.name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(attack_notebook(course, answers), folder / f"{CHAPTER.name}.ipynb")
        for name, text in files.items():
            (folder / name).write_text(text)


if __name__ == "__main__":
    submit_attacks(Path(sys.argv[1]))
