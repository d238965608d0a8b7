"""The grading kernel's sandbox: bubblewrap (bwrap) around ipykernel, no network, a memory cap, a clean environment."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import zmq
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager

from tools.classroom.policy import cgroups, handles, runs
from tools.classroom.policy.gate import Gate
from tools.classroom.policy.policy import POLICY, SandboxPolicy
from tools.environment import ROOT

MEMORY_LIMIT_MB, PROCESS_LIMIT, TMPFS_MB = POLICY.memory_mb, POLICY.processes, POLICY.tmpfs_mb
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap)"


def private_folder(prefix: str) -> Path:
    """A fresh folder for one sandbox, inside a run folder of its own (mkdtemp: a random name, 0700, the grader's):
    never directly in /tmp, where every local user could list it or read what is left in it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=runs.make()))


def size_folder(folder: Path, mb: int = POLICY.scratch_mb, mode: str = "0700") -> None:
    """A root grader mounts a tmpfs of `mb` MiB on the fresh, empty `folder`: what a sandbox writes there is memory
    (its cgroup's), never the host's disk. A plain user cannot: RLIMIT_FSIZE (policy.file_mb) caps each file."""
    if os.geteuid() == 0 and not os.path.ismount(folder):
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m,mode={mode},nosuid,nodev", "tmpfs", str(folder)],
                       check=True, capture_output=True)


def release(folder: Path, run: bool = True) -> None:
    """After the sandbox: its folder's tmpfs unmounted, the folder removed, its cgroups released; and, if `run`, its
    run folder once empty (a shared run's, which later servers reuse, is its maker's to remove)."""
    if os.path.ismount(folder):
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True)
    runs.remove(folder)  # however deep the student made it (shutil.rmtree recurses: RecursionError)
    cgroups.release(folder)
    if run and folder.parent.name.startswith(cgroups.RUN_FOLDERS):  # its own run folder (private_folder), once empty
        with contextlib.suppress(OSError):
            if os.listdir(folder.parent) == [runs.STAMP]:
                os.unlink(folder.parent / runs.STAMP)
            folder.parent.rmdir()


def _kernel_reads() -> list[Path]:
    """What a kernel reads besides the system: the venv, the installation it was made from, the book's helpers.

    The book's helpers only: the rest of the repository (exercises/, with solutions and hidden tests) stays out.
    """
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    return [*sorted(root for root in roots if root.is_dir()), ROOT / "helpers"]




def _pids_cgroup(scratch: Path) -> Path | None:
    return cgroups.pids_cgroup(scratch, PROCESS_LIMIT)


# When the grader is root, each sandbox's processes run as an unprivileged user of their own: RLIMIT_NPROC counts a
# user's processes and does not bind root, and a sandbox that escapes is nobody. bwrap still mounts as root (the
# Python it binds may sit under a folder only root can enter); the process inside it switches uid before it runs
# Python. The uids come from a range systemd leaves unassigned (above the containers' 524288-1879048191), one per
# sandbox, from its scratch folder's random name.
SANDBOX_UID_BASE, SANDBOX_UID_SPAN = POLICY.uid_base, POLICY.uid_span
# bwrap's namespaces but the user one, which would map the sandbox's uids back to root; and the two capabilities the
# first process inside needs to switch to the sandbox's uid (setpriv drops them with root).
AS_ROOT = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
           "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]


def sandbox_uid(scratch: Path) -> int | None:
    """The uid a sandbox around `scratch` runs as: its own unprivileged one if the grader is root, else None."""
    if os.geteuid() != 0 or _drop_problem():
        return None
    digest = hashlib.sha256(Path(scratch).name.encode()).digest()
    return SANDBOX_UID_BASE + int.from_bytes(digest[:8], "big") % SANDBOX_UID_SPAN


def _setpriv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


