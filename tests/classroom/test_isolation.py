"""Hidden tests never share an interpreter with student code: the plain-data wire, the trusted process, the caps."""

from __future__ import annotations

import gc
import io
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save

from tools.classroom.policy import sandbox, warm
from tools.classroom.policy.relay import TrustedTests, kernel_cell
from tools.classroom.protocol.trusted import HIDDEN_NOTE, Link, Remote, free_names, split_test
from tools.classroom.protocol.wire import Handle, Unsupported, WireError, decode, encode, write


def _round_trip(value, keep=None):
    tree, tensors = encode(value, keep)
    return decode(json.dumps(tree).encode(), save(tensors))


def test_plain_values_cross_the_wire_with_their_exact_types():
    value = {"a": [1, 2.5, True, None, "x"], (1, 2): (torch.arange(6).reshape(2, 3), np.eye(2)),
             "scalar": np.float64(0.25)}
    back = _round_trip(value)
    assert back.keys() == value.keys() and back["a"] == value["a"]
    assert [type(item) for item in back["a"]] == [int, float, bool, type(None), str]
    tensor, array = back[(1, 2)]
    assert type(tensor) is torch.Tensor and torch.equal(tensor, value[(1, 2)][0])
    assert type(array) is np.ndarray and np.array_equal(array, np.eye(2))
    assert type(back["scalar"]) is np.float64 and back["scalar"] == 0.25


class Always(int):
    __eq__ = lambda self, other: True  # noqa: E731
    __hash__ = int.__hash__


class Zero(float):
    __sub__ = lambda self, other: Zero(0.0)  # noqa: E731


class Yes(list):
    __eq__ = lambda self, other: True  # noqa: E731


@pytest.mark.parametrize("value", [Always(7), Zero(3.0), Yes(), torch.nn.Linear(2, 2)])
def test_subclasses_and_objects_stay_in_the_kernel(value):
    """An int whose == is always True is not an int on the trusted side: a handle, or an unsupported marker."""
    kept = []
    back = _round_trip([value], keep=lambda v: kept.append(v) or len(kept) - 1)
    assert type(back) is list and type(back[0]) is Handle and kept == [value]
    assert type(_round_trip(value)) is Unsupported


@pytest.mark.parametrize("tree", [
    {"pickle": "gASVAAAAAAAAAAB9lC4="}, {"list": [1], "tuple": [2]}, {"tensor": "missing"},
    {"numpy": ["object", 1]}, {"dict": [[{"list": [1]}, 2]]}, {"dict": [[{"tuple": [{"list": []}]}, 2]]},
    {"handle": "0"},
    json.loads("[" * 50 + "]" * 50),
])
def test_anything_outside_the_schema_is_refused(tree):
    with pytest.raises(WireError):
        decode(json.dumps(tree).encode(), save({}))
    with pytest.raises(WireError):
        decode(pickle.dumps(1), save({}))


def test_writing_a_reply_leaves_the_kernels_garbage_collector_as_it_was(tmp_path):
    """write() and decode() pause the collector while they build a plain tree: they never switch it on or off."""
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            write(str(tmp_path / "reply"), {"value": {"word": [1, 2.5]}})
            assert gc.isenabled() is enabled
            assert _decode_files(tmp_path / "reply") == {"value": {"word": [1, 2.5]}}
            assert gc.isenabled() is enabled
            with pytest.raises(WireError):
                decode(b"[", save({}))
            assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_an_interrupt_as_the_collector_pauses_leaves_it_on(monkeypatch):
    """The cell's time limit may interrupt write() just after it paused the collector: it is still switched back
    on (attack review 46w F1: 95 kernels in 200,000 left without a collector, before the fix)."""
    from tools.classroom.protocol.wire import paused_collector

    pause = gc.disable

    def interrupted():
        pause()
        raise KeyboardInterrupt  # what the kernel's SIGINT raises, at the worst moment

    monkeypatch.setattr(gc, "disable", interrupted)
    gc.enable()
    with pytest.raises(KeyboardInterrupt), paused_collector():
        pass
    assert gc.isenabled()


def test_a_decoded_reply_holds_no_tensor_once_decode_returns(monkeypatch):
    """decode's recursive builder is no cycle left behind: a tensor the reply never names dies with decode's call,
    without waiting for a collection (attack review 46w F2: up to 74 such 16 MiB tensors were alive at once)."""
    import weakref

    import safetensors.torch

    held = [torch.zeros(4)]
    alive = weakref.ref(held[0])
    monkeypatch.setattr(safetensors.torch, "load", lambda data: {"t0": held.pop()})  # decode holds it alone
    collecting = gc.isenabled()
    gc.disable()  # only reference counting may free it
    try:
        assert decode(json.dumps({"list": [1]}).encode(), b"") == [1]
        assert alive() is None
    finally:
        if collecting:
            gc.enable()


