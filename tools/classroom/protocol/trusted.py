"""The trusted test process: the setup's source, then each test cell, with the student's values bound as plain data.

Run as `python -m tools.classroom.protocol.trusted` in its own sandbox by tools/classroom/policy/relay.py; it never
runs student code. A student function is a `Remote`: calling it asks the grader to run it in the student's kernel,
with the arguments pickled (pickle goes to the untrusted side only) and the result read back as plain data
(wire.decode).
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import importlib
import io
import os
import pickle
import signal
import socket
import sys
import time
import traceback

from tools.classroom.protocol import frames
from tools.classroom.protocol.wire import Handle, WireError, decode, reference

HIDDEN_NOTE = "a hidden check failed"
# Exact types C's pickle writes itself, without asking Pickler.reducer_override (persistent_id is asked for all)
UNASKED = (dict, list, set, frozenset, bytearray)
BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class StudentError(Exception):
    """The student's code raised, in their kernel, while a test called it; `ename` is the student's error name."""

    def __init__(self, ename: str, message: str):
        super().__init__(message)
        self.ename = ename


def is_test(cell) -> bool:
    """A grader's test cell: graded, not an answer; it runs in the trusted process, never in the student's kernel."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def split_test(source: str) -> tuple[str, str]:
    """(visible, hidden) parts of a test cell's source."""
    if BEGIN not in source:
        return source, ""
    visible, rest = source.split(BEGIN, 1)
    return visible, rest.split(END, 1)[0]


def free_names(source: str, known: set[str]) -> list[str]:
    """Names a test reads without binding them itself, minus `known` (the setup's) and the builtins."""
    tree = ast.parse(source)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return sorted(loaded - bound - known - set(dir(builtins)))


class Remote:
    """An object that stays in the student's kernel: attributes and calls go there; no truth value, no comparison."""

    def __init__(self, link: Link, number: int, label: str):
        object.__setattr__(self, "_remote", (link, number, label))

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        link, number, label = self._remote
        return link.ask(number, [name], None, f"{label}.{name}")

    def __call__(self, *args, **kwargs):
        link, number, label = self._remote
        return link.ask(number, [], (args, kwargs), f"{label}(...)")

    def __repr__(self) -> str:
        return f"<{self._remote[2]}: an object of the student's kernel>"

    def _refuse(self, *args):
        raise TypeError(f"{self!r} cannot be compared or tested for truth by the grader; return a plain value")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __len__ = __iter__ = __hash__ = _refuse