@functools.cache
def _drop_problem() -> str:
    """'' if a process in bwrap can switch to an unprivileged uid here (root, setpriv), else why not."""
    if os.geteuid() != 0:
        return "the grader is not root"
    if shutil.which("setpriv") is None or shutil.which("bwrap") is None:
        return "setpriv or bwrap not found"
    try:
        result = subprocess.run(["bwrap", "--ro-bind", "/", "/", *AS_ROOT, "--", *_setpriv(SANDBOX_UID_BASE), "true"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return "" if result.returncode == 0 else (result.stderr.strip() or f"exit status {result.returncode}")[:200]


def _owner(pid: str) -> int | None:
    """The uid of process `pid`, or None if it has ended meanwhile (it then counts for nobody)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


def process_cap(scratch: Path) -> tuple[list[str], str]:
    """(command prefix, how the number of processes is capped): a pids cgroup, and RLIMIT_NPROC as a plain user."""
    group = _pids_cgroup(scratch)
    prefix, caps = [], []
    if group is not None:
        prefix = _join(group)
        caps.append(f"pids cgroup (pids.max {PROCESS_LIMIT})")
    uid = sandbox_uid(scratch)
    if uid is not None:  # set inside bwrap (bwrap_command): a fresh uid has no process yet, so the cap is the sandbox's
        caps.append(f"RLIMIT_NPROC {PROCESS_LIMIT} as uid {uid}, not root")
    elif os.geteuid() != 0:  # RLIMIT_NPROC counts every process of the user: room for theirs, and the limit
        running = sum(_owner(entry.name) == os.geteuid() for entry in os.scandir("/proc") if entry.name.isdigit())
        prefix += ["prlimit", f"--nproc={running + PROCESS_LIMIT}"]
        caps.append(f"RLIMIT_NPROC ({running} + {PROCESS_LIMIT})")
    if caps:
        return prefix, " and ".join(caps)
    return [], f"none: root without a writable pids cgroup, and no unprivileged uid ({_drop_problem()})"


def memory_cap(scratch: Path, memory_mb: int) -> tuple[list[str], str]:
    """(command prefix, how the sandbox's memory is capped): a memory cgroup for all its processes together, where
    one can be made; else RLIMIT_DATA per process only, which shared memory does not count."""
    group = cgroups.memory_cgroup(scratch, memory_mb)
    if group is None:
        return [], (f"none: {cgroups.problem('memory')}; a single process can take all of the machine's "
                    f"memory (shared memory is not counted by RLIMIT_DATA {memory_mb} MiB per process); its "
                    "oom_score_adj is 1000, so the kernel's OOM killer takes it before the grader")
    return _join(group), f"memory cgroup ({memory_mb} MiB for all its processes, no swap, inside the grader's own)"


def _join(group: Path) -> list[str]:
    """A command prefix that moves itself into `group`, then runs the rest (exec: the same process, counted)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]


def _open_parents(command: list[str]) -> list[str]:
    """chmod 755 the folders bwrap made for its mount points (it copies their modes: /root's 700 would lock out)."""
    bound = [Path(command[i + 2]) for i, word in enumerate(command) if word in ("--bind", "--ro-bind")]
    tmpfs = [Path(command[i + 1]) for i, word in enumerate(command) if word == "--tmpfs"]  # keep their 1777
    made = {parent for path in bound for parent in path.parents if parent != Path("/") and parent not in tmpfs
            and not any(parent == other or other in parent.parents for other in bound)}  # not the host's folders
    return [word for parent in sorted(made) for word in ("--chmod", "0755", str(parent))]


def _mounts(scratch: Path, read_only: list[Path]) -> list[str]:
    """bwrap and its mounts: the system and the Python read-only, the helpers and `read_only` too, `scratch` not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise FileNotFoundError(f"bwrap not found: {INSTALL_HINT}")
    # Mounts apply in order: /tmp first, so that a checkout, a venv or a scratch folder under /tmp is bound over it
    # instead of being hidden by it.
    size = ["--size", str(POLICY.tmpfs_mb << 20), "--perms", "1777"]  # /tmp for any uid, and only so much of it
    command = [bwrap, *size, "--tmpfs", POLICY.tmpfs[0], "--ro-bind", "/usr", "/usr"]
    for name in POLICY.etc:  # what the dynamic linker, fonts and certificates need; not /etc/shadow and the like
        if (Path("/etc") / name).exists():
            command += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for name in ("bin", "lib", "lib64", "sbin"):  # merged-/usr systems link these; others have them as folders
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]
    for path in [*_kernel_reads(), *read_only]:  # the grader's trusted process also gets tools/
        command += ["--ro-bind", str(path), str(path)]
    return command + ["--bind", str(scratch), str(scratch)]


def kernel_environment(scratch: Path) -> dict[str, str]:
    """The whole environment of a sandboxed process whose home is `scratch` (the policy's)."""
    return POLICY.environment(scratch)


def _closing(scratch: Path, namespaces: list[str], env: dict[str, str]) -> list[str]:
    """bwrap's last options: /dev, /proc, the namespaces, the read-only root, `scratch` as home, only `env`."""
    command = ["--dev", "/dev", "--size", str(POLICY.tmpfs_mb << 20), "--perms", "1777", "--tmpfs", POLICY.tmpfs[1],
               "--proc", "/proc", *namespaces,
               "--die-with-parent", "--new-session", "--remount-ro", "/", "--chdir", str(scratch), "--clearenv"]
    return command + [word for name, value in env.items() for word in ("--setenv", name, value)]


def bwrap_command(scratch: Path, memory_mb: int = MEMORY_LIMIT_MB, read_only: list[Path] = (),
                  group_mb: int | None = None) -> list[str]:
    """The caps, bwrap and prlimit prefix of a command run with `scratch` as its only writable directory: each
    process's memory capped at `memory_mb`, all of them together at `group_mb` (default: the same)."""
    size_folder(scratch)
    command = _mounts(scratch, read_only)
    uid = sandbox_uid(scratch)
    if uid is not None:
        command += _open_parents(command)
    command += _closing(scratch, ["--unshare-all"] if uid is None else AS_ROOT, kernel_environment(scratch))
    # RLIMIT_DATA caps heap and anonymous memory (what a tensor or a list takes), not the shared libraries mapped
    # from disk: torch keeps working, and an allocation past the cap raises MemoryError in the student's cell.
    limit = memory_mb * 1024 * 1024
    inside = ["prlimit", f"--data={limit}:{limit}", "--core=0", f"--fsize={POLICY.file_mb << 20}"]
    if uid is not None:  # its only writable folder is its own; what it reads must be world-readable
        os.chown(scratch, uid, uid)
        inside = [*_setpriv(uid), *inside, f"--nproc={PROCESS_LIMIT}:{PROCESS_LIMIT}"]
    # inherited: the OOM killer's first choice; what it writes, readable by its own uid only
    first = ["sh", "-c", 'echo 1000 > /proc/self/oom_score_adj && umask 077 && exec "$@"', "sh"]
    return first + process_cap(scratch)[0] + memory_cap(scratch, group_mb or memory_mb)[0] + command + ["--", *inside]


# The kernel zygote (zygote.py) makes each kernel's sandbox itself, from inside its own: it stays root, with
# CAP_SYS_ADMIN to mount, and keeps its code and the pids cgroups in reach; each kernel loses all three before it runs
# a cell. No student code ever runs in the zygote.
def zygote_command(folder: Path, modules: list[str]) -> list[str]:
    """The kernel zygote importing `modules`, in bwrap: its socket and its kernels' folders in `folder`."""
    command = _mounts(folder, [ROOT / "tools"])
    if sandbox_uid(folder) is None:
        raise OSError(f"a kernel zygote needs a root grader that can switch uids ({_drop_problem()})")
    # the grader's own pids and memory groups (one or two hierarchies), where the sandboxes' groups are made
    bound = sorted({str(parent) for parent in (cgroups.parent("pids"), cgroups.parent("memory")) if parent})
    for parent in bound:
        command += ["--bind", parent, parent]
    command += _open_parents(command)  # for the kernels' uids
    env = {**kernel_environment(folder), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}  # as ipykernel
    command += _closing(folder, [*AS_ROOT, "--cap-add", "CAP_SYS_ADMIN"], env)
    config = {"socket": str(folder / "zygote.sock"), "kernels": str(folder / "kernels"),
              "cgroups": bound, "kept": [str(path) for path in _kernel_reads()], "tmpfs": list(POLICY.tmpfs)}
    return command + ["--", "prlimit", "--core=0", sys.executable, "-m", "tools.classroom.policy.zygote", "serve",
                      json.dumps(config), *modules]


# What the grading kernel imports before any cell runs: ipykernel, and the book's helpers (torch with them).
SELF_CHECK = "import ipykernel.kernelapp, helpers.checkpoint"


def bwrap_problem() -> str | None:
    """None if grading can run here, else one line saying why not: the real interpreter, with the real mounts."""
    if shutil.which("bwrap") is None:
        return f"bwrap not found: {INSTALL_HINT}"
    scratch = private_folder("grading-check-")  # where execute.py puts a kernel's scratch folder
    try:
        result = subprocess.run([*bwrap_command(scratch), sys.executable, "-c", SELF_CHECK],
                                capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the grading sandbox could not run {sys.executable}: {error}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        release(scratch)
    if result.returncode:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1][:300]
        if "ermission denied" in last and sandbox_uid(scratch) is not None:
            last += (" (the sandbox runs as an unprivileged uid: the Python environment, the book's helpers/ and the "
                     "checkpoint must be readable by every user)")
        return f"the grading sandbox cannot run `{sys.executable} -c {SELF_CHECK!r}` (ROOT {ROOT}): {last}"
    return None


def kernel_manager_class(scratch: Path, memory_mb: int = MEMORY_LIMIT_MB, zygote: str = "") -> type[AsyncKernelManager]:
    """A kernel manager whose kernel runs in a sandbox around `scratch`, reached over Unix sockets there: a fresh
    one, or one forked by the kernel zygote listening at `zygote` (scratch then lies in the zygote's folder).

    The grader's sockets (its client's, and its own control socket) reach the kernel through a gate (gate.py),
    listed in the class's `gates`: the caller closes them and reads how many messages each dropped."""
    uid = sandbox_uid(scratch)
    zygote = zygote if uid is not None else ""  # a zygote's kernel runs as its sandbox's own uid, or not at all
    if zygote:
        groups = [group for group in (_pids_cgroup(scratch), cgroups.memory_cgroup(scratch, memory_mb)) if group]
        os.chown(scratch, uid, uid, follow_symlinks=False)  # a link swapped in is not followed
        policy = SandboxPolicy(memory_mb=memory_mb).limits()  # what the zygote's fork enforces, as prlimit does
        request = {"scratch": str(scratch), "connection_file": str(scratch / "kernel.json"), "uid": uid,
                   "policy": policy, "env": kernel_environment(scratch),
                   "cgroups": [str(group / "cgroup.procs") for group in groups]}
        command = [sys.executable, "-m", "tools.classroom.policy.zygote", "connect", zygote, json.dumps(request)]
    else:
        prefix = bwrap_command(scratch, memory_mb)

    class SandboxedKernelManager(AsyncKernelManager):
        """ipykernel inside bwrap; interrupts go as messages (a signal would reach bwrap, not the kernel)."""

        gates: list[Gate] = []

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.context.setsockopt(zmq.RCVHWM, POLICY.queued)  # its own control socket's queue
            self.transport = "ipc"  # the kernel has no network, not even loopback: sockets are files in scratch
            self.ip = str(scratch / "kernel")
            self.connection_file = str(scratch / "kernel.json")

        def client(self, **kwargs):
            """Its client, each socket queueing at most `POLICY.queued` messages (of at most `POLICY.message` bytes,
            the gate's cap) before the kernel must wait: what the grader holds of a kernel's output is bounded."""
            client = super().client(**kwargs)
            client.context.setsockopt(zmq.RCVHWM, POLICY.queued)  # before its sockets are made
            return client

        @property
        def kernel_spec(self):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python 3 (sandboxed)", language="python", interrupt_mode="message")

        def write_connection_file(self, **kwargs):
            """jupyter_client writes the file by its path (unlink, then open without O_EXCL or O_NOFOLLOW): here it
            writes into a folder of the grader's own, and the bytes go into the scratch folder through a descriptor
            (handles.write_private), 0600 and the kernel's uid's."""
            private = tempfile.mkdtemp(prefix="grading-connection-")  # 0700, a random name: nobody else's
            try:
                self.ip = str(scratch / "kernel")  # where the kernel binds; the grader connects through the gate
                self.connection_file = os.path.join(private, "kernel.json")
                super().write_connection_file(**kwargs)
                data = Path(self.connection_file).read_bytes()
            finally:
                self.connection_file = str(scratch / "kernel.json")
                shutil.rmtree(private, ignore_errors=True)
            handles.write_private(scratch, "kernel.json", data, sandbox_uid(scratch))
            ports = [self.shell_port, self.iopub_port, self.stdin_port, self.hb_port, self.control_port]
            self.gates.append(Gate(self.ip, ports, POLICY.message))

        async def start_kernel(self, **kwargs):
            kwargs.setdefault("stdout", subprocess.DEVNULL)  # ipykernel's banner; the notebook gets the output
            kwargs.setdefault("stderr", subprocess.DEVNULL)
            if zygote:  # the caller runs here, outside any sandbox: it needs the tools package, not the notebook
                kwargs["cwd"] = str(ROOT)
            started = await super().start_kernel(**kwargs)  # AsyncKernelManager's: a coroutine
            # launched (the kernel was told its own sockets): from here on this manager's sockets (its control
            # socket) and its clients' connect to the gate in front of them
            self.ip = self.gates[-1].ip
            return started

        def format_kernel_cmd(self, extra_arguments=None):
            return command if zygote else prefix + super().format_kernel_cmd(extra_arguments)

    return SandboxedKernelManager
