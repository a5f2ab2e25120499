"""Node-wide log tables shared by the WAL, the segment writer and the servers.

Ra keeps these in ETS tables owned by ``ra_log_ets`` one level above the WAL
in the supervision tree, so they outlive a WAL or server crash: the
memtables (what WAL files hold that no segment holds yet), the
``ra_log_snapshot_state`` table (the smallest index each server still needs,
read by the WAL to drop writes below a snapshot) and the uid → pid part of
``ra_directory``. warren's processes of one node share one OS process and one
gevent hub, so plain objects play the part of the ETS tables; only the node's
log processes and its servers touch them, always from greenlets of that hub.

A memtable is kept per WAL file ("view"), so the segment writer can flush
exactly one closed file and the file can then be deleted. A write at an index
at or below the last one truncates every view at that index first: that is
the only way an overwrite reaches the WAL, and replaying views in file order
after segments therefore reproduces the log.
"""

from __future__ import annotations

from typing import Any

from ra.types import Entry


class MemTable:
    """One server's entries that are in WAL files and not yet in segments."""

    __slots__ = ("last", "views")

    def __init__(self) -> None:
        #: WAL file number -> index -> entry; insertion order is file order
        self.views: dict[int, dict[int, Entry]] = {}
        #: highest index inserted so far (an upper bound once views are dropped)
        self.last = -1

    def insert(self, file_no: int, entries: list[Entry]) -> None:
        """Record a contiguous batch written to WAL file `file_no`."""
        if not entries:
            return
        first = entries[0][0]
        if first <= self.last:
            for older in self.views.values():
                for idx in [i for i in older if i >= first]:
                    del older[idx]
        view = self.views.get(file_no)
        if view is None:
            view = self.views[file_no] = {}
        for entry in entries:
            view[entry[0]] = entry
        self.last = entries[-1][0]

    def view_entries(self, file_no: int, floor: int = 0) -> list[Entry]:
        """The entries of one file's view at or above `floor`, in index order."""
        view = self.views.get(file_no, {})
        return [view[i] for i in sorted(view) if i >= floor]

    def copy_views(self) -> list[list[Entry]]:
        """Every non-empty view, oldest file first (what a restarting server replays)."""
        return [[v[i] for i in sorted(v)] for v in self.views.values() if v]

    def drop(self, file_no: int) -> None:
        self.views.pop(file_no, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self.views.values())


class LogEts:
    """The tables of one node's Ra system (``ra_log_ets`` and friends)."""

    def __init__(self) -> None:
        self.mem_tables: dict[str, MemTable] = {}
        #: uid -> smallest index the server still needs (snapshot index + 1)
        self.snapshot_state: dict[str, int] = {}
        #: uid -> pid of the server process that last wrote for it
        self.directory: dict[str, Any] = {}

    def mem_table(self, uid: str) -> MemTable:
        table = self.mem_tables.get(uid)
        if table is None:
            table = self.mem_tables[uid] = MemTable()
        return table

    def smallest_live_index(self, uid: str) -> int:
        """0 when unknown, as ``ra_log_snapshot_state:smallest/2``."""
        return self.snapshot_state.get(uid, 0)

    def set_snapshot_index(self, uid: str, snap_idx: int) -> None:
        self.snapshot_state[uid] = snap_idx + 1

    def register(self, uid: str, pid: Any) -> None:
        """Name the process that receives this uid's log events."""
        self.directory[uid] = pid

    def whereis(self, uid: str) -> Any:
        return self.directory.get(uid)

    def reset_mem_tables(self) -> None:
        """Forget every view: a WAL that recovers rebuilds them from its files."""
        for table in self.mem_tables.values():
            table.views.clear()
