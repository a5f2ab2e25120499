"""Snapshot and checkpoint files of one server (``ra_log_snapshot``).

Layout: ``<server dir>/snapshots/<TERM16HEX>_<INDEX16HEX>/snapshot.dat`` and
the same under ``checkpoints/`` and ``recovery_checkpoint/`` (the one state a
server writes as it stops in order, so that its next start need not replay the
log up to it). The file is Ra's default format with pickle
in place of ``term_to_binary``:

    b"RASN" | u8 version 1 | u32 crc32(rest) | u32 meta length | meta | state

A write goes to a temporary directory that is renamed into place, so a crash
leaves either the whole snapshot or a ``.tmp`` directory that the next
recovery deletes; a write that fails (the process lives on) deletes its
``.tmp`` directory at once. Snapshots are fsynced before the rename; checkpoints are
not (Ra writes them without fsync and fsyncs only on promotion). Invalid
snapshot directories are deleted at recovery and the next older one is used.

A snapshot whose machine keeps *live indexes* (log entries below the snapshot
it still needs) has them in a second file, ``live_indexes`` (a pickled
ascending list), written inside the same temporary directory, so the two
appear together; recovery reads them back to know which entries below the
snapshot the log must keep.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import struct
import zlib
from collections.abc import Callable
from typing import Any

from ra import crash_points, stored_terms
from ra.durable import fsync_dir, make_dirs, write_file

log = logging.getLogger("warren.ra.snapshot")

MAGIC = b"RASN"
VERSION = 1
FILE = "snapshot.dat"
LIVE_FILE = "live_indexes"
SNAPSHOTS = "snapshots"
CHECKPOINTS = "checkpoints"
RECOVERY_CHECKPOINT = "recovery_checkpoint"
_HEAD = struct.Struct(">4sBII")

Snapshot = tuple[dict[str, Any], Any]


class SnapshotCorrupt(ValueError):
    """A snapshot file is short, has a bad header or fails its checksum."""


#: what reading a damaged snapshot file can raise
READ_ERRORS = (OSError, SnapshotCorrupt, pickle.UnpicklingError, EOFError, struct.error)


def dir_name(idx: int, term: int) -> str:
    return f"{term:016X}_{idx:016X}"


def parse_dir_name(name: str) -> tuple[int, int] | None:
    """``(index, term)`` of a snapshot directory name, or None."""
    term_s, sep, idx_s = name.partition("_")
    if sep and len(term_s) == 16 and len(idx_s) == 16:
        try:
            return int(idx_s, 16), int(term_s, 16)
        except ValueError:
            return None
    return None


def encode(meta: dict[str, Any], state: Any) -> bytes:
    meta_b = pickle.dumps(meta, protocol=5)
    rest = struct.pack(">I", len(meta_b)) + meta_b + pickle.dumps(state, protocol=5)
    return MAGIC + bytes([VERSION]) + struct.pack(">I", zlib.crc32(rest)) + rest


def decode(data: bytes) -> Snapshot:
    if len(data) < _HEAD.size or data[:4] != MAGIC or data[4] != VERSION:
        raise SnapshotCorrupt("bad snapshot header")
    (crc,) = struct.unpack_from(">I", data, 5)
    rest = data[9:]
    if zlib.crc32(rest) != crc:
        raise SnapshotCorrupt("snapshot checksum failure")
    (meta_len,) = struct.unpack_from(">I", rest, 0)
    meta = stored_terms.loads(rest[4: 4 + meta_len])
    return meta, stored_terms.loads(rest[4 + meta_len:])


def write(base: str, kind_dir: str, meta: dict[str, Any], state: Any, *, sync: bool,
          fsync: Callable[[int], None] = os.fsync, live: list[int] | None = None) -> str:
    """Write a snapshot (or checkpoint) under ``base/kind_dir``, with its live
    indexes when there are any; returns its directory."""
    parent = os.path.join(base, kind_dir)
    make_dirs(parent)
    final = os.path.join(parent, dir_name(int(meta["index"]), int(meta["term"])))
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    make_dirs(tmp)
    try:
        write_file(os.path.join(tmp, FILE), encode(meta, state), fsync if sync else None)
        if live:
            write_file(os.path.join(tmp, LIVE_FILE), pickle.dumps(list(live), protocol=5),
                       fsync if sync else None)
    except BaseException:
        # as Ra deletes a pending snapshot's directory when its write fails
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if crash_points.ARMED:
        crash_points.reached("snapshot_before_rename")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if sync:
        fsync_dir(parent)
    if crash_points.ARMED:
        crash_points.reached("snapshot_after_rename")
    return final


def promote(base: str, idx: int, term: int, *,
            fsync: Callable[[int], None] = os.fsync) -> str:
    """Turn checkpoint ``(idx, term)`` into a snapshot: fsync it, move it into ``snapshots/``."""
    name = dir_name(idx, term)
    src = os.path.join(base, CHECKPOINTS, name)
    for file in (FILE, LIVE_FILE):
        try:
            fd = os.open(os.path.join(src, file), os.O_RDONLY)
        except FileNotFoundError:
            if file == FILE:
                raise
            continue
        try:
            fsync(fd)
        finally:
            os.close(fd)
    parent = os.path.join(base, SNAPSHOTS)
    make_dirs(parent)
    dst = os.path.join(parent, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(src, dst)
    fsync_dir(parent)
    return dst


def read_live(path: str) -> list[int]:
    """The live indexes kept with the snapshot in directory `path` ([]: none)."""
    try:
        with open(os.path.join(path, LIVE_FILE), "rb") as f:
            return [int(i) for i in pickle.loads(f.read())]
    except FileNotFoundError:
        return []


def live_of(base: str, kind_dir: str, idx: int, term: int) -> list[int]:
    """The live indexes of snapshot (or checkpoint) ``(idx, term)`` under ``base/kind_dir``."""
    return read_live(os.path.join(base, kind_dir, dir_name(idx, term)))


def read(path: str) -> Snapshot:
    with open(os.path.join(path, FILE), "rb") as f:
        return decode(f.read())


def recover(base: str, kind_dir: str) -> list[tuple[str, Snapshot]]:
    """Every valid snapshot of one kind, oldest first; invalid ones are deleted."""
    parent = os.path.join(base, kind_dir)
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return []
    found: list[tuple[int, str, Snapshot]] = []
    for name in names:
        path = os.path.join(parent, name)
        parsed = parse_dir_name(name)
        if parsed is None:
            log.warning("deleting stray snapshot directory %s", path)
            shutil.rmtree(path, ignore_errors=True)
            continue
        try:
            snap = read(path)
        except READ_ERRORS as exc:
            log.warning("deleting invalid snapshot %s: %s", path, exc)
            shutil.rmtree(path, ignore_errors=True)
            continue
        found.append((parsed[0], path, snap))
    found.sort(key=lambda t: t[0])
    return [(path, snap) for _, path, snap in found]


def recover_newest(base: str, kind_dir: str) -> tuple[int, int] | None:
    """``(index, term)`` of the newest valid snapshot of one kind; older ones and
    invalid ones are deleted (``ra_snapshot:find_recovery_checkpoint``)."""
    found = recover(base, kind_dir)
    for path, _ in found[:-1]:
        shutil.rmtree(path, ignore_errors=True)
    if not found:
        return None
    meta = found[-1][1][0]
    return int(meta["index"]), int(meta["term"])


def delete(base: str, kind_dir: str, idx: int, term: int) -> None:
    shutil.rmtree(os.path.join(base, kind_dir, dir_name(idx, term)), ignore_errors=True)
