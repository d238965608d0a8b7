"""A grading run's private folder and the kernel zygote in it (zygote.py), shared by a process's trusted servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tools.classroom.policy import handles, runs, sandbox
from tools.classroom.protocol import frames

SETUP_LIMIT = 300  # seconds for the server's one run of the setup (and for the zygote's imports)
ZYGOTE = "zygote"  # the kernel zygote's folder in a run's folder: its socket, its kernels' folders
ZYGOTE_KERNELS = 4  # the zygote's kernels' folders share a tmpfs of this many sandboxes' scratch_mb


class Run:
    """A run's folder and the kernel zygote in it, importing `modules`: one server's own, or a process's shared one."""

    def __init__(self, modules: list[str]):
        # One private folder (mkdtemp: a random name, made 0700 for this uid alone) holds the servers' folders and
        # the zygote's: nobody else can make, swap or name anything inside it.
        self.folder = runs.make()
        made = os.lstat(self.folder)
        self.identity = (made.st_dev, made.st_ino)
        self.zygote = KernelZygote(self.folder / ZYGOTE, modules)  # it imports while a server runs its setup
        self.checked = False

    def intact(self) -> bool:
        """Whether its folder is still the one made: the grader's, 0700, not a link, the same inode. In sticky /tmp
        only the grader can then rename it; once gone, anyone may take its name (its paths are then never used)."""
        try:
            handles.check_folder(self.folder, os.geteuid(), private=True)
            return (os.lstat(self.folder).st_dev, os.lstat(self.folder).st_ino) == self.identity
        except OSError:
            return False

    def check_zygote(self) -> None:
        """Once: unless the zygote imported everything, listens, and has one thread, close it (a fresh kernel each)."""
        if not self.checked:
            self.checked = True
            if self.zygote.process is None or not self.zygote.wait():
                self.zygote.close(paths=self.intact())

    def close(self) -> None:
        """End the zygote; its folder and the run's are removed only while the run's folder is intact."""
        intact = self.intact()
        self.zygote.close(paths=intact)
        if intact:
            shutil.rmtree(self.folder, ignore_errors=True)


class KernelZygote:
    """The student kernels' zygote (zygote.py) beside trusted servers, where the grader is root; else none."""

    def __init__(self, folder: Path, modules: list[str]):
        self.folder, self.process = folder, None
        try:
            self.folder.mkdir(mode=0o700)  # in the run's private folder: made here, by the grader, and handed over
        except OSError:
            self.folder = None
            return
        (self.folder / "kernels").mkdir(mode=0o755)
        # One tmpfs for all its kernels' folders (a mount made later would not reach the zygote's namespace): the
        # host's disk is never written; each kernel's share is charged to its memory cgroup, each file to file_mb.
        sandbox.size_folder(self.folder / "kernels", ZYGOTE_KERNELS * sandbox.POLICY.scratch_mb, "0755")
        try:
            command = sandbox.zygote_command(self.folder, modules)
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL)
        except OSError:
            self.process = None

    def wait(self) -> bool:
        """Whether it imported everything, listens, and has one thread (a fork beside another could deadlock)."""
        try:
            ready = frames.receive(self.process.stdout.fileno(), time.monotonic() + SETUP_LIMIT)
        except (frames.FrameError, OSError, AttributeError):
            return False
        return ready.get("op") == "ready" and ready.get("threads") == 1

    def close(self, paths: bool = True) -> None:
        """End the zygote process; remove its folder only if `paths` (its run's folder is intact)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process.stdout.close()
            self.process = None
        if self.folder is not None and paths:
            sandbox.release(self.folder / "kernels")
            shutil.rmtree(self.folder, ignore_errors=True)
