"""What every `ra_log` implementation shares: the written/pending bookkeeping and
the snapshot accessors.

`MemoryLog` and `DiskLog` store entries differently (a list; memtables plus
segment files) but agree on everything the server core relies on: an entry
counts as written only when the WAL says so for the same term, a WAL
confirmation that does not match the oldest pending write means a write went
missing and everything pending is sent again, and a snapshot or checkpoint is
a value ``(meta, machine_state)``. Keeping that in one place keeps the two
logs' contract identical (tests/ra/test_ra_disk_log_contract.py runs it on both).

A subclass provides ``_first``, ``_last_written``, ``_pending``, ``_wal_out``,
``_snapshot``, ``_checkpoints``, ``_pending_snapshot``, ``wal_up`` and the
storage-specific ``next_index``, ``fetch_term``, ``fold``, ``_truncate_after``,
``_adopt_snapshot`` and (for files) ``_delete_written`` and ``first_segment_index``.
`handle_event` (the ``ra_log_event`` bodies) is shared too; an event only one
storage knows goes to its ``_handle_storage_event``. So are the checks before an
append or a follower's write, and ``WalDown``, which they raise.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from ra import seq as ra_seq
from ra.types import Entry, IdxTerm

SNAPSHOT = "snapshot"
CHECKPOINT = "checkpoint"

#: ``(meta, machine_state)``; meta is ``#{index, term, cluster, machine_version}``.
Snapshot = tuple[dict[str, Any], Any]

#: one write for the WAL: ``(mem_table_id, prev_idx, entries)``. The mem table is the
#: one the entries went into (None for the in-memory log, which has none); prev_idx is
#: the index the log wrote before the first entry (``ra_log:previous_wal_index``)
WalWrite = tuple[Any, int, list[Entry]]


class WalDown(Exception):
    """The WAL is not running: the write was not accepted (``wal_down``)."""


def idxterm(snap: Snapshot) -> IdxTerm:
    """``(index, term)`` of a snapshot or checkpoint."""
    return (int(snap[0]["index"]), int(snap[0]["term"]))


#: Ra's ``?MAX_DIFF``: checkpoints closer together than this (times a factor that
#: grows with their number) are thinned first
CHECKPOINT_MAX_DIFF = 65_536


def thin_checkpoints(ckpts: list[Snapshot], max_checkpoints: int) -> list[Snapshot]:
    """``ra_snapshot:take_extra_checkpoints``: remove (and return) at most one checkpoint.

    Over `max_checkpoints`, the oldest checkpoint that sits between two others
    less than ``CHECKPOINT_MAX_DIFF * min(8, len // max_checkpoints)`` indexes
    apart goes: the spacing widens as checkpoints pile up, so old and new
    states stay covered. If every such gap is wider, nothing goes and the list
    may keep more than `max_checkpoints` (as in Ra). `ckpts` is oldest first.
    """
    if len(ckpts) <= max_checkpoints:
        return []
    mult = min(8, len(ckpts) // max(1, max_checkpoints))
    for first, middle, third in zip(ckpts, ckpts[1:], ckpts[2:], strict=False):
        if idxterm(third)[0] - idxterm(first)[0] < CHECKPOINT_MAX_DIFF * mult:
            ckpts.remove(middle)
            return [middle]
    return []


class LogBase:
    """Bookkeeping shared by the in-memory and the on-disk log."""

    _first: int
    _last_written: IdxTerm
    _pending: ra_seq.Seq
    _wal_out: list[WalWrite]
    _snapshot: Snapshot | None
    _checkpoints: list[Snapshot]
    _pending_snapshot: tuple[str, Snapshot] | None
    #: the checkpoint being written, kept apart from the pending slot: a promotion
    #: may take that slot while the checkpoint's write goes on
    _checkpoint_in_flight: Snapshot | None = None
    #: ``(index, term)`` of the recovery checkpoint, if one is kept
    _recovery_checkpoint: IdxTerm | None = None
    max_checkpoints: int
    wal_up: bool
    #: the packed run the last AppendEntries carried (`ra.replication`), until
    #: `take_wal_writes`: a leader's WAL batch of the same entries reuses it
    sent_run: Any = None
    min_snapshot_interval: int
    min_checkpoint_interval: int
    #: the current snapshot's live indexes, ascending: entries below the snapshot
    #: the machine still needs, which the log keeps readable (`fetch`)
    _live: list[int] = []
    #: live indexes of snapshots and checkpoints being written or kept, by
    #: ``(index, term)``, until one becomes the snapshot
    _written_live: dict[IdxTerm, list[int]] | None = None

    # ---- storage-specific (subclasses) ---------------------------------------

    def next_index(self) -> int:
        raise NotImplementedError

    def fetch_term(self, idx: int) -> int | None:
        raise NotImplementedError

    def fold(self, first: int, last: int) -> list[Entry]:
        raise NotImplementedError

    # ---- queries --------------------------------------------------------------

    def last_written(self) -> IdxTerm:
        return self._last_written

    def _term_or_snapshot(self, idx: int) -> int:
        term = self.fetch_term(idx)
        if term is not None:
            return term
        snap = self.snapshot_index_term()
        if snap is not None and snap[0] == idx:
            return snap[1]
        raise AssertionError(f"no term for index {idx}")

    def live_indexes(self) -> list[int]:
        """The live indexes of the current snapshot, ascending ([]: none)."""
        return list(self._live)

    def is_live(self, idx: int) -> bool:
        """Whether `idx` is one of the current snapshot's live indexes."""
        live = self._live
        i = bisect.bisect_left(live, idx)
        return i < len(live) and live[i] == idx

    def smallest_live_index(self) -> int:
        """The lowest index the log still needs: the smallest live index, else the
        one after the snapshot (``ra_log_snapshot_state:smallest``)."""
        return self._live[0] if self._live else self._first

    def sparse_read(self, indexes: Iterable[int]) -> list[Entry]:
        """``ra_log:sparse_read``: the entries at `indexes` the log holds, in the given
        order; an index below the snapshot is found only if it is live."""
        out: list[Entry] = []
        for idx in indexes:
            entry = self.fetch(idx)
            if entry is not None:
                out.append(entry)
        return out

    def fetch(self, idx: int) -> Entry | None:
        raise NotImplementedError

    def write_sparse(self, entry: Entry) -> None:
        """``ra_log:write_sparse``: a follower receiving a snapshot's live entries
        writes each above its last index, leaving a gap; the snapshot that follows
        puts them below its index. Undone like any write by `set_last_index`."""
        raise NotImplementedError

    def exists(self, idx: int, term: int) -> bool:
        return self.fetch_term(idx) == term

    def snapshot_index_term(self) -> IdxTerm | None:
        return None if self._snapshot is None else idxterm(self._snapshot)

    def current_snapshot(self) -> Snapshot | None:
        """The snapshot a leader streams to lagging followers."""
        return self._snapshot

    def checkpoints(self) -> list[Snapshot]:
        return list(self._checkpoints)

    def snapshot_mark(self) -> tuple[Snapshot | None, int, Snapshot | None]:
        """The snapshot, the number of checkpoints and the newest, without copying them.

        The server shell compares this after every event to learn whether there
        is something new to persist; `checkpoints` would copy the list each time.
        The newest checkpoint is part of it because at ``max_checkpoints`` a new
        one replaces the oldest and the number stays the same.
        """
        ckpts = self._checkpoints
        return self._snapshot, len(ckpts), ckpts[-1] if ckpts else None

    def latest_checkpoint_index(self) -> int:
        return idxterm(self._checkpoints[-1])[0] if self._checkpoints else 0

    # ---- the recovery checkpoint (``ra_snapshot``'s ``recovery_checkpoint``) ---------

    def recovery_checkpoint_index_term(self) -> IdxTerm | None:
        """``(index, term)`` of the state written at the last orderly stop, if kept."""
        return self._recovery_checkpoint

    def highest_snapshot_index(self) -> int:
        """``ra_snapshot:highest_idx``: the newest of snapshot, checkpoints and
        recovery checkpoint (-1: none); how far a stop's state is from a saved one."""
        snap = self.snapshot_index_term()
        rc = self._recovery_checkpoint
        return max(snap[0] if snap is not None else -1,
                   self.latest_checkpoint_index() if self._checkpoints else -1,
                   rc[0] if rc is not None else -1)

    def write_recovery_checkpoint(self, meta: dict[str, Any], mac_state: Any) -> None:
        """Keep `mac_state` at ``meta["index"]`` in place of the older recovery
        checkpoint; synchronous (the server is stopping). Raises if it cannot."""
        self._store_recovery_checkpoint(meta, mac_state)
        old, self._recovery_checkpoint = self._recovery_checkpoint, idxterm((meta, mac_state))
        if old is not None and old != self._recovery_checkpoint:
            self._delete_recovery_checkpoint(old)

    def read_recovery_checkpoint(self) -> Snapshot | None:
        """The recovery checkpoint's ``(meta, machine_state)``; None if there is none
        or it cannot be read (a restart then replays the log instead)."""
        raise NotImplementedError

    def _store_recovery_checkpoint(self, meta: dict[str, Any], mac_state: Any) -> None:
        raise NotImplementedError

    def _delete_recovery_checkpoint(self, it: IdxTerm) -> None:
        raise NotImplementedError

    def _drop_recovery_checkpoint_upto(self, idx: int) -> None:
        """A snapshot at `idx` overtook the recovery checkpoint: it goes."""
        rc = self._recovery_checkpoint
        if rc is not None and rc[0] <= idx:
            self._recovery_checkpoint = None
            self._delete_recovery_checkpoint(rc)

    def pending_snapshot(self) -> tuple[str, IdxTerm] | None:
        if self._pending_snapshot is None:
            return None
        kind, snap = self._pending_snapshot
        return kind, idxterm(snap)

    def recovery_snapshot(self) -> Snapshot | None:
        """Newest of snapshot and checkpoints: what a restart recovers (``ra_snapshot``)."""
        best = self._snapshot
        if self._checkpoints:
            ckpt = self._checkpoints[-1]
            if best is None or idxterm(ckpt)[0] > idxterm(best)[0]:
                best = ckpt
        return best

    def can_write(self) -> bool:
        return self.wal_up

    def _check_append(self, idx: int) -> None:
        """A leader appends exactly the next index, and only while the WAL runs."""
        if idx != self.next_index():
            raise ValueError(f"append of {idx} but next index is {self.next_index()}")
        if not self.wal_up:
            raise WalDown()

    def _make_room(self, first: int) -> None:
        """Check a follower write starting at `first` (no gap after the log's end, nothing
        below its start, the WAL running) and drop the suffix it overwrites."""
        if first > self.next_index() or first < max(1, self._first):
            raise ValueError(f"write at {first} leaves a gap (next {self.next_index()})")
        if not self.wal_up:
            raise WalDown()
        if first < self.next_index():
            self._truncate_after(first - 1)

    def _truncate_after(self, idx: int) -> None:
        raise NotImplementedError

    def pending(self) -> ra_seq.Seq:
        return list(self._pending)

    # ---- snapshots and checkpoints (``ra_snapshot``) ----------------------------

    def update_release_cursor(
        self, idx: int, cluster: Any, mac_version: int, mac_state: Any,
        live: Iterable[int] = (),
    ) -> list[Any]:
        """``ra_log:update_release_cursor``: maybe start writing a snapshot at `idx`.

        One write at a time, and only when it is worth the copy of the state
        (`should_snapshot`). `live` are the machine's live indexes for
        `mac_state` (``ra_machine:live_indexes``): the entries the snapshot
        keeps below it.
        """
        if self._pending_snapshot is not None:
            return []
        if not self.should_snapshot(idx):
            return []
        meta = self._make_meta(idx, cluster, mac_version)
        if meta is None:
            return []
        return self._start_write(SNAPSHOT, meta, mac_state, live)

    def should_snapshot(self, idx: int) -> bool:
        """``ra_log:should_snapshot(snapshot, ...)``: whether a release cursor at `idx` snapshots.

        Either enough entries were applied since the current snapshot
        (``min_snapshot_interval``; with none yet, `idx` itself must exceed
        it), or segments exist and `idx` is past the first index they hold, so
        the snapshot may well let a segment file go even within the interval.
        """
        snap = self.snapshot_index_term()
        limit = (snap[0] if snap is not None else 0) + self.min_snapshot_interval
        first_seg = self.first_segment_index()
        return (first_seg is not None and idx > first_seg) or idx > limit

    def first_segment_index(self) -> int | None:
        """The lowest index of the segment files the log reads from (None: no segments)."""
        return None

    def checkpoint(self, idx: int, cluster: Any, mac_version: int, mac_state: Any,
                   live: Iterable[int] = ()) -> list[Any]:
        """``ra_log:checkpoint``: like a snapshot but never truncates, and no fsync."""
        if self._pending_snapshot is not None:
            return []
        if not idx > self.latest_checkpoint_index() + self.min_checkpoint_interval:
            return []
        meta = self._make_meta(idx, cluster, mac_version)
        if meta is None:
            return []
        return self._start_write(CHECKPOINT, meta, mac_state, live)

    def promote_checkpoint(self, idx: int) -> list[Any]:
        """``{release_cursor, Idx}``: turn the newest checkpoint <= `idx` into the snapshot.

        Only a snapshot being written holds a promotion back: a checkpoint
        still being written completes on its own (as ``ra_log:promote_checkpoint``).
        """
        pending = self._pending_snapshot
        if pending is not None and pending[0] == SNAPSHOT:
            return []
        snap = self.snapshot_index_term()
        snap_idx = snap[0] if snap is not None else 0
        chosen = None
        for ckpt in self._checkpoints:
            if snap_idx < idxterm(ckpt)[0] <= idx:
                chosen = ckpt
        if chosen is None:
            return []
        self._checkpoints.remove(chosen)
        self._pending_snapshot = (SNAPSHOT, chosen)
        it = idxterm(chosen)
        return [("bg_work", ("promote_checkpoint", it), ("snapshot_error", it, SNAPSHOT))]

    def _make_meta(self, idx: int, cluster: Any, mac_version: int) -> dict[str, Any] | None:
        term = self.fetch_term(idx)
        if term is None:
            return None
        return {"index": idx, "term": term, "cluster": cluster, "machine_version": mac_version}

    def _start_write(self, kind: str, meta: dict[str, Any], mac_state: Any,
                     live: Iterable[int] = ()) -> list[Any]:
        """Stage the one snapshot/checkpoint write; the driver runs the ``bg_work``.

        The job carries the live indexes (below the snapshot's index) as a fifth
        element when there are any, so the write keeps them with the snapshot."""
        self._pending_snapshot = (kind, (meta, mac_state))
        if kind == CHECKPOINT:
            self._checkpoint_in_flight = (meta, mac_state)
        it = (meta["index"], meta["term"])
        kept = sorted({int(i) for i in live if int(i) <= int(meta["index"])})
        if self._written_live is None:
            self._written_live = {}
        self._written_live[(int(it[0]), int(it[1]))] = kept
        job: tuple[Any, ...] = ("write_snapshot", kind, meta, mac_state)
        if kept:
            job = (*job, kept)
        return [("bg_work", job, ("snapshot_error", it, kind))]

    def _live_of(self, it: IdxTerm, reported: Iterable[int]) -> list[int]:
        """The live indexes of the snapshot written at `it`: as the write reported
        them, else as they were when it was started."""
        live = sorted(int(i) for i in reported)
        if not live and self._written_live is not None:
            live = list(self._written_live.get(it, []))
        return live

    def _forget_written_live(self, upto: int) -> None:
        if self._written_live:
            for key in [k for k in self._written_live if k[0] <= upto]:
                del self._written_live[key]

    def _snapshot_written(self, it: IdxTerm, kind: str, live: Iterable[int] = ()) -> list[Any]:
        """``snapshot_written``: adopt the write if it is still wanted, else delete it.

        A snapshot is adopted if it is the pending one and not below the log's
        first index; anything older was overtaken (a snapshot installed
        meanwhile) and its files go, as Ra deletes a stale snapshot. A
        checkpoint joins the list however the pending slot changed meanwhile (a
        promotion may have taken it), and the list is thinned
        (`thin_checkpoints`).
        """
        it = (int(it[0]), int(it[1]))
        pending = self._pending_snapshot
        if pending is not None and pending[0] == kind and idxterm(pending[1]) == it:
            self._pending_snapshot = None
        if kind == CHECKPOINT:
            ckpt = self._checkpoint_in_flight
            if ckpt is None or idxterm(ckpt) != it:
                # not the write under way: keep the files only of one the log holds
                if all(idxterm(c) != it for c in self._checkpoints):
                    self._delete_written(kind, it)
                return []
            self._checkpoint_in_flight = None
            if it[0] < self._first:
                self._delete_written(kind, it)  # below a snapshot taken meanwhile
                return []
            self._checkpoints.append(ckpt)
            for gone in thin_checkpoints(self._checkpoints, self.max_checkpoints):
                self._delete_written(CHECKPOINT, idxterm(gone))
            return []
        current = self.snapshot_index_term()
        if (pending is None or pending[0] != kind or idxterm(pending[1]) != it
                or it[0] < self._first or (current is not None and current[0] >= it[0])):
            if current != it:
                self._delete_written(kind, it)
            return []
        kept = self._live_of(it, live)
        effects = self._adopt_snapshot(pending[1], kept)
        self._forget_written_live(it[0])
        self._drop_recovery_checkpoint_upto(it[0])
        return effects

    def _adopt_snapshot(self, snap: Snapshot, live: list[int]) -> list[Any]:
        """A written snapshot becomes current: truncate the log below it, keeping
        the entries at `live` (storage-specific); returns effects."""
        raise NotImplementedError

    def _delete_written(self, kind: str, it: IdxTerm) -> None:
        """Drop the files of a snapshot or checkpoint the log does not keep."""
        return None

    # ---- log events -------------------------------------------------------------

    def handle_event(self, evt: Any) -> list[Any]:
        """Apply a ``ra_log_event`` body; returns effects."""
        match evt:
            case ("written", term, written_seq):
                self._handle_written(term, list(written_seq))
                return []
            case ("resend_write", idx):
                self._resend_from(idx)
                return []
            case ("snapshot_written", it, live, kind, *_):
                return self._snapshot_written(it, kind, live)
            case ("snapshot_error", it, kind, *_):
                if self.pending_snapshot() == (kind, tuple(it)):
                    self._pending_snapshot = None
                ckpt = self._checkpoint_in_flight
                if kind == CHECKPOINT and ckpt is not None and idxterm(ckpt) == tuple(it):
                    self._checkpoint_in_flight = None
                return []
        return self._handle_storage_event(evt)

    def _handle_storage_event(self, evt: Any) -> list[Any]:
        """An event only one storage knows (the disk log's ``segments``); else ignored."""
        return []

    def _handle_written(self, term: int, written_seq: ra_seq.Seq) -> None:
        below = ra_seq.limit(self._first - 1, written_seq)
        if below and self._pending and (ra_seq.first(self._pending) or 0) < self._first:
            # live entries a follower wrote sparsely before installing the snapshot
            # above them: durable now, no term to check below a snapshot
            done = set(ra_seq.iterate(below))
            self._pending = ra_seq.from_list(
                i for i in reversed(ra_seq.expand(self._pending)) if i not in done)
        # indexes at or below the snapshot are already covered by it
        written_seq = ra_seq.floor(self._first, written_seq)
        while written_seq:
            last = ra_seq.last(written_seq)
            assert last is not None
            if self.fetch_term(last) == term:
                if last > self._last_written[0]:
                    self._last_written = (last, term)
                rest = ra_seq.remove_prefix(written_seq, self._pending)
                if rest is None:
                    # the WAL confirmed something that is not what we sent
                    # first: a write went missing, send everything again
                    self._resend_pending()
                else:
                    self._pending = rest
                return
            # overwritten since: only the still-valid prefix is confirmed
            written_seq = ra_seq.limit(last - 1, written_seq)

    def _resend_pending(self) -> None:
        first = ra_seq.first(self._pending)
        if first is not None:
            self._resend_from(first)

    def _resend_from(self, idx: int) -> None:
        if idx < self.next_index():
            self._wal_out.extend(self._resend_writes(idx, self.next_index() - 1))

    def _resend_writes(self, first: int, last: int) -> list[WalWrite]:
        """The writes that send ``first..last`` again, each to the table that holds it."""
        return [(None, first - 1, self.fold(first, last))]

    # ---- driver side --------------------------------------------------------------

    def take_wal_writes(self) -> list[list[Entry]]:
        """The entries of `take_wal_appends`, batch by batch."""
        return [batch for _tid, _prev, batch in self.take_wal_appends()]

    def take_wal_appends(self) -> list[WalWrite]:
        """Writes to hand to the WAL since the last call (driver only), each
        ``(mem_table_id, prev_idx, entries)``.

        Contiguous writes into one table are joined (as Ra's ``begin_tx``/``commit_tx``):
        appends made while handling one event reach the WAL as one write.
        """
        out, self._wal_out = self._wal_out, []
        run, self.sent_run = self.sent_run, None
        if len(out) >= 2:
            out = self._joined(out)
        if run is not None and len(out) == 1:
            tid, prev, batch = out[0]
            if len(run) == len(batch) and run and run[0] is batch[0] and run[-1] is batch[-1]:
                # the same entries went out packed in this event's AppendEntries:
                # the WAL record reuses their pickle (`ra.packed`)
                out = [(tid, prev, run)]
        return out

    @staticmethod
    def _joined(out: list[WalWrite]) -> list[WalWrite]:
        joined: list[WalWrite] = []
        owned = False  # joined[-1]'s list is our own (callers' lists are not extended)
        for tid, prev, batch in out:
            if joined and batch and joined[-1][2] and joined[-1][0] == tid \
                    and batch[0][0] == joined[-1][2][-1][0] + 1:
                j_tid, j_prev, j_batch = joined[-1]
                if not owned:
                    j_batch, owned = list(j_batch), True
                    joined[-1] = (j_tid, j_prev, j_batch)
                j_batch.extend(batch)
            else:
                joined.append((tid, prev, batch))
                owned = False
        return joined
