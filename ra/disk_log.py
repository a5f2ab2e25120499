"""`DiskLog`: the `MemoryLog` interface backed by a server directory on disk.

The pure server core cannot tell the two apart: it appends and writes, the
driver hands `take_wal_writes()` to the node's WAL (`ra.wal.append`), and
``written`` / ``resend_write`` / ``snapshot_written`` / ``segments`` events
come back through `handle_event`. `last_written` moves only on ``written``
(and on a snapshot), never on a mere append.

Where entries live:
* the server's mem tables (`ra.log_ets.MemTable`, Ra's ``ra_mt``): every entry
  this server wrote that it does not yet know to be in a segment (appended, in
  flight, or in a WAL file). They are the only copy: the log inserts each entry
  there before handing it to the WAL and keeps none of its own. An overwrite
  opens a successor table; a ``segments`` event deletes the rows it reports
  flushed (``ra_mt:record_flushed``), a snapshot the rows it covers.
* segments: an ordered list of intervals over immutable segment files; a newer
  segment cuts off whatever older ones hold at or above its first index, as
  the overwrite that produced it cut the log. Reads try the mem tables first.
* snapshots and checkpoints: ``snapshots/`` and ``checkpoints/`` (as ``ra_snapshot`` lays them out),
  written by `run_bg_work` off the hub; the values stay in memory too, as the
  leader streams the snapshot and recovery starts from it.
* ``meta``: `ra.log_meta.LogMeta` (``current_term``, ``voted_for``,
  ``last_applied``).

`DiskLog.open(dir, uid, log_ets)` recovers a server after a restart: the newest
valid snapshot, newer checkpoints, the segments in file order, then the mem tables the WAL
rebuilt for the uid, oldest first (each cuts the segments from its lowest row
on); everything recovered is durable, so ``last_written`` is the recovered last
index.

Live indexes (Ra's log v3): a snapshot whose machine still needs entries below
it keeps their indexes (``snapshots/.../live_indexes``). The log keeps those
entries readable (`fetch`, `sparse_read`): the mem tables are cut at the
smallest live index instead of the snapshot, the WAL and the segment writer
drop only what lies below it, and each snapshot runs a *minor compaction*:
segment files wholly below the snapshot go unless they hold a live index. A
*major compaction* rewrites the segment files below the snapshot that hold
live entries among dead ones into sparse segments of the live entries only;
it runs every `num_minors` (8) minor compactions and on
``ra.api.trigger_compaction``. Recovery keeps every segment holding a live
index and checks contiguity only above the snapshot, so the gaps between live
entries are not a ``corrupt_log``.
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
from ra.log_base import SNAPSHOT, LogBase, Snapshot, WalDown, WalWrite
from ra.log_base import idxterm as _idxterm
from ra.log_ets import LogEts, MemTable
from ra.log_meta import LogMeta
from ra.packed import own_batch
from ra.types import DUMMY_ENTRY, Entry, IdxTerm

log = logging.getLogger("warren.ra.disk_log")

Fsync = Callable[[int], None]

#: Ra's ``?DEF_MAJOR_COMPACTION_STRAT``: ``{num_minors, 8}``
DEFAULT_NUM_MINORS = 8
#: live entries a major compaction puts into one merged segment at most
MAX_COMPACTED_ENTRIES = 4096


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
        num_minors: int = DEFAULT_NUM_MINORS,
    ) -> None:
        self.dir = directory
        self.uid = uid
        self.log_ets = log_ets
        #: the tables (a private set when the log runs without a node's)
        self._ets = log_ets if log_ets is not None else LogEts()
        self.min_snapshot_interval = min_snapshot_interval
        self.min_checkpoint_interval = min_checkpoint_interval
        self.max_checkpoints = max_checkpoints
        self._fsync = fsync
        #: minor compactions between two major ones (``{num_minors, N}``)
        self.num_minors = num_minors
        self.minor_compactions = 0
        self.major_compactions = 0
        self._live = []
        make_dirs(directory)
        self.meta = LogMeta(directory, fsync)
        self._reader = ra_segment.SegmentReader()
        #: effective segment intervals ``(lo, hi, file name)``, sorted, disjoint
        self._segs: list[tuple[int, int, str]] = []
        self._seg_starts: list[int] = []
        #: every segment file this log knows: name -> (first, last)
        self._seg_files: dict[str, tuple[int, int]] = {}
        #: the current mem table; older ones hang off its ``prev``
        self._mt: MemTable = self._ets.mem_table_please(uid)
        self._first = 0
        self._last = 0
        self._snapshot: Snapshot | None = None
        self._checkpoints: list[Snapshot] = []
        self._pending_snapshot: tuple[str, Snapshot] | None = None
        self._last_written: IdxTerm = (0, 0)
        self._pending: ra_seq.Seq = []
        self._wal_out: list[WalWrite] = []
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
        snaps = snapshot_store.recover(self.dir, snapshot_store.SNAPSHOTS)
        for _, old in snaps[:-1]:
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *_idxterm(old))
        self._snapshot = snaps[-1][1] if snaps else None
        snap_idx = _idxterm(self._snapshot)[0] if self._snapshot else -1
        if snaps:
            self._live = [i for i in snapshot_store.read_live(snaps[-1][0]) if i <= snap_idx]
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
        smallest = self._live[0] if self._live else snap_idx + 1
        self._ets.set_first(self.uid, smallest)
        # the mem tables hold what no segment is known to hold yet: the log is
        # the segments up to the lowest row, the tables from there on (live rows
        # below the snapshot cut nothing: no write overwrites below a snapshot)
        lowest = [r for t in self._mt.chain()
                  if (r := _first_row_from(t, snap_idx + 1)) is not None]
        if lowest:
            self._seg_cut(min(lowest))
        # but a segment superseded only by a table may be that table's own flush, just
        # renamed into place with its ``segments`` event still on the way: keep it
        live = {seg[2] for seg in self._segs}
        for name in [n for n in self._seg_files if n not in live]:
            del self._seg_files[name]
        if self._snapshot is None:
            self._first = 0
        else:
            self._first = snap_idx + 1
            if self.log_ets is not None:
                self.log_ets.set_snapshot_index(self.uid, snap_idx, smallest)
        start = max(self._first, 1)
        i = start
        lookup = self._mt.lookup
        while True:
            if lookup(i) is not None:
                i += 1
                continue
            seg = self._seg_at(i)
            if seg is None:
                break
            i = seg[1] + 1
        last = i - 1
        beyond = any(t.last > last and t.size for t in self._mt.chain())
        beyond_seg = bool(self._segs) and self._segs[-1][1] > last
        if last < start and (beyond or beyond_seg):
            raise CorruptLog(f"{self.uid}: log does not start at {start}")
        if beyond or beyond_seg:
            log.warning("%s: sparse log tail after %d dropped", self.uid, last)
        self._last = max(last, self._first - 1, 0)
        lw = self._last
        self._last_written = (lw, self._term_or_snapshot(lw))

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
        """Minor compaction: forget intervals wholly at or below `idx` that hold no
        live index, then delete unreferenced files; returns how many files went."""
        self._segs = [s for s in self._segs if s[1] > idx or self._live_in(s[0], s[1])]
        self._seg_starts = [s[0] for s in self._segs]
        return self._gc_segments()

    def _live_in(self, lo: int, hi: int) -> list[int]:
        """The live indexes in ``lo..hi``."""
        live = self._live
        return live[bisect.bisect_left(live, lo):bisect.bisect_right(live, hi)]

    def _minor_compaction(self, idx: int) -> list[Any]:
        """After a snapshot at `idx`: delete what no longer holds a live entry, and
        every `num_minors` such compactions (with live entries kept) run a major one."""
        self._drop_segments_upto(idx)
        if not self._live:
            return []
        self.minor_compactions += 1
        if self.minor_compactions >= self.num_minors:
            self._major_compaction()
        return []

    def _major_compaction(self) -> None:
        """Rewrite the segment files below the snapshot that hold live entries into
        sparse segments of the live entries only (``major_compaction``).

        Neighbouring files (in file order) are merged, up to
        `MAX_COMPACTED_ENTRIES` live entries a file: the result takes the name of
        the first and the others are deleted, so the order of the files, which
        decides what a restart reads, stays as it was (a file's effective
        entries all lie below those of every newer file). A crash between the
        rename and the deletes leaves the old files, newer in order, in front of
        the merged one: they hold the same entries. The rewrite runs on the
        thread pool while this server waits: a reader never sees a file change
        under its cached index.
        """
        self.minor_compactions = 0
        snap = self.snapshot_index_term()
        if snap is None:
            return
        interval = {name: (lo, hi) for lo, hi, name in self._segs}
        groups: list[list[tuple[str, list[int]]]] = []
        run: list[tuple[str, list[int]]] = []
        count = 0
        for name in sorted(self._seg_files):
            iv = interval.get(name)
            live = self._live_in(*iv) if iv is not None and iv[1] <= snap[0] else []
            if run and (not live or count + len(live) > MAX_COMPACTED_ENTRIES):
                groups.append(run)
                run, count = [], 0
            if live:
                run.append((name, live))
                count += len(live)
        if run:
            groups.append(run)
        jobs: list[tuple[str, list[str], list[Entry]]] = []
        for group in groups:
            first, first_live = group[0]
            others = [name for name, _ in group[1:]]
            if not others and (self._reader.index(os.path.join(self.dir, first)).indexes()
                               == first_live):
                continue  # already just the live entries
            ents = sorted((e for name, idxs in group for i in idxs
                           if (e := self._read_seg(name, i)) is not None), key=lambda e: e[0])
            if ents:
                jobs.append((first, others, ents))
        if not jobs:
            return
        self.major_compactions += 1
        refs = gevent.get_hub().threadpool.apply(self._rewrite, (jobs,))
        for (first, rest, _ents), (_name, (lo, hi)) in zip(jobs, refs, strict=True):
            gone = {first, *rest}
            for name in gone:
                self._reader.forget(os.path.join(self.dir, name))
            for name in rest:
                del self._seg_files[name]
            self._seg_files[first] = (lo, hi)
            self._segs = sorted([s for s in self._segs if s[2] not in gone] + [(lo, hi, first)])
        self._seg_starts = [s[0] for s in self._segs]

    def _read_seg(self, name: str, idx: int) -> Entry | None:
        got = self._reader.read(os.path.join(self.dir, name), idx, idx)
        return got[0] if got and got[0][0] == idx else None

    def _rewrite(self, jobs: list[tuple[str, list[str], list[Entry]]]) -> list[ra_segment.SegRef]:
        """On a pool thread: each job's entries become a sparse segment under the name
        of its first file, then the job's other files are deleted."""
        refs = []
        for first, rest, ents in jobs:
            refs.append(ra_segment.rewrite_sparse(os.path.join(self.dir, first), ents,
                                                  fsync=self._fsync))
            for name in rest:
                try:
                    os.unlink(os.path.join(self.dir, name))
                except FileNotFoundError:
                    pass
        return refs

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

    def _mem_get(self, idx: int) -> Entry | None:
        """The entry at `idx` if memory holds it (the dummy at 0, or a mem table row)."""
        if idx == 0:
            return DUMMY_ENTRY if self._snapshot is None else None
        return self._mt.lookup(idx)

    def _mem_floor(self) -> int:
        """No mem table holds a row of the log's range below this index."""
        rows = [r for t in self._mt.chain() if (r := _first_row_from(t, self._first)) is not None]
        return min(rows) if rows else self._last + 1

    def fetch(self, idx: int) -> Entry | None:
        if idx < self._first and self._live and self.is_live(idx):
            return self._fetch_live(idx)
        if idx < self._first or idx > self._last:
            return None
        entry = self._mem_get(idx)
        if entry is not None:
            return entry
        seg = self._seg_at(idx)
        if seg is None:
            raise CorruptLog(f"{self.uid}: index {idx} is in range but held nowhere")
        return self._reader.read(os.path.join(self.dir, seg[2]), idx, idx)[0]

    def _fetch_live(self, idx: int) -> Entry:
        """A live entry below the snapshot: in a mem table or a kept segment."""
        entry = self._mt.lookup(idx)
        if entry is None:
            for table in self._mt.chain():  # a live row shadowed by a newer table's start
                entry = table.get(idx)
                if entry is not None:
                    break
        if entry is not None:
            return entry
        seg = self._seg_at(idx)
        if seg is None:
            raise CorruptLog(f"{self.uid}: live index {idx} is held nowhere")
        found = self._read_seg(seg[2], idx)
        if found is None:
            raise CorruptLog(f"{self.uid}: live index {idx} is not in {seg[2]}")
        return found

    def fetch_term(self, idx: int) -> int | None:
        if idx < self._first or idx > self._last:
            return None
        entry = self._mem_get(idx)
        if entry is not None:
            return entry[1]
        seg = self._seg_at(idx)
        if seg is None:
            raise CorruptLog(f"{self.uid}: index {idx} is in range but held nowhere")
        return self._reader.term(os.path.join(self.dir, seg[2]), idx)

    def fold(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive (clipped to what the log holds)."""
        i, hi = max(first, self._first), min(last, self._last)
        if i > hi:
            return []
        if i > 0:
            chunk = self._mt.slice(i, hi)
            if chunk is not None:  # the common case: recent entries, all in the current table
                return chunk
        out: list[Entry] = []
        mem_get = self._mem_get
        floor = self._mem_floor()
        while i <= hi:
            entry = mem_get(i)
            if entry is not None:
                out.append(entry)
                i += 1
                continue
            seg = self._seg_at(i)
            if seg is None:
                raise CorruptLog(f"{self.uid}: index {i} is in range but held nowhere")
            end = min(seg[1], hi)
            if i < floor:
                j = min(end, floor - 1)
            else:
                j = i
                while j + 1 <= end and mem_get(j + 1) is None:
                    j += 1
            out.extend(self._reader.read(os.path.join(self.dir, seg[2]), i, j))
            i = j + 1
        return out

    def mem_size(self) -> int:
        """Entries held in memory (not yet known to be in segments): the rows of the
        server's mem tables, and the dummy entry of a log without a snapshot."""
        return self._mt.chain_size() + (1 if self._snapshot is None else 0)

    def mem_tables(self) -> list[MemTable]:
        """The server's mem tables, newest first."""
        return self._mt.chain()

    # ---- mutations --------------------------------------------------------

    def _insert(self, entry: Entry) -> int:
        """Put `entry` into the current mem table, opening a successor when the
        table already went past its index (``ra_log_ets:new_mem_table_please``);
        returns the table's id."""
        mt = self._mt
        if not mt.insert(entry):
            mt = self._mt = self._ets.new_mem_table_please(self.uid)
            mt.insert(entry)
        return mt.tid

    def append(self, entry: Entry) -> None:
        idx = entry[0]
        self._check_append(idx)
        prev = self._prev_wal_index()
        tid = self._insert(entry)
        self._last = idx
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append((tid, prev, [entry]))

    def write(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        prev = self._prev_wal_index()
        self._make_room(entries[0][0])
        pending = self._pending
        runs: list[WalWrite] = []
        for entry in entries:
            idx = entry[0]
            if idx != self._last + 1:
                raise ValueError(f"non-contiguous write at {idx}")
            tid = self._insert(entry)
            if runs and runs[-1][0] == tid:
                runs[-1][2].append(entry)
            else:  # the first, or the table filled up: a run per table
                runs.append((tid, prev if not runs else self._last, [entry]))
            self._last = idx
            pending = ra_seq.append(idx, pending)
        self._pending = pending
        if len(runs) == 1:
            self._wal_out.append((runs[0][0], prev, own_batch(entries)))
        else:
            self._wal_out.extend(runs)

    def _prev_wal_index(self) -> int:
        """``ra_log:previous_wal_index``: the index written before the next write,
        -1 when nothing lies above the snapshot (an installed snapshot's live
        entries sit below it, so the WAL must not expect them to precede)."""
        return self._last if self._last >= self._first else -1

    def write_sparse(self, entry: Entry) -> None:
        idx = entry[0]
        if idx <= self._last:
            raise ValueError(f"sparse write of {idx} not above the log's end {self._last}")
        if not self.wal_up:
            raise WalDown()
        prev = self._prev_wal_index()
        tid = self._insert(entry)
        self._last = idx
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append((tid, prev, [entry]))

    def _resend_writes(self, first: int, last: int) -> list[WalWrite]:
        """Send ``first..last`` again, each run to the table that holds it
        (``ra_mt:tid_for``): the WAL's hand-off must name where the rows are."""
        writes: list[WalWrite] = []
        prev = first - 1
        head = self._mt
        for entry in self.fold(first, last):
            tid = head.tid_for(entry[0], entry[1])
            if tid is None:
                # in segments already: its row is gone, so the WAL need not hand it over
                tid = head.tid
            if writes and writes[-1][0] == tid:
                writes[-1][2].append(entry)
            else:
                writes.append((tid, prev, [entry]))
            prev = entry[0]
        return writes

    def set_last_index(self, idx: int) -> None:
        if idx < self._last:
            self._truncate_after(idx)

    def _truncate_after(self, idx: int) -> None:
        assert idx >= self._first - 1, f"truncating into the snapshot at {idx}"
        if self._mt.last > idx:
            # the entries above stay in their table, shadowed by the successor
            # from its first row on, until they are flushed or deleted
            self._mt = self._ets.new_mem_table_please(self.uid)
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
            case ("write_snapshot", kind, meta, mac_state, *rest):
                live = list(rest[0]) if rest else []
                path = snapshot_store.write(self.dir, _kind_dir(kind), meta, mac_state,
                                            sync=kind == SNAPSHOT, fsync=self._fsync,
                                            live=live)
                idxterm = (int(meta["index"]), int(meta["term"]))
            case ("promote_checkpoint", (idx, term)):
                path = snapshot_store.promote(self.dir, idx, term, fsync=self._fsync)
                kind, idxterm = SNAPSHOT, (idx, term)
                live = snapshot_store.read_live(path)
            case _:
                raise ValueError(f"unknown bg_work job {job!r}")
        size = os.path.getsize(os.path.join(path, snapshot_store.FILE))
        duration_ms = int((time.perf_counter() - started) * 1000)
        return ("snapshot_written", idxterm, live, kind, size, duration_ms)

    def install_snapshot(self, meta: dict[str, Any], mac_state: Any,
                         live: list[int] | None = None) -> list[Any]:
        """A follower installs a received snapshot: written durably, then the whole range
        goes but the entries at its live indexes (its own, or written sparsely
        from the sender's ``pre`` chunks)."""
        idx, term = int(meta["index"]), int(meta["term"])
        kept = sorted({int(i) for i in live or [] if int(i) <= idx})
        gevent.get_hub().threadpool.apply(
            snapshot_store.write,
            (self.dir, snapshot_store.SNAPSHOTS, meta, mac_state),
            {"sync": True, "fsync": self._fsync, "live": kept},
        )
        if self._snapshot is not None and _idxterm(self._snapshot) != (idx, term):
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *_idxterm(self._snapshot))
        self._snapshot = (meta, mac_state)
        self._drop_checkpoints_upto(idx)
        self._first = idx + 1
        self._last = idx
        self._live = kept
        self._drop_mem_rows()
        self._segs = [s for s in self._segs if self._live_in(s[0], s[1])]
        self._seg_starts = [s[0] for s in self._segs]
        self._gc_segments()
        self._last_written = (idx, term)
        self._pending = ra_seq.floor(self.smallest_live_index(), self._pending)
        pending = self._pending_snapshot
        if pending is not None and _idxterm(pending[1])[0] <= idx:
            self._pending_snapshot = None
        self._forget_written_live(idx)
        if self.log_ets is not None:
            self.log_ets.set_snapshot_index(self.uid, idx, self.smallest_live_index())
        if kept:
            self._minor_compaction(idx)
        return []

    def _drop_mem_rows(self) -> None:
        """The whole log went (an installed snapshot): no row of any table is the
        log's any more but the live ones, and the next write opens a successor."""
        if not self._live:
            self._ets.set_first(self.uid, self._mt.last + 1)
        else:
            self._ets.set_first(self.uid, self._live[0])
            for table in self._mt.chain():
                dead = [e[0] for e in table.entries(self._live[0]) if not self.is_live(e[0])]
                if dead:
                    table.delete_seq(ra_seq.from_list(dead))
        self._mt = self._ets.new_mem_table_please(self.uid)

    def _drop_checkpoints_upto(self, idx: int) -> None:
        for c in [c for c in self._checkpoints if _idxterm(c)[0] <= idx]:
            self._checkpoints.remove(c)
            snapshot_store.delete(self.dir, snapshot_store.CHECKPOINTS, *_idxterm(c))

    def _adopt_snapshot(self, snap: Snapshot, live: list[int]) -> list[Any]:
        idx, term = _idxterm(snap)
        current = self.snapshot_index_term()
        if current is not None:
            snapshot_store.delete(self.dir, snapshot_store.SNAPSHOTS, *current)
        self._snapshot = snap
        self._live = [i for i in live if i <= idx]
        self._drop_checkpoints_upto(idx)
        smallest = self._live[0] if self._live else idx + 1
        self._ets.set_first(self.uid, smallest)
        self._first = idx + 1
        self._last = max(self._last, idx)
        files = len(self._seg_files)
        effects = self._minor_compaction(idx)
        if len(self._seg_files) < files and crash_points.ARMED:
            crash_points.reached("snapshot_segments_deleted")
        if self._last_written[0] < idx:
            self._last_written = (idx, term)
        self._pending = ra_seq.floor(smallest, self._pending)
        if self.log_ets is not None:
            self.log_ets.set_snapshot_index(self.uid, idx, smallest)
        return effects

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
            case "major_compaction":
                # ``ra:trigger_compaction/1``
                self._major_compaction()
        return []

    def _segments(self, flushed: list[tuple[int, ra_seq.Seq]],
                  refs: list[ra_segment.SegRef]) -> None:
        """Entries reached segments: read them from there, drop them from memory."""
        for name, (lo, hi) in refs:
            self._seg_files[name] = (lo, hi)
            self._seg_add(name, lo, hi)
        # the tables arrive newest first; the oldest is recorded first
        for tid, flushed_seq in reversed(flushed):
            self._ets.record_flushed(self.uid, tid, flushed_seq)
        self._drop_segments_upto(self._first - 1)
        self._written_by_segments(refs)

    def _written_by_segments(self, refs: list[ra_segment.SegRef]) -> None:
        """A segment beyond ``last_written`` holding this log's entry at its end means
        the WAL's ``written`` was overtaken by the flush: what it holds is durable."""
        if not refs:
            return
        name, (_lo, hi) = max(refs, key=lambda ref: ref[1][1])
        if not self._last_written[0] < hi <= self._last:
            return
        term = self.fetch_term(hi)
        if term is not None and self._reader.term(os.path.join(self.dir, name), hi) == term:
            self._last_written = (hi, term)
            self._pending = ra_seq.floor(hi + 1, self._pending)

    # ---- driver side ------------------------------------------------------

    def close(self) -> None:
        """Write the meta row if `store` left it pending."""
        self.meta.sync()


def _first_row_from(table: MemTable, floor: int) -> int | None:
    """The lowest row of `table` at or above `floor` (None: none)."""
    first = table.first_row()
    if first is None or first >= floor:
        return first
    rows = table.entries(floor)
    return rows[0][0] if rows else None


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
            case ("write_snapshot", kind, meta, _state, *rest):
                return ("ra_log_event", ("snapshot_written", (meta["index"], meta["term"]),
                                         list(rest[0]) if rest else [], kind))
            case ("promote_checkpoint", idxterm):
                return ("ra_log_event", ("snapshot_written", tuple(idxterm), [], SNAPSHOT))
        raise ValueError(f"unknown bg_work job {job!r}")
    except Exception as exc:
        return ("ra_log_event", (*error, repr(exc)))