def _decode_files(stem: Path):
    return decode(stem.with_suffix(".json").read_bytes(), stem.with_suffix(".safetensors").read_bytes())


class _Names(pickle.Unpickler):
    """What a request names: each reference to a kernel object as ('kernel', kind, ref), the rest by value."""

    def persistent_load(self, pid):
        return ("kernel", *pid)

    def find_class(self, module, name):
        if (module, name) == ("tools.classroom.protocol.wire", "reference"):
            return lambda kind, ref: ("kernel", kind, ref)
        return super().find_class(module, name)


def _named(link: Link, value):
    return _Names(io.BytesIO(link._pickle(value))).load()


def test_a_request_names_the_setups_objects_even_a_plain_dict_and_copies_the_rest():
    """A setup dict is named as a tensor or a module is (one more kind of pickler asks about it); a test's own dict,
    tensor or list, and a setup object only equal to one, go by value."""
    model, lookup = torch.nn.Linear(2, 2), {"a": 1}
    link = Link(-1, -1)
    link.know_setup({"model": model, "lookup": lookup, "n": 3})
    mine = {"x": [1, 2], "t": torch.ones(2)}
    back = _named(link, [lookup, model, model.weight, mine, dict(lookup), 3])
    assert back[:3] == [("kernel", "setup", "lookup"), ("kernel", "setup", "model"),
                        ("kernel", "setup", "model.weight")]
    assert back[3]["x"] == [1, 2] and torch.equal(back[3]["t"], torch.ones(2)) and back[4:] == [{"a": 1}, 3]
    plain = Link(-1, -1)  # no plain container in the setup: C pickles the plain data, asking about the rest only
    plain.know_setup({"model": model})
    assert _named(plain, [{"m": model, "r": Remote(None, 4, "r")}, mine["x"]]) == [
        {"m": ("kernel", "setup", "model"), "r": ("kernel", "handle", 4)}, [1, 2]]
    configured = torch.nn.Linear(1, 1)
    configured.config = {"k": 1}  # a module's plain-dict config: named as the module's, as before
    inner = Link(-1, -1)
    inner.know_setup({"configured": configured})
    assert _named(inner, [configured.config, {"k": 1}]) == [("kernel", "setup", "configured.config"), {"k": 1}]


def test_a_setup_object_that_died_lends_its_id_to_no_other_object():
    """A test that rebinds a setup name frees its object; a tensor made later at the same address must go by value,
    not as the kernel's own copy of the setup's (the link holds what it names)."""
    namespace = {"table": torch.zeros(3)}
    link = Link(-1, -1)
    link.know_setup(namespace)
    del namespace["table"]
    gc.collect()
    made = [torch.full((3,), float(i)) for i in range(1000)]  # CPython reuses a freed address within a few
    back = _named(link, made)
    assert all(type(t) is torch.Tensor and float(t[0]) == i for i, t in enumerate(back))


def test_free_names_are_what_the_test_reads_without_binding():
    source = ("import numpy as np\nexpected = np.ones(3)\nfor word in words:\n    assert f(word) == g(x)\n"
              "def h(y):\n    return y + table\n")
    assert free_names(source, known={"table", "g"}) == ["f", "words", "x"]
    assert split_test("a\n### BEGIN HIDDEN TESTS\nb\n### END HIDDEN TESTS") == ("a\n", "\nb\n")


def test_a_remote_object_has_no_truth_value_nor_equality():
    remote = Remote(None, 0, "answer")
    for use in (bool, lambda r: r == 1, lambda r: r != 1, len, hash):
        with pytest.raises(TypeError):
            use(remote)


STUDENT = '''
import torch
class Always(int):
    __eq__ = lambda self, other: True
    __hash__ = int.__hash__
good, cheat, wrong = 3, Always(4), 4
def double(t):
    return 2 * t
def layer(n):
    return torch.nn.Linear(n, 1)
def same_model(m):
    return m is model
def kinds(box):
    return {k: "the model" if v is model else "its weight" if v is model.weight else type(v).__name__
            for k, v in box.items()}
abs = lambda x: 0
'''
TEST = ("assert isinstance({name}, int)\n### BEGIN HIDDEN TESTS\nassert {name} == 3 and abs(-1) == 1\n"
        "### END HIDDEN TESTS")


