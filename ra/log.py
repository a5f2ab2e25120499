"""An in-memory `ra_log` for the pure server core.

The server never touches a disk: it asks its log to append/write entries and
later receives ``("ra_log_event", ("written", term, seq))`` events telling it
which of them the WAL has fsynced. That asynchrony is central to Ra: a
follower acknowledges only *written* entries and a leader counts only its own
*written* index towards the commit quorum. This class keeps exactly that
bookkeeping (`last_written`, `pending`) and hands the writes it would send to
the WAL to whoever drives it, through `take_wal_writes`.

Snapshots are not modelled yet: `snapshot_index_term` is always ``None``.
"""

from __future__ import annotations

from typing import Any

from ra import seq as ra_seq
from ra.types import DUMMY_ENTRY, Entry, IdxTerm


class WalDown(Exception):
    """The WAL is not running: the write was not accepted (``wal_down``)."""


class MemoryLog:
    """Log entries held in a list indexed by Raft index (index 0 is the dummy)."""

    def __init__(self, entries: list[Entry] | None = None, written_upto: int | None = None) -> None:
        self._entries: list[Entry] = [DUMMY_ENTRY]
        for entry in entries or []:
            if entry[0] != len(self._entries):
                raise ValueError(f"non-contiguous initial entry {entry[0]}")
            self._entries.append(entry)
        last = len(self._entries) - 1
        lw = last if written_upto is None else min(written_upto, last)
        self._last_written: IdxTerm = (lw, self._entries[lw][1])
        self._pending: ra_seq.Seq = ra_seq.from_list(range(lw + 1, last + 1))
        #: batches of entries handed to the WAL and not yet taken by the driver
        self._wal_out: list[list[Entry]] = []
        self.wal_up = True
        if lw < last:
            self._wal_out.append(list(self._entries[lw + 1:]))

    # ---- queries ---------------------------------------------------------

    def next_index(self) -> int:
        return len(self._entries)

    def last_index_term(self) -> IdxTerm:
        idx, term, _ = self._entries[-1]
        return (idx, term)

    def last_written(self) -> IdxTerm:
        return self._last_written

    def is_new(self) -> bool:
        """Only the dummy entry and no snapshot: such a server waits for
        ``trigger_election`` instead of arming an election timer."""
        return len(self._entries) == 1

    def fetch(self, idx: int) -> Entry | None:
        if 0 <= idx < len(self._entries):
            return self._entries[idx]
        return None

    def fetch_term(self, idx: int) -> int | None:
        if 0 <= idx < len(self._entries):
            return self._entries[idx][1]
        return None

    def exists(self, idx: int, term: int) -> bool:
        return self.fetch_term(idx) == term

    def fold(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive (clipped to what the log holds)."""
        first = max(first, 0)
        return self._entries[first:last + 1] if last >= first else []

    def snapshot_index_term(self) -> IdxTerm | None:
        return None

    def can_write(self) -> bool:
        return self.wal_up

    def pending(self) -> ra_seq.Seq:
        return list(self._pending)

    # ---- mutations -------------------------------------------------------

    def append(self, entry: Entry) -> None:
        """Leader append of one entry, which must be ``last + 1``."""
        idx = entry[0]
        if idx != len(self._entries):
            raise ValueError(f"append of {idx} but next index is {len(self._entries)}")
        if not self.wal_up:
            raise WalDown()
        self._entries.append(entry)
        self._pending = ra_seq.append(idx, self._pending)
        self._wal_out.append([entry])

    def write(self, entries: list[Entry]) -> None:
        """Follower write of a batch; a first index at or below the last one
        overwrites the conflicting suffix."""
        if not entries:
            return
        first = entries[0][0]
        if first > len(self._entries) or first < 1:
            raise ValueError(f"write at {first} leaves a gap (next {len(self._entries)})")
        if not self.wal_up:
            raise WalDown()
        if first < len(self._entries):
            self._truncate_after(first - 1)
        for entry in entries:
            self._entries.append(entry)
            self._pending = ra_seq.append(entry[0], self._pending)
        self._wal_out.append(list(entries))

    def set_last_index(self, idx: int) -> None:
        """Force the end of the log back to `idx` (empty-AER reset, §16.2)."""
        if idx < len(self._entries) - 1:
            self._truncate_after(idx)

    def _truncate_after(self, idx: int) -> None:
        # last_written is pulled down at once so a follower never reports
        # unpersisted (or overwritten) entries as written (§7.4).
        del self._entries[idx + 1:]
        if self._last_written[0] > idx:
            self._last_written = (idx, self._entries[idx][1])
        self._pending = ra_seq.limit(idx, self._pending)

    def handle_event(self, evt: Any) -> list[Any]:
        """Apply a ``ra_log_event`` body; returns effects (none for now)."""
        match evt:
            case ("written", term, written_seq):
                self._handle_written(term, list(written_seq))
                return []
            case ("resend_write", idx):
                self._resend_from(idx)
                return []
        return []

    def _handle_written(self, term: int, written_seq: ra_seq.Seq) -> None:
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
        if idx < len(self._entries):
            self._wal_out.append(list(self._entries[idx:]))

    # ---- driver side -----------------------------------------------------

    def take_wal_writes(self) -> list[list[Entry]]:
        """Batches to hand to the WAL since the last call (driver only)."""
        out, self._wal_out = self._wal_out, []
        return out
