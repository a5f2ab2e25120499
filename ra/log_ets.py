"""Node-wide log tables shared by the servers, the WAL and the segment writer.

Ra keeps these in ETS tables owned by ``ra_log_ets`` one level above the WAL
in the supervision tree, so they outlive a WAL or server crash: the mem tables
(a server's entries that no segment holds yet), the ``ra_log_snapshot_state``
table (the smallest index each server still needs, read by the WAL to drop
writes below a snapshot) and the uid → pid part of ``ra_directory``. warren's
processes of one node share one OS process and one gevent hub, so plain
objects play the part of the ETS tables; only the node's log processes and its
servers touch them, always from greenlets of that hub.

A mem table (`MemTable`, Ra's ``ra_mt``) belongs to the server's log: the log
inserts each entry once, before it hands the write to the WAL, and reads it
from there until a segment holds it; the WAL only records which table each
entry it wrote went into. An index is never written twice into one table: an
overwrite (a follower's conflicting suffix, ``set_last_index``) opens a
successor table whose ``prev`` is the old one, so a table's rows never change
once written and the segment writer can flush a closed WAL file's tables
while the server writes on. A table shadows its predecessors from its first
index on; predecessors stay readable below it until their rows are flushed.
Rows leave when the server hears of the segments that hold them (or the
segment writer, when the server is not running), or when a snapshot covers
them.
"""

from __future__ import annotations

import itertools
from typing import Any

from ra import seq as ra_seq
from ra.types import Entry

#: a deleted or never-written slot of a table
_HOLE = None
#: Ra's ``?MAX_MEMTBL_ENTRIES``: a table holding more rows takes no more; the log
#: opens a successor, as for an overwrite
MAX_MEM_TABLE_ENTRIES = 1_000_000


