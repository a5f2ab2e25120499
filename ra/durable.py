"""Whole files put on disk durably: the one sequence Ra's storage files share.

Why: a segment, the names and config files, a server's metadata row and a snapshot
must each be either whole on disk or absent after a crash. Each is written under a
temporary name, fsynced, renamed over its final name, and the rename made durable by
fsyncing the directory. Keeping those steps here means a short write or a missed
directory fsync can only be got wrong (or right) once.

The file's own sync is the caller's function (a node's is `os.fsync` with its calls
counted, whatever the WAL's sync method); the directory's is always `os.fsync`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

Fsync = Callable[[int], None]


def fsync_dir(directory: str) -> None:
    """Make the entries of `directory` (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str, data: bytes, fsync: Fsync | None) -> None:
    """Create or truncate `path` and write every byte of `data`; then `fsync` it, if given.

    `os.write` may write fewer bytes than asked, so it is called until none are left.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync is not None:
            fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: str, data: bytes, fsync: Fsync) -> None:
    """`path` holds `data` after this returns, durably, and never a part of it.

    Written to ``path + ".tmp"`` first, then renamed over `path`.
    """
    tmp = path + ".tmp"
    write_file(tmp, data, fsync)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")
