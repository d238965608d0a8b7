"""What the grader runs in the student's kernel: answer one request (export values, or call a student function).

Sent as text, with wire.py, in a cell the notebook never shows. The student's code can change anything here; all
that comes out is what wire.decode accepts, so the worst it can do is choose its own answer.
"""

# `write` comes from wire.py, run before this in the same namespace.


def serve(user_ns: dict, request_path: str, stem: str) -> None:
    """Read the pickled request, run it, write the reply as plain data (handles for what is not plain)."""
    import pickle

    import torch

    handles = user_ns.setdefault("_grader_handles", [])

    def keep(value) -> int:
        handles.append(value)
        return len(handles) - 1

    def resolve(kind, ref):
        if kind == "handle":
            return handles[ref]
        name, *path = ref.split(".")
        value = user_ns[name]
        for attribute in path:
            value = getattr(value, attribute)
        return value

    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            return resolve(*pid)

        def find_class(self, module, name):  # wire.reference(kind, ref) in a request: resolved here
            if (module, name) == ("tools.classroom.protocol.wire", "reference"):
                return resolve
            return super().find_class(module, name)

    reply = {}
    try:
        with open(request_path, "rb") as file:
            request = Loader(file).load()
        if request["op"] == "export":
            reply["value"] = {name: user_ns[name] for name in request["names"] if name in user_ns}
        else:
            torch.set_rng_state(request["rng"])
            target = handles[request["target"]]
            for attribute in request["path"]:
                target = getattr(target, attribute)
            if request["call"] is not None:
                args, kwargs = request["call"]
                target = target(*args, **kwargs)
            reply["value"] = target
    except BaseException as error:  # noqa: BLE001 (an interrupt at the time limit too: the test fails with it)
        reply = {"error": [type(error).__name__, str(error)[:2000]]}
    reply["rng"] = torch.get_rng_state()
    write(stem, reply, keep)  # noqa: F821 (from wire.py)

