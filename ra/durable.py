"""Whole files put on disk durably: the one sequence Ra's storage files share.

Why: a segment, the names and config files, a server's metadata row and a snapshot
must each be either whole on disk or absent after a crash. Each is written under a
temporary name, fsynced, renamed over its final name, and the rename made durable by
fsyncing the directory. Keeping those steps here means a short write or a missed
directory fsync can only be got wrong (or right) once.

The file's own sync is the caller's function (a node's is `os.fsync` with its calls
counted, whatever the WAL's sync method); the directory's is always `os.fsync`.

Every file of the log stack is readable by its owner only (0600) and every directory
it makes is 0700, whatever the process's umask: the logs and snapshots hold what the
machines hold (the metadata store's users among it). `open_private` and `make_dirs`
are how the WAL, the segment writer and the snapshot store create theirs;
`restrict_tree` tightens what an older warren left at 0644 / 0755.
"""

from __future__ import annotations

import os
from collections.abc import Callable

Fsync = Callable[[int], None]

FILE_MODE = 0o600
DIR_MODE = 0o700


def open_private(path: str, flags: int) -> int:
    """`os.open` with `flags` (``O_CREAT`` among them) for a file only its owner may
    read or write: 0600 even when the file was already there with another mode."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_dirs(path: str) -> None:
    """`os.makedirs(path, exist_ok=True)`, each directory it creates 0700.

    `os.makedirs` gives its mode to the last directory only and lets the umask
    change it; here every missing one gets exactly 0700. Directories that exist
    are left as they are."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
        os.chmod(directory, DIR_MODE)


def restrict_tree(root: str) -> None:
    """Make `root` and everything under it owner-only (directories 0700, files 0600):
    the storage an older warren wrote with the umask's modes."""
    if not os.path.isdir(root):
        return
    for directory, _subdirs, files in os.walk(root):  # symbolic links are not followed
        os.chmod(directory, DIR_MODE)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, FILE_MODE)


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
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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