class MemTable:
    """One table of a server's unflushed entries (Ra's ``ra_mt`` over one ETS table).

    Entries are kept in a list indexed from ``base``: the log's entries are a
    run of consecutive indexes, so a slot costs one pointer. A sparse write
    leaves holes. Rows are only ever added above ``last`` and removed from the
    bottom (flushed, or below a snapshot) or by index."""

    __slots__ = ("_base", "_low", "_slots", "last", "prev", "size", "start", "tid", "uid")

    def __init__(self, tid: int, uid: str, prev: MemTable | None = None) -> None:
        self.tid = tid
        self.uid = uid
        #: the table this one succeeded (its rows below ``start`` are still the log's)
        self.prev = prev
        #: first index ever inserted: this table shadows older ones from here on
        self.start: int | None = None
        #: highest index inserted (-1: none)
        self.last = -1
        #: rows present
        self.size = 0
        self._base = 0
        #: no row below this index is present
        self._low = 0
        self._slots: list[Entry | None] = []

    # ---- writes ---------------------------------------------------------------

    def insert(self, entry: Entry) -> bool:
        """Add `entry` above every index written so far; False if its index is
        not above ``last`` (``{error, overwriting}``) or the table is full
        (``{error, limit_reached}``): the caller opens a successor."""
        idx = entry[0]
        last = self.last
        if idx <= last or self.size > MAX_MEM_TABLE_ENTRIES:
            return False
        slots = self._slots
        if self.start is None:
            self.start = idx
        if not slots:
            self._base = self._low = idx
        elif idx != last + 1:
            slots.extend([_HOLE] * (idx - last - 1))
        slots.append(entry)
        self.last = idx
        self.size += 1
        return True

    def delete_below(self, idx: int) -> None:
        """Remove every row below `idx`."""
        if idx <= self._low or self.start is None:
            return
        slots, base = self._slots, self._base
        lo, hi = self._low - base, min(idx - base, len(slots))
        for i in range(lo, hi):
            if slots[i] is not _HOLE:
                slots[i] = _HOLE
                self.size -= 1
        self._low = idx
        drop = min(idx - base, len(slots))
        if self.size == 0:
            slots.clear()
        elif drop > 1024 and drop * 2 > len(slots):
            # compact: the list shrinks with what was flushed (amortised, like a deque)
            del slots[:drop]
            self._base += drop

    def delete_seq(self, seq: ra_seq.Seq) -> None:
        """Remove the rows of `seq` (the segment writer's delete for a stopped server)."""
        for idx in ra_seq.iterate(seq):
            i = idx - self._base
            if 0 <= i < len(self._slots) and self._slots[i] is not _HOLE:
                self._slots[i] = _HOLE
                self.size -= 1
        if self.size == 0:
            self._slots.clear()

    # ---- reads ------------------------------------------------------------------

    def get(self, idx: int) -> Entry | None:
        """This table's own row at `idx` (None: absent), ignoring predecessors."""
        i = idx - self._base
        if 0 <= i < len(self._slots):
            return self._slots[i]
        return None

    def lookup(self, idx: int) -> Entry | None:
        """The log's entry at `idx` held in memory (``ra_mt:lookup``): the newest table
        whose range reaches `idx` decides; None means a segment holds it."""
        table: MemTable | None = self
        while table is not None:
            start = table.start
            if start is not None and idx >= start:
                return table.get(idx)
            table = table.prev
        return None

    def slice(self, first: int, last: int) -> list[Entry] | None:
        """Rows ``first..last`` of this table when it holds every one of them, else None."""
        start = self.start
        if start is None or first < start or last > self.last:
            return None
        chunk = self._slots[first - self._base:last - self._base + 1]
        if len(chunk) != last - first + 1 or _HOLE in chunk:
            return None
        return chunk  # type: ignore[return-value]

    def entries(self, floor: int = 0) -> list[Entry]:
        """Every row at or above `floor`, in index order."""
        lo = max(floor, self._low) - self._base
        return [e for e in self._slots[max(lo, 0):] if e is not _HOLE]

    def entries_of(self, seq: ra_seq.Seq) -> list[Entry]:
        """The rows of `seq` present in this table, in index order."""
        out: list[Entry] = []
        for idx in ra_seq.iterate(seq):
            entry = self.get(idx)
            if entry is not None:
                out.append(entry)
        return out

    def first_row(self) -> int | None:
        """Lowest index present (None: empty)."""
        if self.size == 0:
            return None
        slots, base = self._slots, self._base
        for i in range(max(self._low - base, 0), len(slots)):
            if slots[i] is not _HOLE:
                return base + i
        return None

    def tid_for(self, idx: int, term: int) -> int | None:
        """The table of this chain holding ``(idx, term)`` (``ra_mt:tid_for``)."""
        table: MemTable | None = self
        while table is not None:
            entry = table.get(idx)
            if entry is not None and entry[1] == term:
                return table.tid
            table = table.prev
        return None

    def chain(self) -> list[MemTable]:
        """This table and its predecessors, newest first."""
        out: list[MemTable] = []
        table: MemTable | None = self
        while table is not None:
            out.append(table)
            table = table.prev
        return out

    def chain_size(self) -> int:
        return sum(t.size for t in self.chain())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        prev = None if self.prev is None else self.prev.tid
        return (f"MemTable(tid={self.tid}, uid={self.uid!r}, start={self.start}, "
                f"last={self.last}, size={self.size}, prev={prev})")


