"""The lock of an output: one command at a time writes a folder or a file.

The lock is a sibling file ``.<name>.lock`` holding ``pid <pid> on <host> since <time>``, held
with ``flock``: the kernel releases it when its process dies, however it dies, so a lock left
by a dead process is simply taken over by the next command. A second command while the first
runs gets :class:`FolderInUse` (exit code 2) naming the holder.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from simkv.errors import InputError
from simkv.outputs.files import cannot


class FolderInUse(InputError):
    """Another command holds the lock of this output."""


def lock_path(target: Path) -> Path:
    """The lock file of an output file or folder: ``.<name>.lock`` beside it."""
    return target.parent / f".{target.name}.lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another simkv command"


@contextmanager
def locked(target: Path, shown: Path | None = None) -> Iterator[None]:
    """Hold the lock of ``target`` (an output file or folder) for the block; :class:`FolderInUse`
    naming ``shown`` (default ``target``) when another process holds it."""
    path = lock_path(target)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise cannot("create the lock file", path, err) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderInUse(
                f"in use by {holder}: wait for it to finish (the lock is {path})",
                file=shown or target,
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:  # the last holder removed it between our open and flock
            same = False
        if same:
            break
        os.close(fd)
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since}\n".encode(), 0)
    try:
        yield
    finally:
        with suppress(OSError):
            path.unlink()
        os.close(fd)
