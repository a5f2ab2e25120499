"""An in-memory WAL writer process speaking Ra's WAL protocol.

One per node, registered as ``ra_log_wal`` (or the system's configured
name). Ra servers send ``("append", uid, writer_pid, mem_table_id, prev_idx,
entries)`` (the in-memory log has no mem tables: its id is None) and later
receive ``("ra_log_event", ("written", term, seq))`` for what was written,
or ``("ra_log_event", ("resend_write", idx))`` when a gap shows a write went
missing. Like the disk WAL it is a `gen_batch_server`: the appends that
queued while it worked arrive in one batch, and it answers
each writer once per term run of that batch, which is what gives Ra its
natural batching of follower replies. "Written" here means stored in the
system's `MemoryDisk`, which survives server and WAL restarts.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_batch_server
from actors.gen_batch_server import GenBatchServer
from ra import seq as ra_seq
from ra.memory_disk import MemoryDisk
from ra.types import Entry

#: Ra's ``wal_max_batch_size``.
DEFAULT_MAX_BATCH_SIZE = 8192
DEFAULT_NAME = "ra_log_wal"


def start_link(disk: MemoryDisk, name: str = DEFAULT_NAME,
               max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> Any:
    """Start the WAL linked to the caller (a supervisor); ``("ok", pid)``.

    Every batch may be as large as `max_batch_size` from the start: the
    whole mailbox, up to that cap, is one batch."""
    return gen_batch_server.start_link(MemoryWal, (disk, max_batch_size), name=name,
                                       min_batch_size=max_batch_size,
                                       max_batch_size=max_batch_size)


class MemoryWal(GenBatchServer):
    """The batch server's callbacks; all state lives in the disk object."""

    def init(self, args: tuple[MemoryDisk, int]) -> Any:
        disk, max_batch_size = args
        self.disk = disk
        self.max_batch_size = max_batch_size
        return ("ok", disk)

    def handle_batch(self, ops: list[Any], state: MemoryDisk) -> Any:
        #: writer pid -> [(term, [idx, ...])] runs in write order
        written: dict[Any, list[tuple[int, list[int]]]] = {}
        replies: list[Any] = []
        for op in ops:
            match op:
                case ("info", ("append", uid, writer, _tid, prev_idx, entries)):
                    self._append(uid, writer, prev_idx, entries, written.setdefault(writer, []))
                case ("call", from_, ("last_writer_seq", uid)):
                    wlog = self.disk.wal.get(uid)
                    replies.append(("reply", from_, wlog.last if wlog is not None else None))
        for writer, runs in written.items():
            for term, idxs in runs:
                actors.send(writer, ("ra_log_event", ("written", term, ra_seq.from_list(idxs))))
        return ("ok", replies, state)

    def _append(self, uid: str, writer: Any, prev_idx: int, entries: list[Entry],
                runs: list[tuple[int, list[int]]]) -> None:
        """Each entry checked as the disk WAL checks it: its previous index is
        `prev_idx` for the first, the entry before it for the others."""
        disk = self.disk
        known = uid in disk.wal
        wlog = disk.writer(uid)
        smallest = disk.smallest_live_index(uid)
        prev = prev_idx
        for entry in entries:
            idx, term, _ = entry
            entry_prev, prev = prev, idx
            if idx < smallest:
                # below the snapshot: not needed, and the writer is in sequence up to it
                wlog.seq_state, wlog.last = "in_seq", max(wlog.last, smallest - 1)
                continue
            if known and (entry_prev <= wlog.last or idx == smallest):
                wlog.seq_state = "in_seq"
            elif not known:
                known = True
            elif wlog.seq_state == "out_of_seq":
                continue
            else:
                actors.send(writer, ("ra_log_event", ("resend_write", wlog.last + 1)))
                wlog.seq_state = "out_of_seq"
                continue
            wlog.write(entry)
            if runs and runs[-1][0] == term and runs[-1][1][-1] < idx:
                runs[-1][1].append(idx)
            else:
                runs.append((term, [idx]))