class LogEts:
    """The tables of one node's Ra system (``ra_log_ets`` and friends)."""

    def __init__(self) -> None:
        #: uid -> the server's current mem table (the newest; older ones hang off ``prev``)
        self.mem_tables: dict[str, MemTable] = {}
        #: tid -> table, every table not yet deleted
        self.tables: dict[int, MemTable] = {}
        self._tids = itertools.count(1)
        #: uid -> smallest index the server still needs (snapshot index + 1)
        self.snapshot_state: dict[str, int] = {}
        #: uid -> pid of the server process that last wrote for it
        self.directory: dict[str, Any] = {}
        #: a WAL has recovered into these tables since they were made: a restarted WAL
        #: leaves the tables as the servers keep them and only finds its ranges in them
        self.wal_recovered = False

    # ---- mem tables (``ra_log_ets:mem_table_please``) ---------------------------

    def mem_table_please(self, uid: str) -> MemTable:
        """The current table of `uid`, made if it has none."""
        table = self.mem_tables.get(uid)
        if table is None:
            table = self._new(uid, None)
        return table

    def new_mem_table_please(self, uid: str) -> MemTable:
        """A successor of the current table of `uid`: it becomes the current one."""
        return self._new(uid, self.mem_tables.get(uid))

    def _new(self, uid: str, prev: MemTable | None) -> MemTable:
        table = MemTable(next(self._tids), uid, prev)
        self.tables[table.tid] = table
        self.mem_tables[uid] = table
        return table

    def table(self, tid: int) -> MemTable | None:
        return self.tables.get(tid)

    def mem_table(self, uid: str) -> MemTable:
        """Alias of `mem_table_please` for readers."""
        return self.mem_table_please(uid)

    def record_flushed(self, uid: str, tid: int, seq: ra_seq.Seq) -> None:
        """``ra_mt:record_flushed``: `seq` of table `tid` is in segments. Indexes
        are written in order, so every row of that table up to the seq's last
        index goes, and every row of the older tables up to it as well (they
        are flushed or overwritten); emptied older tables are deleted."""
        end = ra_seq.last(seq)
        head = self.mem_tables.get(uid)
        if end is None or head is None:
            return
        found = False
        for table in head.chain():
            if table.tid == tid:
                found = True
            if found:
                table.delete_below(end + 1)
        if found:
            self._prune(head)

    def set_first(self, uid: str, idx: int) -> None:
        """``ra_mt:set_first``: rows below `idx` (at or below a snapshot) go from every table."""
        head = self.mem_tables.get(uid)
        if head is None:
            return
        for table in head.chain():
            table.delete_below(idx)
        self._prune(head)

    def delete_flushed(self, uid: str, tid: int, seq: ra_seq.Seq) -> None:
        """The segment writer's delete for a server that is not running: exactly the rows
        it flushed (``ra_mt:delete({indexes, Tid, Seq})``)."""
        table = self.tables.get(tid)
        if table is not None:
            table.delete_seq(seq)
            head = self.mem_tables.get(uid)
            if head is not None:
                self._prune(head)

    def _prune(self, head: MemTable) -> None:
        """Unlink and delete the emptied predecessors of `head`."""
        table = head
        while table.prev is not None:
            older = table.prev
            if older.size == 0:
                table.prev = older.prev
                self.tables.pop(older.tid, None)
            else:
                table = older

    def delete_mem_tables(self, uid: str) -> None:
        head = self.mem_tables.pop(uid, None)
        if head is not None:
            for table in head.chain():
                self.tables.pop(table.tid, None)

    def reset_mem_tables(self) -> None:
        """Forget every table (a node restart): a WAL that recovers rebuilds them."""
        self.mem_tables.clear()
        self.tables.clear()
        self.wal_recovered = False

    # ---- snapshot state and directory ---------------------------------------------

    def smallest_live_index(self, uid: str) -> int:
        """0 when unknown, as ``ra_log_snapshot_state:smallest/2``."""
        return self.snapshot_state.get(uid, 0)

    def set_snapshot_index(self, uid: str, snap_idx: int, smallest: int | None = None) -> None:
        """Record a snapshot at `snap_idx`; `smallest` is its smallest live index
        when it keeps entries below it (the WAL and the segment writer keep
        everything from there on)."""
        self.snapshot_state[uid] = snap_idx + 1 if smallest is None else min(smallest,
                                                                             snap_idx + 1)

    def register(self, uid: str, pid: Any) -> None:
        """Name the process that receives this uid's log events."""
        self.directory[uid] = pid

    def whereis(self, uid: str) -> Any:
        return self.directory.get(uid)
