"""`DiskLog`: the `MemoryLog` interface backed by a server directory on disk.

The pure server core cannot tell the two apart: it appends and writes, the
driver hands `take_wal_writes()` to the node's WAL (`ra.wal.append`), and
``written`` / ``resend_write`` / ``snapshot_written`` / ``segments`` events
come back through `handle_event`. `last_written` moves only on ``written``
(and on a snapshot), never on a mere append.

Where entries live:
* ``_mem``: every entry this server wrote that it does not yet know to be in a
  segment (appended, in flight, or in a WAL file); a ``segments`` event drops
  exactly the ``(index, term)`` pairs it reports, since the same index and term
  is the same entry (Raft's log matching).
* segments: an ordered list of intervals over immutable segment files; a newer
  segment cuts off whatever older ones hold at or above its first index, as
  the overwrite that produced it cut the log. Reads try ``_mem`` first.
* snapshots and checkpoints: ``snapshots/`` and ``checkpoints/`` (as ``ra_snapshot`` lays them out),
  written by `run_bg_work` off the hub; the values stay in memory too, as the
  leader streams the snapshot and recovery starts from it.
* ``meta``: `ra.log_meta.LogMeta` (``current_term``, ``voted_for``,
  ``last_applied``).

`DiskLog.open(dir, uid, log_ets)` recovers a server after a restart: the newest
valid snapshot, newer checkpoints, the segments in file order, then the WAL's
memtable views for the uid in file order (taken before the segments are
listed, so a flush finishing meanwhile cannot hide entries); everything
recovered is durable, so ``last_written`` is the recovered last index.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent

import actors
from actors import NotAProcess
from ra import crash_points, snapshot_store
from ra import segment as ra_segment
from ra import seq as ra_seq
from ra.durable import make_dirs
from ra.log import (
    DEFAULT_MAX_CHECKPOINTS,
    DEFAULT_MIN_CHECKPOINT_INTERVAL,
    DEFAULT_MIN_SNAPSHOT_INTERVAL,
    CorruptLog,
)
from ra.log_base import SNAPSHOT, LogBase, Snapshot
from ra.log_base import idxterm as _idxterm
from ra.log_ets import LogEts
from ra.log_meta import LogMeta
from ra.packed import own_batch
from ra.types import DUMMY_ENTRY, Entry, IdxTerm

log = logging.getLogger("warren.ra.disk_log")

Fsync = Callable[[int], None]


def _kind_dir(kind: str) -> str:
    return snapshot_store.SNAPSHOTS if kind == SNAPSHOT else snapshot_store.CHECKPOINTS



class DiskLog(LogBase):
    """One server's log in ``directory`` (``<data_dir>/<uid>``)."""

    def __init__(
        self,
        directory: str,
        uid: str,
        *,
        log_ets: LogEts | None = None,
        min_snapshot_interval: int = DEFAULT_MIN_SNAPSHOT_INTERVAL,
        min_checkpoint_interval: int = DEFAULT_MIN_CHECKPOINT_INTERVAL,
        max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS,
        fsync: Fsync = os.fsync,
        owner: Any = None,
    ) -> None:
        self.dir = directory
        self.uid = uid
        self.log_ets = log_ets
        self.min_snapshot_interval = min_snapshot_interval
        self.min_checkpoint_interval = min_checkpoint_interval
        self.max_checkpoints = max_checkpoints
        self._fsync = fsync
        make_dirs(directory)
        self.meta = LogMeta(directory, fsync)
        self._reader = ra_segment.SegmentReader()
        #: effective segment intervals ``(lo, hi, file name)``, sorted, disjoint
        self._segs: list[tuple[int, int, str]] = []
        self._seg_starts: list[int] = []
        #: every segment file this log knows: name -> (first, last)
        self._seg_files: dict[str, tuple[int, int]] = {}
        self._mem: dict[int, Entry] = {}
        self._first = 0
        self._last = 0
        self._snapshot: Snapshot | None = None
        self._checkpoints: list[Snapshot] = []
        self._pending_snapshot: tuple[str, Snapshot] | None = None
        self._last_written: IdxTerm = (0, 0)
        self._pending: ra_seq.Seq = []
        self._wal_out: list[list[Entry]] = []
        self.wal_up = True
        if log_ets is not None:
            # segment events for files flushed from now on must reach this log,
            # even before its first write tells the WAL who owns the uid
            if owner is None:
                try:
                    owner = actors.self()
                except NotAProcess:
                    owner = None
            if owner is not None:
                log_ets.register(uid, owner)
        self._recover()

    @classmethod
    def open(cls, directory: str, uid: str, log_ets: LogEts | None = None,
             **opts: Any) -> DiskLog:
        """Recover (or create) the log of `uid` in `directory`.

        With `log_ets`, the owner (default: the calling process) is registered
        as the uid's process, so the segment writer's ``segments`` events reach
        it.
        """
        return cls(directory, uid, log_ets=log_ets, **opts)

    # ---- recovery (``ra_log:init/1``) -------------------------------------

    def _recover(self) -> None:
        # the memtable first: a flush that finishes while we list segments
        # then shows up twice (harmless) rather than not at all
        views = self.log_ets.mem_table(self.uid).copy_views() if self.log_ets else []
        snaps = snapshot_store.recover(self.dir, snapshot_store.SNAPSHOTS)
        for _, old in snaps[:-1]:
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *_idxterm(old))
        self._snapshot = snaps[-1][1] if snaps else None
        snap_idx = _idxterm(self._snapshot)[0] if self._snapshot else -1
        # every valid checkpoint newer than the snapshot is kept (thinning happens
        # as new ones are written); older ones can never be used again
        ckpts = [s for _, s in snapshot_store.recover(self.dir, snapshot_store.CHECKPOINTS)]
        for c in ckpts:
            if _idxterm(c)[0] <= snap_idx:
                snapshot_store.delete(self.dir, snapshot_store.CHECKPOINTS, *_idxterm(c))
        self._checkpoints = [c for c in ckpts if _idxterm(c)[0] > snap_idx]
        self._recovery_checkpoint = snapshot_store.recover_newest(
            self.dir, snapshot_store.RECOVERY_CHECKPOINT)
        for name in ra_segment.list_segments(self.dir):
            idx = self._reader.index(os.path.join(self.dir, name))
            self._seg_files[name] = (idx.first, idx.last)
            self._seg_add(name, idx.first, idx.last)
        # a segment wholly superseded by a newer segment will never be read again
        self._drop_segments_upto(snap_idx)
        for view in views:
            entries = [e for e in view if e[0] > snap_idx]
            if entries:
                self._overlay(entries)
        # but one superseded only by a view may be that view's own flush, just
        # renamed into place with its ``segments`` event still on the way: keep it
        live = {seg[2] for seg in self._segs}
        for name in [n for n in self._seg_files if n not in live]:
            del self._seg_files[name]
        if self._snapshot is None:
            self._first = 0
            self._mem[0] = DUMMY_ENTRY
        else:
            self._first = snap_idx + 1
            if self.log_ets is not None:
                self.log_ets.set_snapshot_index(self.uid, snap_idx)
        start = max(self._first, 1)
        i = start
        while True:
            if i in self._mem:
                i += 1
                continue
            seg = self._seg_at(i)
            if seg is None:
                break
            i = seg[1] + 1
        last = i - 1
        beyond = [k for k in self._mem if k > last]
        beyond_seg = bool(self._segs) and self._segs[-1][1] > last
        if last < start and (beyond or beyond_seg):
            raise CorruptLog(f"{self.uid}: log does not start at {start}")
        if beyond or beyond_seg:
            log.warning("%s: sparse log tail after %d dropped", self.uid, last)
            for k in beyond:
                del self._mem[k]
        self._last = max(last, self._first - 1, 0)
        lw = self._last
        self._last_written = (lw, self._term_or_snapshot(lw))

    def _overlay(self, entries: list[Entry]) -> None:
        """Replay one WAL view: it cuts the log at its first index, then adds."""
        first = entries[0][0]
        self._seg_cut(first)
        for k in [k for k in self._mem if k >= first]:
            del self._mem[k]
        for e in entries:
            self._mem[e[0]] = e

    # ---- segment intervals -------------------------------------------------

    def _seg_cut(self, lo: int) -> None:
        kept: list[tuple[int, int, str]] = []
        for a, b, name in self._segs:
            if a >= lo:
                continue
            kept.append((a, min(b, lo - 1), name))
        self._segs = kept
        self._seg_starts = [s[0] for s in kept]

    def _seg_add(self, name: str, lo: int, hi: int) -> None:
        self._seg_cut(lo)
        self._segs.append((lo, hi, name))
        self._seg_starts.append(lo)

    def _seg_at(self, idx: int) -> tuple[int, int, str] | None:
        i = bisect.bisect_right(self._seg_starts, idx) - 1
        if i >= 0:
            seg = self._segs[i]
            if seg[0] <= idx <= seg[1]:
                return seg
        return None

    def _drop_segments_upto(self, idx: int) -> int:
        """Forget intervals wholly at or below `idx`, then delete unreferenced files;
        returns how many files went."""
        self._segs = [s for s in self._segs if s[1] > idx]
        self._seg_starts = [s[0] for s in self._segs]
        return self._gc_segments()

    def _gc_segments(self) -> int:
        live = {s[2] for s in self._segs}
        gone = [n for n in self._seg_files if n not in live]
        for name in gone:
            del self._seg_files[name]
            path = os.path.join(self.dir, name)
            self._reader.forget(path)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return len(gone)

    def segment_refs(self) -> list[ra_segment.SegRef]:
        """The segment files this log reads from, oldest first."""
        return sorted((n, r) for n, r in self._seg_files.items())

    # ---- queries ----------------------------------------------------------

    def next_index(self) -> int:
        return self._last + 1

    def first_index(self) -> int:
        return self._first

    def last_index_term(self) -> IdxTerm:
        if self._last >= self._first:
            term = self.fetch_term(self._last)
            assert term is not None
            return (self._last, term)
        snap = self.snapshot_index_term()
        assert snap is not None, "empty log without a snapshot"
        return snap

    def is_new(self) -> bool:
        return self._snapshot is None and self._first == 0 and self._last == 0

    def fetch(self, idx: int) -> Entry | None:
        if idx < self._first or idx > self._last:
            return None
        entry = self._mem.get(idx)
        if entry is not None:
            return entry
        seg = self._seg_at(idx)
        if seg is None:
            raise CorruptLog(f"{self.uid}: index {idx} is in range but held nowhere")
        return self._reader.read(os.path.join(self.dir, seg[2]), idx, idx)[0]

    def fetch_term(self, idx: int) -> int | None:
        if idx < self._first or idx > self._last:
            return None
        entry = self._mem.get(idx)
        if entry is not None:
            return entry[1]
        seg = self._seg_at(idx)
        if seg is None:
            raise CorruptLog(f"{self.uid}: index {idx} is in range but held nowhere")
        return self._reader.term(os.path.join(self.dir, seg[2]), idx)

    def fold(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive (clipped to what the log holds)."""
        i, hi = max(first, self._first), min(last, self._last)
        out: list[Entry] = []
        mem = self._mem
        while i <= hi:
            entry = mem.get(i)
            if entry is not None:
                out.append(entry)
                i += 1
                continue
            seg = self._seg_at(i)
            if seg is None:
                raise CorruptLog(f"{self.uid}: index {i} is in range but held nowhere")
            j = i
            end = min(seg[1], hi)
            while j + 1 <= end and (j + 1) not in mem:
                j += 1
            out.extend(self._reader.read(os.path.join(self.dir, seg[2]), i, j))
            i = j + 1
        return out

    def mem_size(self) -> int:
        """Entries held in memory (not yet known to be in segments)."""
        return len(self._mem)

    # ---- mutations --------------------------------------------------------

    def append(self, entry: Entry) -> None:
        idx = entry[0]
        self._check_append(idx)
        self._mem[idx] = entry
        self._last = idx
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append([entry])

    def write(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        self._make_room(entries[0][0])
        pending = self._pending
        for entry in entries:
            idx = entry[0]
            if idx != self._last + 1:
                raise ValueError(f"non-contiguous write at {idx}")
            self._mem[idx] = entry
            self._last = idx
            pending = ra_seq.append(idx, pending)
        self._pending = pending
        self._wal_out.append(own_batch(entries))

    def set_last_index(self, idx: int) -> None:
        if idx < self._last:
            self._truncate_after(idx)

    def _truncate_after(self, idx: int) -> None:
        assert idx >= self._first - 1, f"truncating into the snapshot at {idx}"
        mem = self._mem
        for k in range(idx + 1, self._last + 1):
            mem.pop(k, None)
        self._last = idx
        if self._last_written[0] > idx:
            self._last_written = (idx, self._term_or_snapshot(idx))
        self._pending = ra_seq.limit(idx, self._pending)

    # ---- snapshots and checkpoints (``ra_snapshot``) -----------------------

    def run_bg_work(self, job: Any) -> Any:
        """Do a ``bg_work`` job on disk; returns the ``ra_log_event`` body to report.

        Touches only the directory, never the log's state, so the shell runs it
        on a thread (off the hub) while the server carries on.
        """
        started = time.perf_counter()
        match job:
            case ("write_snapshot", kind, meta, mac_state):
                path = snapshot_store.write(self.dir, _kind_dir(kind), meta, mac_state,
                                            sync=kind == SNAPSHOT, fsync=self._fsync)
                idxterm = (int(meta["index"]), int(meta["term"]))
            case ("promote_checkpoint", (idx, term)):
                path = snapshot_store.promote(self.dir, idx, term, fsync=self._fsync)
                kind, idxterm = SNAPSHOT, (idx, term)
            case _:
                raise ValueError(f"unknown bg_work job {job!r}")
        size = os.path.getsize(os.path.join(path, snapshot_store.FILE))
        duration_ms = int((time.perf_counter() - started) * 1000)
        return ("snapshot_written", idxterm, [], kind, size, duration_ms)

    def install_snapshot(self, meta: dict[str, Any], mac_state: Any) -> list[Any]:
        """A follower installs a received snapshot: written durably, then the whole range goes."""
        idx, term = int(meta["index"]), int(meta["term"])
        gevent.get_hub().threadpool.apply(
            snapshot_store.write,
            (self.dir, snapshot_store.SNAPSHOTS, meta, mac_state),
            {"sync": True, "fsync": self._fsync},
        )
        if self._snapshot is not None and _idxterm(self._snapshot) != (idx, term):
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *_idxterm(self._snapshot))
        self._snapshot = (meta, mac_state)
        self._drop_checkpoints_upto(idx)
        self._first = idx + 1
        self._last = idx
        self._mem = {}
        self._segs = []
        self._seg_starts = []
        self._gc_segments()
        self._last_written = (idx, term)
        self._pending = []
        pending = self._pending_snapshot
        if pending is not None and _idxterm(pending[1])[0] <= idx:
            self._pending_snapshot = None
        if self.log_ets is not None:
            self.log_ets.set_snapshot_index(self.uid, idx)
        return []

    def _drop_checkpoints_upto(self, idx: int) -> None:
        for c in [c for c in self._checkpoints if _idxterm(c)[0] <= idx]:
            self._checkpoints.remove(c)
            snapshot_store.delete(self.dir, snapshot_store.CHECKPOINTS, *_idxterm(c))

    def _adopt_snapshot(self, snap: Snapshot) -> None:
        idx, term = _idxterm(snap)
        current = self.snapshot_index_term()
        if current is not None:
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *current)
        self._snapshot = snap
        self._drop_checkpoints_upto(idx)
        mem = self._mem
        for k in range(self._first, min(idx, self._last) + 1):
            mem.pop(k, None)
        self._first = idx + 1
        self._last = max(self._last, idx)
        deleted = self._drop_segments_upto(idx)
        if deleted and crash_points.ARMED:
            crash_points.reached("snapshot_segments_deleted")
        if self._last_written[0] < idx:
            self._last_written = (idx, term)
        self._pending = ra_seq.floor(idx + 1, self._pending)
        if self.log_ets is not None:
            self.log_ets.set_snapshot_index(self.uid, idx)

    def _delete_written(self, kind: str, it: IdxTerm) -> None:
        snapshot_store.delete(self.dir, _kind_dir(kind), *it)

    def read_recovery_checkpoint(self) -> Snapshot | None:
        rc = self._recovery_checkpoint
        if rc is None:
            return None
        path = os.path.join(self.dir, snapshot_store.RECOVERY_CHECKPOINT,
                            snapshot_store.dir_name(*rc))
        try:
            return snapshot_store.read(path)
        except snapshot_store.READ_ERRORS as exc:
            log.warning("%s: cannot read the recovery checkpoint %s: %s", self.uid, path, exc)
            return None

    def _store_recovery_checkpoint(self, meta: dict[str, Any], mac_state: Any) -> None:
        # as Ra: no fsync, the stop is orderly; a checkpoint lost to a power cut
        # only means the next start replays the log
        snapshot_store.write(self.dir, snapshot_store.RECOVERY_CHECKPOINT, meta, mac_state,
                             sync=False, fsync=self._fsync)

    def _delete_recovery_checkpoint(self, it: IdxTerm) -> None:
        snapshot_store.delete(self.dir, snapshot_store.RECOVERY_CHECKPOINT, *it)

    def first_segment_index(self) -> int | None:
        return self._segs[0][0] if self._segs else None

    # ---- events -------------------------------------------------------------

    def _handle_storage_event(self, evt: Any) -> list[Any]:
        match evt:
            case ("segments", flushed, refs):
                self._segments(flushed, refs)
        return []

    def _segments(self, flushed: list[tuple[int, ra_seq.Seq]],
                  refs: list[ra_segment.SegRef]) -> None:
        """Entries reached segments: read them from there, drop them from memory."""
        for name, (lo, hi) in refs:
            self._seg_files[name] = (lo, hi)
            self._seg_add(name, lo, hi)
        mem = self._mem
        for term, flushed_seq in flushed:
            for idx in ra_seq.iterate(flushed_seq):
                entry = mem.get(idx)
                if entry is not None and entry[1] == term and idx > 0:
                    del mem[idx]
        self._drop_segments_upto(self._first - 1)

    # ---- driver side ------------------------------------------------------

    def close(self) -> None:
        """Write the meta row if `store` left it pending."""
        self.meta.sync()


def run_bg_work(log: Any, effect: Any) -> tuple[str, Any]:
    """Execute a ``("bg_work", job, error)`` effect of either log; the message to send back.

    A `DiskLog` writes the snapshot or promotes the checkpoint (call this off
    the hub); a `MemoryLog` holds snapshots as values, so its job is done at
    once. A failure becomes the effect's ``snapshot_error`` plus the reason.
    """
    _, job, error = effect
    try:
        runner = getattr(log, "run_bg_work", None)
        if runner is not None:
            return ("ra_log_event", runner(job))
        match job:
            case ("write_snapshot", kind, meta, _state):
                return ("ra_log_event", ("snapshot_written", (meta["index"], meta["term"]), [],
                                         kind))
            case ("promote_checkpoint", idxterm):
                return ("ra_log_event", ("snapshot_written", tuple(idxterm), [], SNAPSHOT))
        raise ValueError(f"unknown bg_work job {job!r}")
    except Exception as exc:
        return ("ra_log_event", (*error, repr(exc)))