class Link:
    """The trusted side of the pipes to the grader; asks it to run things in the student's kernel."""

    def __init__(self, inp: int, out: int):
        self.inp, self.out, self.setup_ids = inp, out, {}
        self.setup_objects: list = []  # each named object held: its id is never another object's while named
        self.unasked = False  # a setup object of a type in UNASKED: only persistent_id would see it

    def know_setup(self, namespace: dict) -> None:
        """Name the setup's objects: an argument that is one goes by name and is the kernel's own copy of it."""
        import torch

        for name, value in namespace.items():
            plain = value is None or type(value) in (bool, int, float, str, bytes, tuple)
            if name.startswith("_") or plain or isinstance(value, type) or type(value).__name__ in (
                    "module", "function", "builtin_function_or_method"):
                continue
            self.setup_ids[id(value)] = name
            self.setup_objects.append(value)
            if isinstance(value, torch.nn.Module):
                for prefix, named in (("", value.named_modules()), ("", value.named_parameters()),
                                      ("", value.named_buffers())):
                    for path, item in named:
                        self.setup_ids.setdefault(id(item), f"{name}.{prefix}{path}" if path else name)
                        self.setup_objects.append(item)
                if hasattr(value, "config"):
                    self.setup_ids.setdefault(id(value.config), f"{name}.config")
                    self.setup_objects.append(value.config)
        self.unasked = any(type(value) in UNASKED for value in self.setup_objects)

    def _reference(self, obj) -> tuple[str, object] | None:
        """How a request names `obj` if it is the kernel's own (a Remote's handle, a setup object), else None."""
        if isinstance(obj, Remote):
            return ("handle", obj._remote[1])
        name = self.setup_ids.get(id(obj))
        return ("setup", name) if name else None

    def _pickle(self, value) -> bytes:
        """The request's pickle: the kernel's own objects named (wire.reference), the rest by value."""
        link = self

        class Pickler(pickle.Pickler):  # asked about objects that are not plain data only: C does the rest
            def reducer_override(self, obj):
                ref = link._reference(obj)
                return (reference, ref) if ref else NotImplemented

        class Asking(pickle.Pickler):  # asked about every object, a plain dict or list of the setup's too
            def persistent_id(self, obj):
                return link._reference(obj)

        buffer = io.BytesIO()
        (Asking if self.unasked else Pickler)(buffer, protocol=4).dump(value)
        return buffer.getvalue()

    def request(self, message: dict):
        """Send a request for the kernel; its reply decoded to plain data (a dict), or an error raised."""
        frames.send(self.out, {"op": "call", "request": base64.b64encode(self._pickle(message)).decode()})
        reply = frames.receive(self.inp)
        if reply.get("op") != "reply":
            raise RuntimeError("the grader's relay answered out of turn")
        if "error" in reply:
            raise StudentError("Error", str(reply["error"]))
        value = decode(base64.b64decode(reply["json"]), base64.b64decode(reply["tensors"]))
        if type(value) is not dict:
            raise WireError("the kernel's reply does not follow the grader's schema")
        return value

    def ask(self, number: int, path: list[str], call, label: str):
        """Get an attribute of, or call, kernel object `number`; the result as plain data or a Remote."""
        import torch

        reply = self.request({"op": "call", "target": number, "path": path, "call": call,
                              "rng": torch.get_rng_state()})
        rng = reply.get("rng")
        if type(rng) is torch.Tensor and rng.dtype == torch.uint8 and rng.shape == torch.get_rng_state().shape:
            torch.set_rng_state(rng)  # one random stream, as when the checks ran beside the answers
        if "error" in reply:
            ename, message = reply["error"] if type(reply["error"]) is list and len(reply["error"]) == 2 else (
                "Error", "")
            raise StudentError(str(ename)[:100], f"{label} raised {ename}: {message}"[:2000])
        return self.wrap(reply.get("value"), label)

    def wrap(self, value, label: str):
        """Remotes for the handles in a decoded value; an unsupported value stays a marker."""
        if isinstance(value, Handle):
            return Remote(self, value.number, label)
        if type(value) in (list, tuple):
            return type(value)(self.wrap(item, label) for item in value)
        if type(value) is dict:
            return {key: self.wrap(item, label) for key, item in value.items()}
        return value

    def export(self, names: list[str]) -> dict:
        """The student's values of `names` (those the kernel has), as plain data or Remotes."""
        values = self.request({"op": "export", "names": names}).get("value")
        if type(values) is not dict or not all(type(name) is str for name in values):
            raise WireError("the kernel's export does not follow the grader's schema")
        return {name: self.wrap(value, name) for name, value in values.items() if name in names}


def _failure(error: BaseException, filename: str, source: str) -> dict:
    """The error output of a failed visible part: the test's own lines only, as Jupyter would show them."""
    lines = source.splitlines()
    ename = error.ename if isinstance(error, StudentError) else type(error).__name__
    frames_shown = [f"  {filename}, line {frame.lineno}: {lines[frame.lineno - 1].strip()}"
                    for frame in traceback.extract_tb(error.__traceback__)
                    if frame.filename == filename and 0 < (frame.lineno or 0) <= len(lines)]
    evalue = str(error)[:10_000]
    return {"ename": ename, "evalue": evalue, "traceback": ["Traceback (most recent call last):", *frames_shown,
                                                            f"{ename}: {evalue}"]}