SETUP = "import torch\nmodel = torch.nn.Linear(2, 2)\n"


@pytest.fixture(scope="module", params=["fresh", "warm"])
def trusted(request):
    """A trusted process (in its sandbox) whose 'kernel' is a namespace of this process holding the answers: a
    fresh process that runs the setup, or a fork of a warm server that ran it (warm.py); the same checks hold."""
    scratch = Path(tempfile.mkdtemp(prefix="grading-test-"))
    student: dict = {}
    exec(STUDENT + "model = torch.nn.Linear(2, 2)\n", student)  # noqa: S102

    def run_in_kernel(code, timeout):
        exec(code, student)  # noqa: S102 (the kernel cell, run where the answers are)

    server = warm.TrustedServer(SETUP) if request.param == "warm" else None
    tests = TrustedTests(scratch, run_in_kernel, server=str(server.socket) if server else "")
    tests.start(SETUP, 300)
    yield tests
    assert (tests.process is None) == bool(server)  # warm: every test ran in a fork, no process of its own
    tests.close()
    if server:
        server.close()
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.parametrize(("name", "status"), [("good", "passed"), ("cheat", "visible"), ("wrong", "hidden")])
def test_values_are_checked_by_the_trusted_process_not_by_the_students_objects(trusted, name, status):
    result = trusted.run(name, TEST.format(name=name), 60, 300)
    assert result["status"] == status, result
    if status == "hidden":  # what the student sees of a hidden failure: that one failed, nothing of the check
        assert result["evalue"] == HIDDEN_NOTE and result["traceback"] == [HIDDEN_NOTE]


def test_student_functions_run_in_their_kernel_on_the_tests_inputs(trusted):
    source = ("t = torch.arange(3.0)\nassert torch.equal(double(t), 2 * t)\nm = layer(4)\n"
              "assert m.in_features == 4 and m.weight.shape == (1, 4)\n"
              "assert same_model(model) is True  # the setup's model goes by name: the kernel's own\n")
    assert trusted.run("calls", source, 60, 300)["status"] == "passed"
    failed = trusted.run("visible", "assert double(1) == 3, 'one doubled'", 60, 300)
    assert failed["status"] == "visible" and failed["ename"] == "AssertionError" and "one doubled" in failed["evalue"]
    nested = ("m = layer(3)\nbox = {'m': model, 'w': model.weight, 'r': m, 'd': {'x': [1]}, 't': torch.ones(1)}\n"
              "assert kinds(box) == {'m': 'the model', 'w': 'its weight', 'r': 'Linear', 'd': 'dict', "
              "'t': 'Tensor'}, kinds(box)\n")  # named in a request at any depth; the rest by value
    assert trusted.run("nested", nested, 60, 300)["status"] == "passed"
    refused = trusted.run("truth", "assert layer(2)", 60, 300)  # an object of the kernel is not truthy here
    assert refused["status"] == "visible" and refused["ename"] == "TypeError", refused


def test_a_corrupted_reply_fails_the_test(trusted, monkeypatch):
    def garbage(code, timeout):
        for stem in sorted(trusted.kernel_scratch.glob("grader-request.pkl")):
            (stem.parent / f"grader-reply-{trusted.calls}.json").write_text('{"evil": 1}')
            (stem.parent / f"grader-reply-{trusted.calls}.safetensors").write_bytes(save({}))

    monkeypatch.setattr(trusted, "run_in_kernel", garbage)
    result = trusted.run("garbage", "assert good == 3", 60, 300)
    assert result["status"] == "visible" and "schema" in result["evalue"], result
    assert kernel_cell(Path("/r"), Path("/s")).count("exec(") == 1


def test_the_process_cap_binds_here():
    """A fork loop in the sandbox stops at the cap (a pids cgroup as root; RLIMIT_NPROC otherwise)."""
    scratch = Path(tempfile.mkdtemp(prefix="grading-forks-"))
    assert not sandbox.process_cap(scratch)[1].startswith("none"), sandbox.process_cap(scratch)
    code = ("import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
            "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)")
    try:
        result = subprocess.run([*sandbox.bwrap_command(scratch), sys.executable, "-c", code], capture_output=True,
                                text=True, timeout=120)
    finally:
        sandbox.release(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    assert 0 < int(result.stdout) < sandbox.PROCESS_LIMIT, result.stdout + result.stderr
