"""The kernel zygote: a course's imports done once, then a student kernel forked per submission, each sandboxed.

`python -m tools.classroom.policy.zygote serve CONFIG MODULE...` runs as root in a bwrap sandbox (warm.py
starts it beside the trusted server, where the grader is root). It imports ipykernel and the modules the setup cell
imports, and never runs student code. For each request it forks a child that gives itself what bwrap gives a
fresh kernel: its own mount, pid, network, IPC and UTS namespaces; a fresh /tmp, /dev/shm (each sized) and /proc;
only its own scratch folder writable; none of the grader's code; its own pids and memory cgroups; the memory, core
and process limits; a new session; a clean environment; then an unprivileged uid of its own, with no capabilities
and no new privileges. Only then does it start ipykernel. Its first cell finds torch, transformers and the
helpers imported.

`python -m tools.classroom.policy.zygote connect SOCKET REQUEST` is what the kernel manager starts in place of bwrap: it
asks for a kernel, exits with the kernel's exit status, and the kernel dies when it is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import time
from pathlib import Path

from tools.classroom.policy import handles
from tools.classroom.protocol import frames
from tools.environment import ROOT

NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWPID, NEWNET = 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 2, 1, 38
_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args) -> None:
    """A libc call that raises OSError, naming itself, when it fails."""
    if getattr(_libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}{args}: {os.strerror(error)}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    _call("mount", encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data))


def _isolate(scratch: tuple[str, int], hidden: list[str], covered: list[str], kept: list[str], tmpfs_mb: int) -> None:
    """In new namespaces: the `hidden` mounts gone, fresh tmpfs of `tmpfs_mb` over `covered`, then the read-only
    mounts `kept` that lay under them bound back (a checkout or a venv under /tmp), and `scratch` (a path, and the
    folder open there, checked) bound back writable."""
    _call("unshare", NEWNS | NEWPID | NEWNET | NEWIPC | NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    under = sorted(path for path in kept if any(Path(folder) in Path(path).parents for folder in covered))
    opened = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in [*under, scratch[0]]}  # in this namespace
    checked, found = os.fstat(scratch[1]), os.fstat(opened[scratch[0]])
    os.close(scratch[1])
    if (found.st_dev, found.st_ino) != (checked.st_dev, checked.st_ino):  # swapped since it was checked
        raise OSError(f"the folder {scratch[0]} changed after it was checked")
    for path in hidden:  # the grader's code and the cgroup trees: a failure here is a kernel refused
        _call("umount2", path.encode(), MNT_DETACH)
    for path in covered:  # /tmp, /dev/shm, and the zygote's folder (its socket, the other kernels' folders)
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={tmpfs_mb}m")
    for path, fd in opened.items():  # as bwrap binds them over its fresh /tmp
        Path(path).mkdir(parents=True, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        if path != scratch[0]:
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


def _drop(uid: int, policy: dict) -> None:
    """The policy's limits, a new session, the sandbox's own uid (which clears every capability), no new privileges."""
    os.setsid()
    limit = policy["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy["file_mb"] << 20, policy["file_mb"] << 20))
    resource.setrlimit(resource.RLIMIT_NPROC, (policy["processes"], policy["processes"]))
    os.umask(0o077)  # what the kernel writes, readable by its own uid only
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    status = Path("/proc/self/status").read_text()
    if any(line.split()[1].strip("0") for line in status.splitlines() if line.startswith(("CapEff", "CapPrm"))):
        raise OSError("capabilities left after the switch of uid")


def _kernel(request: dict) -> None:
    """The kernel's own process: dropped to the sandbox's uid, nothing of the zygote's open, then ipykernel."""
    scratch = request["scratch"]
    Path("/proc/self/oom_score_adj").write_text("1000")  # the host's OOM killer takes a sandbox before the grader
    _drop(request["uid"], request["policy"])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update(request["env"])
    _forget_the_zygote()
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=["-f", request["connection_file"]])


def _forget_the_zygote() -> None:
    """What a fresh kernel would not have: the zygote's argv, path, modules and random states (ASLR stays shared)."""
    import random

    del sys.path[0]  # the zygote's folder; as in ipykernel_launcher, IPython adds the working folder ('')
    sys.argv[:] = [importlib.util.find_spec("ipykernel_launcher").origin, "-f", "kernel.json"]
    for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
        del sys.modules[name]  # the grader's code, unmounted here
    random.seed()  # from os.urandom, as a fresh process seeds itself (numpy and torch too)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def _init(request: dict, go: int) -> None:
    """PID 1 of the kernel's namespace: its /proc, then the kernel as a child, then reap until the kernel exits."""
    _call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.read(go, 1) != b"1":  # the caller moved it into its pids cgroup, or gave up
        os._exit(1)
    _call("unshare", NEWCGROUP)  # its cgroup is its root, as bwrap's --unshare-cgroup gives
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    kernel = os.fork()
    if kernel == 0:
        try:
            _kernel(request)
        finally:
            os._exit(1)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    while True:
        pid, code = os.wait()
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(code) & 0xFF)


def _plain(path: object) -> bool:
    """An absolute path with nothing to normalise away ('..', '.', '//'): it names what it seems to name."""
    return type(path) is str and os.path.isabs(path) and os.path.normpath(path) == path