def run_test(link: Link, namespace: dict, known: set[str], grade_id: str, source: str) -> dict:
    """Bind the student's values, run the visible then the hidden part: 'passed', or where it failed and how."""
    visible, hidden = split_test(source)
    names = free_names(source, known)
    try:
        values = link.export(names) if names else {}
    except (WireError, StudentError, frames.FrameError) as error:
        return {"status": "visible", "ename": "GradingError", "evalue": str(error), "traceback": [str(error)]}
    for name in names:
        namespace.pop(name, None)
    namespace.update(values)
    for part, code in (("visible", visible), ("hidden", hidden)):
        filename = f"<{grade_id} {part}>"
        try:
            exec(compile(code, filename, "exec"), namespace)  # noqa: S102 (the course's own test code)
        except Exception as error:
            if part == "hidden":
                name = error.ename if isinstance(error, StudentError) else type(error).__name__
                return {"status": "hidden", "ename": name, "evalue": HIDDEN_NOTE, "traceback": [HIDDEN_NOTE]}
            return {"status": "visible", **_failure(error, filename, code)}
    return {"status": "passed"}


def _setup(namespace: dict, link: Link, source: str) -> dict:
    """Run the course's setup in `namespace`; its result as a frame's fields."""
    try:
        exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102 (the course's own setup)
        link.know_setup(namespace)
        return {"status": "passed"}
    except Exception as error:
        return {"status": "visible", **_failure(error, "<setup>", source)}


def serve(inp: int, out: int, namespace: dict, setup: dict | None = None) -> None:
    """Answer frames until the grader hangs up: the setup (unless `setup` is its result already), then tests."""
    link = Link(inp, out)
    link.know_setup(namespace)
    known = {name for name in namespace if not name.startswith("__")}
    if setup is not None:  # a fork of the server, which ran the setup
        frames.send(out, {"op": "result", **setup, "seconds": 0.0})
    while True:
        try:
            message = frames.receive(inp)
        except frames.FrameError:
            return
        started = time.monotonic()
        if message["op"] == "setup":
            result = _setup(namespace, link, message["source"])
            known = {name for name in namespace if not name.startswith("__")}
        else:
            result = run_test(link, namespace, known, message["grade_id"], message["source"])
        result["seconds"] = round(time.monotonic() - started, 2)
        frames.send(out, {"op": "result", **result})


def _reap(children: set[int]) -> None:
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.discard(pid)


def server(path: str, out: int) -> None:
    """Run the setup once (its source from stdin, with modules to import), then fork a copy for each submission.

    A connection to the Unix socket at `path` sends one frame: {"op": "fork", "setup": source} gets a child that
    answers on that connection as `serve` does, its first frame the setup's result and its pid; {"op": "kill", "pid"}
    ends such a child. The server never runs student code, nor reads anything a submission wrote.
    """
    request = frames.receive(0)
    namespace, source = {"__name__": "__main__"}, request["source"]
    setup = _setup(namespace, Link(-1, -1), source)
    for module in request.get("preload", []):  # what the course's test cells import: once here, not per fork
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    frames.send(out, {"op": "ready", **setup})
    children: set[int] = set()
    while True:
        connection, _ = listener.accept()
        _reap(children)
        try:
            message = frames.receive(connection.fileno(), time.monotonic() + 10)
        except (frames.FrameError, OSError):  # a caller that hung up costs it nothing
            connection.close()
            continue
        if message.get("op") == "kill" and message.get("pid") in children:
            os.kill(message["pid"], signal.SIGKILL)
        elif message.get("op") == "fork" and message.get("setup") == source:
            pid = os.fork()
            if pid == 0:  # the child: this connection only, never back into this loop
                try:
                    listener.close()
                    os.close(0)
                    os.close(out)
                    fd = connection.fileno()
                    serve(fd, fd, namespace, {**setup, "pid": os.getpid()})
                finally:
                    os._exit(0)
            children.add(pid)
        else:
            with contextlib.suppress(OSError):
                frames.send(connection.fileno(), {"op": "refused"})
        connection.close()


def main() -> None:
    """Serve the grader on stdin/stdout, or (--server PATH) fork per submission; prints go to stderr."""
    out = os.dup(1)
    os.dup2(2, 1)
    if sys.argv[1:2] == ["--server"]:
        server(sys.argv[2], out)
        return
    serve(0, out, {"__name__": "__main__"})


if __name__ == "__main__":
    main()
    sys.exit(0)
