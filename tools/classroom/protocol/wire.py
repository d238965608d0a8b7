"""Plain data between the student's kernel and the grader: JSON and safetensors, exact types only, never pickle.

The kernel runs `encode` (this file's source is sent to it as text) and writes `<stem>.json` and
`<stem>.safetensors`; the trusted test process runs `decode` on those bytes. Whatever the kernel does to `encode`,
`decode` can only return None, bools, ints, floats, strings, lists, tuples, dicts of those, plain tensors, numpy
arrays and scalars, and markers (a handle on an object that stays in the kernel, a function included).
"""

from __future__ import annotations

import contextlib
import gc
import json

NUMPY_SCALARS = ("bool_", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")
TAGS = ("list", "tuple", "dict", "tensor", "ndarray", "numpy", "handle", "unsupported")
MAX_DEPTH = 20
MAX_ITEMS = 1_000_000  # list items, dict entries and tensors in one reply


class WireError(ValueError):
    """A reply that is not plain data in the expected schema: the test that asked for it fails."""


def encode(value, keep=None, depth: int = 0, state=None) -> tuple[object, dict]:
    """(JSON-able tree, tensors by key) for a value; `keep(value)` -> handle number for what is not plain data."""
    import numpy
    import torch

    state = {"tensors": {}} if state is None else state
    kind = type(value)
    if depth > MAX_DEPTH:
        return {"unsupported": "a value nested too deeply"}, state["tensors"]
    if value is None or kind in (bool, int, float, str):
        return value, state["tensors"]
    if kind in (list, tuple):
        items = [encode(item, keep, depth + 1, state)[0] for item in value]
        return {kind.__name__: items}, state["tensors"]
    if kind is dict:
        items = [[encode(k, keep, depth + 1, state)[0], encode(v, keep, depth + 1, state)[0]]
                 for k, v in value.items()]
        return {"dict": items}, state["tensors"]
    if kind in (torch.Tensor, torch.nn.Parameter) and value.layout is torch.strided and not value.is_complex():
        key = f"t{len(state['tensors'])}"
        state["tensors"][key] = torch.Tensor(value.detach().cpu()).contiguous().clone()
        return {"tensor": key}, state["tensors"]
    if kind is numpy.ndarray and value.dtype.name in NUMPY_SCALARS:
        key = f"t{len(state['tensors'])}"
        state["tensors"][key] = torch.from_numpy(numpy.ascontiguousarray(value).copy())
        return {"ndarray": key}, state["tensors"]
    if kind.__module__ == "numpy" and kind.__name__ in NUMPY_SCALARS:
        return {"numpy": [kind.__name__, value.item()]}, state["tensors"]
    if keep is not None:  # a function too: the trusted side calls it through its handle
        return {"handle": keep(value)}, state["tensors"]
    return {"unsupported": kind.__name__[:100]}, state["tensors"]


def write(stem: str, value, keep=None) -> None:
    """Write `value` as <stem>.json and <stem>.safetensors (run in the kernel)."""
    from safetensors.torch import save_file

    with paused_collector():
        tree, tensors = encode(value, keep)
        text = json.dumps(tree)  # json.dump would take the pure-Python encoder
        del tree
    save_file(tensors, stem + ".safetensors")
    with open(stem + ".json", "w") as file:
        file.write(text)


@contextlib.contextmanager
def paused_collector():
    """No cyclic garbage collection meanwhile (as it was after): what encode and decode build is acyclic, and a
    collection of a kernel's or a test process's whole heap (~450,000 objects, 0.2 s) would find nothing in it."""
    collecting = gc.isenabled()
    try:  # disabled inside the try: an interrupt (the cell's time limit) right after it still re-enables it
        gc.disable()
        yield
    finally:
        if collecting:
            gc.enable()


def reference(kind: str, ref):
    """A request's name for an object of the kernel (a handle, a setup object); the kernel's Loader resolves it."""
    raise WireError(f"a reference to the kernel's {kind} {ref!r} is resolved in the kernel only")


class Handle:
    """An object that stayed in the student's kernel, named by number: the trusted side reaches it through calls."""

    def __init__(self, number: int):
        self.number = number


def decode(text: bytes, tensor_bytes: bytes):
    """The value a reply holds, built from plain types only; WireError for anything outside the schema."""
    with paused_collector():
        return _decode(text, tensor_bytes)


def _decode(text: bytes, tensor_bytes: bytes):
    import numpy
    import torch
    from safetensors.torch import load

    try:
        tree = json.loads(text)
        tensors = load(tensor_bytes)
    except Exception as error:  # any parse failure is the reply's fault, never a pass
        raise WireError(f"the kernel's reply is not plain data ({type(error).__name__})") from None
    count = [0]

    def build(node, depth):
        count[0] += 1
        if depth > MAX_DEPTH + 1 or count[0] > MAX_ITEMS:
            raise WireError("the kernel's reply is too large or too deep")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is not dict or len(node) != 1 or next(iter(node)) not in TAGS:
            raise WireError("the kernel's reply does not follow the grader's schema")
        (tag, body), = node.items()
        if tag in ("list", "tuple") and type(body) is list:
            items = [build(item, depth + 1) for item in body]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2 for p in body):
            return {_key(build(k, depth + 1)): build(v, depth + 1) for k, v in body}
        if tag in ("tensor", "ndarray") and type(body) is str and body in tensors:
            tensor = tensors[body]
            if type(tensor) is not torch.Tensor:
                raise WireError("a tensor in the reply is not a plain tensor")
            return tensor if tag == "tensor" else tensor.numpy()
        if tag == "numpy" and type(body) is list and len(body) == 2 and body[0] in NUMPY_SCALARS \
                and type(body[1]) in (bool, int, float):
            return getattr(numpy, body[0])(body[1])
        if tag == "handle" and type(body) is int:
            return Handle(body)
        if tag == "unsupported" and type(body) is str:
            return Unsupported(body)
        raise WireError(f"the kernel's reply has a malformed {tag!r} entry")

    try:
        return build(tree, 0)
    except (TypeError, RecursionError):  # an unhashable key, or nesting past Python's own limit
        raise WireError("the kernel's reply does not follow the grader's schema") from None
    finally:  # build refers to itself: a cycle that would hold every tensor of the reply until a collection
        build = None


def _key(key):
    if key is None or type(key) in (bool, int, float, str, tuple):
        return key
    raise WireError("a dict key in the reply is not a plain value")


class Unsupported:
    """A value the grader cannot take out of the kernel: using it in a test fails with its type's name."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}>"