def _folder(path: str) -> bool:
    """Whether `path` is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _refused(request: dict, kernels: Path, cgroups: list[str]) -> str:
    """Why a request is refused ('' if it is not): a folder, uid, limit or cgroup that is not a kernel's."""
    scratch = request.get("scratch")
    if not _plain(scratch) or Path(scratch).parent != kernels or not _folder(scratch):
        return f"the folder {scratch!r} is not one of the zygote's kernels' folders"
    policy = request.get("policy")
    if type(policy) is not dict or sorted(policy) != ["file_mb", "memory_mb", "processes", "tmpfs_mb"] or not all(
            type(value) is int and value > 0 for value in [request.get("uid"), *policy.values()]):
        return "the uid and the policy's limits (file_mb, memory_mb, processes, tmpfs_mb) must be positive integers"
    if request["uid"] < 1000:
        return f"uid {request['uid']} is a system user's"
    groups, own = request.get("cgroups"), f"bert-book-{Path(scratch).name}"  # cgroups.PREFIX + its folder's name
    if type(groups) is not list or not all(_plain(group) and Path(group).name == "cgroup.procs"
                                           and Path(group).parent.name == own
                                           and str(Path(group).parent.parent) in cgroups for group in groups):
        return f"{groups!r} are not a sandbox's cgroups"
    return ""


def _serve_one(connection: socket.socket, kernels: Path, cgroups: list[str], mounts: list) -> None:
    """A child of the zygote for one caller: isolate, start the namespace's init, report its exit, kill it if left."""
    _call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    fd = connection.fileno()
    request = frames.receive(fd, time.monotonic() + 10)
    if request.get("op") == "fit":  # the grader asks before it chooses a forked kernel: this fork was allowed
        frames.send(fd, {"fit": True})
        return
    problem = _refused(request, kernels, cgroups)
    # the folder checked is the folder used: opened once, not through a link, and the kernel's uid's
    scratch = os.open(request["scratch"], os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW) if not problem else -1
    if not problem and os.fstat(scratch).st_uid != request["uid"]:
        problem = f"the folder {request['scratch']!r} is not uid {request['uid']}'s"
    if problem:
        frames.send(fd, {"exit": 1, "error": f"refused: {problem}"})
        return
    procs = [os.open(group, os.O_WRONLY) for group in request["cgroups"]]
    _isolate((request["scratch"], scratch), *mounts, request["policy"]["tmpfs_mb"])
    go_read, go_write = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(go_write)
        for group in procs:  # the cgroups are joined by the caller; the kernel's side never holds them
            os.close(group)
        connection.detach()
        _init(request, go_read)
    os.close(go_read)
    for group in procs:
        os.write(group, str(init).encode())  # before it runs anything: every process it starts is counted
        os.close(group)
    os.write(go_write, b"1")
    ended = os.pidfd_open(init)  # readable when the init has exited (a zombie until reaped: its pid stays ours)
    while True:
        ready = select.select([fd, ended], [], [])[0]
        if ended in ready:
            frames.send(fd, {"exit": os.waitstatus_to_exitcode(os.waitpid(init, 0)[1])})
            return
        if not connection.recv(1):  # the caller is gone: so is the kernel, and its namespace
            signal.pidfd_send_signal(ended, signal.SIGKILL)
            os.waitpid(init, 0)
            return


def threads() -> int:
    """This process's threads, as the kernel counts them: C libraries' too (OpenMP, BLAS), not Python's only."""
    return len(os.listdir("/proc/self/task"))


def serve(config: dict, modules: list[str]) -> None:
    """Import `modules`, then fork a sandboxed kernel per connection to the socket at config["socket"]."""
    out = os.dup(1)
    os.dup2(2, 1)  # what an import prints goes to stderr, not into the frames
    for module in ["ipykernel.kernelapp", *modules]:
        with contextlib.suppress(Exception):  # a module the setup fails to import fails there, in the kernel
            importlib.import_module(module)
    kernels, cgroups = Path(config["kernels"]), config["cgroups"]
    hidden = [str(ROOT / "tools"), *cgroups]
    covered = [*config["tmpfs"], *([] if Path("/tmp") in kernels.parents else [str(kernels.parent)])]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(config["socket"])
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each caller's child is reaped by the kernel
    frames.send(out, {"op": "ready", "threads": threads()})
    os.close(out)
    while True:
        connection, _ = listener.accept()
        count = threads()
        if count != 1:  # a fork beside another thread (Python's or a library's) could inherit a lock held
            with contextlib.suppress(OSError):
                frames.send(connection.fileno(), {"exit": 1, "unfit": count,
                                                  "error": f"fork guard: the kernel zygote runs {count} threads"})
        elif os.fork() == 0:
            try:
                listener.close()
                _serve_one(connection, kernels, cgroups, [hidden, covered, config["kept"]])
            except Exception as error:  # noqa: BLE001 (the caller hears why, and its kernel never started)
                with contextlib.suppress(OSError):
                    frames.send(connection.fileno(), {"exit": 1, "error": f"{type(error).__name__}: {error}"})
            finally:
                os._exit(1)
        connection.close()


def connect(path: str, request: str) -> int:
    """Ask the zygote at `path` for a kernel; its exit status (1 if none started), the reason on stderr."""
    try:  # root's folder, root's socket, root listening: not a socket another user put there
        with handles.connect(path, 0) as caller:
            frames.send(caller.fileno(), json.loads(request))
            answer = frames.receive(caller.fileno())
    except (OSError, frames.FrameError) as error:
        answer = {"exit": 1, "error": f"the kernel zygote at {path}: {error}"}
    if answer.get("error"):
        print(answer["error"], file=sys.stderr)
    return int(answer.get("exit", 1))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(json.loads(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(connect(sys.argv[2], sys.argv[3]))
