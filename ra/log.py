"""An in-memory `ra_log` for the pure server core.

The server never touches a disk: it asks its log to append/write entries and
later receives ``("ra_log_event", ("written", term, seq))`` events telling it
which of them the WAL has fsynced. That asynchrony is central to Ra: a
follower acknowledges only *written* entries and a leader counts only its own
*written* index towards the commit quorum. This class keeps exactly that
bookkeeping (`last_written`, `pending`) and hands the writes it would send to
the WAL to whoever drives it, through `take_wal_writes`.

Snapshots and checkpoints (``ra_snapshot``) are held as values ``(meta, state)``.
Writing one is asynchronous too: the log returns a ``bg_work`` effect and
only truncates once the driver answers with ``snapshot_written``, so a crash
between the two leaves the log whole. A snapshot whose machine keeps live
indexes keeps the entries at those indexes below it (`fetch` still finds
them); there are no segments to compact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ra import seq as ra_seq
from ra.log_base import LogBase, Snapshot, WalWrite, idxterm
from ra.log_base import WalDown as WalDown  # re-exported: the logs' own exception
from ra.packed import own_batch
from ra.types import DUMMY_ENTRY, Entry, IdxTerm

#: ``log_init_args`` defaults (Ra's ``ra_log:init/1``).
DEFAULT_MIN_SNAPSHOT_INTERVAL = 4096
DEFAULT_MIN_CHECKPOINT_INTERVAL = 16384
DEFAULT_MAX_CHECKPOINTS = 10




class CorruptLog(ValueError):
    """The log does not start right after the snapshot (``corrupt_log``)."""


class MemoryLog(LogBase):
    """Log entries held in a list; ``_entries[0]`` has index ``_first``.

    A fresh log starts at the dummy entry 0. Once a snapshot at ``S`` is
    written (or installed), entries up to ``S`` are dropped and the log
    starts at ``S + 1``; `fetch` then answers ``None`` below that.
    """

    def __init__(
        self,
        entries: list[Entry] | None = None,
        written_upto: int | None = None,
        *,
        snapshot: Snapshot | None = None,
        checkpoints: list[Snapshot] | None = None,
        min_snapshot_interval: int = DEFAULT_MIN_SNAPSHOT_INTERVAL,
        min_checkpoint_interval: int = DEFAULT_MIN_CHECKPOINT_INTERVAL,
        max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS,
        recovery_checkpoint: Snapshot | None = None,
        live_entries: list[Entry] | None = None,
    ) -> None:
        self.min_snapshot_interval = min_snapshot_interval
        #: the recovery checkpoint's value (its ``(index, term)`` is `_recovery_checkpoint`)
        self._rc_value = recovery_checkpoint
        if recovery_checkpoint is not None:
            self._recovery_checkpoint = idxterm(recovery_checkpoint)
        self.min_checkpoint_interval = min_checkpoint_interval
        self.max_checkpoints = max_checkpoints
        self._snapshot: Snapshot | None = snapshot
        self._checkpoints: list[Snapshot] = sorted(
            checkpoints or [], key=lambda c: int(c[0]["index"])
        )
        #: the one snapshot/checkpoint write in flight: ``(kind, (meta, state))``
        self._pending_snapshot: tuple[str, Snapshot] | None = None
        #: entries kept below the snapshot at its live indexes
        self._live_entries: dict[int, Entry] = {e[0]: e for e in live_entries or []}
        self._live = sorted(self._live_entries)
        #: entries written sparsely while receiving a snapshot, until it is installed
        self._sparse: dict[int, Entry] = {}
        if snapshot is None:
            self._first = 0
            self._entries: list[Entry] = [DUMMY_ENTRY]
        else:
            snap_idx = int(snapshot[0]["index"])
            self._first = snap_idx + 1
            self._entries = []
            entries = [e for e in entries or [] if e[0] > snap_idx]
            if entries and entries[0][0] != snap_idx + 1:
                raise CorruptLog(f"log starts at {entries[0][0]}, snapshot at {snap_idx}")
        for entry in entries or []:
            if entry[0] != self.next_index():
                raise ValueError(f"non-contiguous initial entry {entry[0]}")
            self._entries.append(entry)
        last = self.next_index() - 1
        lw = last if written_upto is None else max(min(written_upto, last), self._first - 1)
        self._last_written: IdxTerm = (lw, self._term_or_snapshot(lw))
        self._pending: ra_seq.Seq = ra_seq.from_list(range(lw + 1, last + 1))
        #: batches of entries handed to the WAL and not yet taken by the driver
        self._wal_out: list[WalWrite] = []
        self.wal_up = True
        if lw < last:
            self._wal_out.append((None, lw, self.fold(lw + 1, last)))

    # ---- queries ---------------------------------------------------------

    def next_index(self) -> int:
        return self._first + len(self._entries)

    def first_index(self) -> int:
        """Lowest index still held as an entry (``snapshot index + 1`` once truncated)."""
        return self._first

    def last_index_term(self) -> IdxTerm:
        if self._sparse:
            idx, term, _ = self._sparse[max(self._sparse)]
            return (idx, term)
        if self._entries:
            idx, term, _ = self._entries[-1]
            return (idx, term)
        snap = self.snapshot_index_term()
        assert snap is not None, "empty log without a snapshot"
        return snap

    def is_new(self) -> bool:
        """Only the dummy entry and no snapshot: such a server waits for
        ``trigger_election`` instead of arming an election timer."""
        return self._snapshot is None and self._first == 0 and len(self._entries) == 1

    def fetch(self, idx: int) -> Entry | None:
        pos = idx - self._first
        if 0 <= pos < len(self._entries):
            return self._entries[pos]
        if pos < 0 and self._live_entries:
            return self._live_entries.get(idx) if self.is_live(idx) else None
        return self._sparse.get(idx) if self._sparse else None

    def fetch_term(self, idx: int) -> int | None:
        """The term at `idx` within the log's range (not of live entries below it)."""
        pos = idx - self._first
        if 0 <= pos < len(self._entries):
            return self._entries[pos][1]
        entry = self._sparse.get(idx) if self._sparse else None
        return entry[1] if entry is not None else None

    def live_entries(self) -> list[Entry]:
        """The entries kept below the snapshot, ascending (what a restart keeps)."""
        return [self._live_entries[i] for i in self._live if i in self._live_entries]

    def fold(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive (clipped to what the log holds)."""
        lo = max(first, self._first) - self._first
        hi = last + 1 - self._first
        return self._entries[lo:hi] if hi > lo else []

    # ---- mutations -------------------------------------------------------

    def append(self, entry: Entry) -> None:
        """Leader append of one entry, which must be ``last + 1``."""
        idx = entry[0]
        self._check_append(idx)
        self._entries.append(entry)
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append((None, idx - 1, [entry]))

    def write(self, entries: Sequence[Entry]) -> None:
        """Follower write of a batch; a first index at or below the last one
        overwrites the conflicting suffix."""
        if not entries:
            return
        prev = self.next_index() - 1
        self._make_room(entries[0][0])
        for entry in entries:
            self._entries.append(entry)
            self._pending = ra_seq.append(entry[0], self._pending)
        self._wal_out.append((None, prev, own_batch(entries)))

    def write_sparse(self, entry: Entry) -> None:
        idx = entry[0]
        if idx <= self.next_index() - 1 or idx <= max(self._sparse or [0]):
            raise ValueError(f"sparse write of {idx} not above the log's end")
        if not self.wal_up:
            raise WalDown()
        prev = max([self.next_index() - 1, *self._sparse])
        self._sparse[idx] = entry
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append((None, prev, [entry]))

    def set_last_index(self, idx: int) -> None:
        """Force the end of the log back to `idx` (an empty AER's reset,
        a snapshot's ``init`` or abort, as ``ra_log:set_last_index/2`` does)."""
        if self._sparse:
            self._sparse = {i: e for i, e in self._sparse.items() if i <= idx}
            self._pending = ra_seq.limit(idx, self._pending)
        if idx < self.next_index() - 1:
            self._truncate_after(idx)

    def _truncate_after(self, idx: int) -> None:
        # last_written is pulled down at once so a follower never reports
        # unpersisted (or overwritten) entries as written (Ra's WAL-driven follower replies).
        assert idx >= self._first - 1, f"truncating into the snapshot at {idx}"
        del self._entries[idx + 1 - self._first:]
        if self._last_written[0] > idx:
            self._last_written = (idx, self._term_or_snapshot(idx))
        self._pending = ra_seq.limit(idx, self._pending)

    # ---- snapshots and checkpoints (``ra_snapshot``) ---------------------

    def install_snapshot(self, meta: dict[str, Any], mac_state: Any,
                         live: list[int] | None = None) -> list[Any]:
        """A follower installs a received snapshot: the whole range goes, as in
        ``ra_log``, except the entries at its live indexes (its own, or written
        sparsely from the sender)."""
        idx, term = int(meta["index"]), int(meta["term"])
        self._keep_live(sorted(i for i in live or [] if i <= idx))
        self._sparse = {}
        self._snapshot = (meta, mac_state)
        self._checkpoints = [c for c in self._checkpoints if int(c[0]["index"]) > idx]
        self._first = idx + 1
        self._entries = []
        self._last_written = (idx, term)
        self._pending = ra_seq.floor(self.smallest_live_index(), self._pending)
        if self._pending_snapshot is not None:
            p_idx = int(self._pending_snapshot[1][0]["index"])
            if p_idx <= idx:
                self._pending_snapshot = None
        return []

    def read_recovery_checkpoint(self) -> Snapshot | None:
        return self._rc_value if self._recovery_checkpoint is not None else None

    def _store_recovery_checkpoint(self, meta: dict[str, Any], mac_state: Any) -> None:
        self._rc_value = (meta, mac_state)

    def _delete_recovery_checkpoint(self, it: IdxTerm) -> None:
        if self._rc_value is not None and idxterm(self._rc_value) == it:
            self._rc_value = None

    def _keep_live(self, live: list[int]) -> None:
        """Keep the entries at `live` (held in the log, kept already, or written
        sparsely) as the entries below the next snapshot."""
        kept: dict[int, Entry] = {}
        for i in live:
            entry = self.fetch(i) or self._live_entries.get(i) or self._sparse.get(i)
            if entry is not None:
                kept[i] = entry
        self._live_entries = kept
        self._live = live

    def _adopt_snapshot(self, snap: Snapshot, live: list[int]) -> list[Any]:
        meta = snap[0]
        idx = int(meta["index"])
        self._keep_live(live)
        self._snapshot = snap
        self._checkpoints = [c for c in self._checkpoints if int(c[0]["index"]) > idx]
        if idx >= self.next_index():
            self._entries = []
        else:
            del self._entries[: max(0, idx + 1 - self._first)]
        self._first = idx + 1
        if self._last_written[0] < idx:
            self._last_written = (idx, int(meta["term"]))
        self._pending = ra_seq.floor(idx + 1, self._pending)
        return []

    # ---- driver side -----------------------------------------------------

