"""The folders and sockets the grader talks to, checked before use: who owns them, who else may write, who listens.

A path in the world-listable /tmp proves nothing: another local user may have made it first. Each folder is checked
with lstat (a folder, not a link; owned by the uid that made it; writable by nobody else), then each socket in it
(a socket, owned by that uid), and after connecting, the peer's uid (SO_PEERCRED). In a folder that only its owner may
write, nobody else can swap an entry between the check and its use.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from pathlib import Path


class Refused(OSError):
    """A folder or socket that is not the one the grader made: why, in words."""


def check_folder(path: Path | str, owner: int, private: bool = False) -> None:
    """Raise Refused unless `path` is a folder (not a link), owned by `owner`, that nobody else may write into (nor
    enter, if `private`); OSError if there is nothing there: a server that ended."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(f"{path} is not a folder (a link or a file)")
    if info.st_uid != owner:
        raise Refused(f"{path} belongs to uid {info.st_uid}, not to uid {owner}, which made it")
    if info.st_mode & (0o077 if private else 0o022):
        raise Refused(f"{path} has mode {stat.S_IMODE(info.st_mode):o}: others may "
                      f"{'enter' if private else 'write into'} it")


def check_ancestors(path: Path | str) -> None:
    """Raise Refused unless every folder above `path` is root's or the grader's and, where others may write into it,
    sticky (as /tmp is), and no link on the way is another user's: nobody else can swap a name on the way."""
    for above in Path(path).parents:
        info = os.lstat(above)
        if info.st_uid not in {0, os.geteuid()}:
            raise Refused(f"{above}, on the way to {path}, belongs to uid {info.st_uid}")
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
            raise Refused(f"{above}, on the way to {path}, has mode {stat.S_IMODE(info.st_mode):o}: others may "
                          "swap what lies in it")


def check_socket(path: Path | str, owner: int) -> None:
    """Raise Refused unless `path` lies in a folder checked as above and is a socket owned by `owner`."""
    check_folder(Path(path).parent, owner)
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != owner:
        raise Refused(f"{path} is not a socket of uid {owner} (uid {info.st_uid}, mode {info.st_mode:o})")


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket, as the kernel reports it."""
    _, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return uid


def connect(path: Path | str, owner: int, timeout: float | None = None) -> socket.socket:
    """A connection to the socket at `path` once the folder, the socket and the listening process are `owner`'s."""
    check_socket(path, owner)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.settimeout(timeout)
        connection.connect(str(path))
        connection.settimeout(None)
        uid = peer_uid(connection)
        if uid != owner:
            raise Refused(f"the process listening at {path} runs as uid {uid}, not {owner}")
    except BaseException:
        connection.close()
        raise
    return connection


def make_folder(parent: Path | str, owner: int, prefix: str) -> Path:
    """A fresh 0755 folder in `parent`, made through descriptors: `parent` and the folder above it are opened without
    following links and checked (owned by `owner`, writable by nobody else) before the new one is made in them, so a
    name swapped for a link meanwhile can redirect neither the mkdir nor the chmod."""
    parent = Path(parent)
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
    above = os.open(parent.parent, flags)
    try:
        folder = os.open(parent.name, flags, dir_fd=above)
    except OSError as error:
        os.close(above)
        raise Refused(f"{parent} is not a folder (a link or a file): {error.strerror}") from error
    try:
        for fd, path in ((above, parent.parent), (folder, parent)):
            info = os.fstat(fd)
            if info.st_uid != owner or info.st_mode & 0o022:
                raise Refused(f"{path} belongs to uid {info.st_uid} (mode {stat.S_IMODE(info.st_mode):o}), "
                              f"not to uid {owner} alone")
        name = prefix + os.urandom(6).hex()
        os.mkdir(name, 0o700, dir_fd=folder)
        made = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
        os.fchmod(made, 0o755)
        os.close(made)
    finally:
        os.close(above)
        os.close(folder)
    return parent / name


def write_private(folder: Path | str, name: str, data: bytes, uid: int | None) -> None:
    """Write `name` in `folder` (the grader's or `uid`'s, writable by nobody else) through a descriptor of it: made
    afresh (O_EXCL), never through a link, 0600 and handed to `uid` by its descriptor; whatever was there is gone."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if info.st_uid not in {os.geteuid(), uid} or info.st_mode & 0o022:
            raise Refused(f"{folder} belongs to uid {info.st_uid} (mode {stat.S_IMODE(info.st_mode):o}), not to the "
                          "grader or its sandbox alone")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)  # a link is removed, never followed
        file = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file, "wb") as out:
        if uid is not None:
            os.fchown(out.fileno(), uid, uid)
        out.write(data)
