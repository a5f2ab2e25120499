"""An in-memory WAL writer process speaking Ra's WAL protocol.

One per node, registered as ``ra_log_wal`` (or the system's configured
name). Ra servers send ``("append", uid, writer_pid, entries)`` and later
receive ``("ra_log_event", ("written", term, seq))`` for what was written,
or ``("ra_log_event", ("resend_write", idx))`` when a gap shows a write went
missing. Like the disk WAL it drains its mailbox into one batch and answers
each writer once per term run of that batch, which is what gives Ra its
natural batching of follower replies. "Written" here means stored in the
system's `MemoryDisk`, which survives server and WAL restarts.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen
from actors.pid import Pid, Ref
from actors.process import Process
from ra import seq as ra_seq
from ra.memory_disk import MemoryDisk
from ra.types import Entry

#: ``wal_max_batch_size`` (spec §21.1).
DEFAULT_MAX_BATCH_SIZE = 8192
DEFAULT_NAME = "ra_log_wal"


def start_link(disk: MemoryDisk, name: str = DEFAULT_NAME,
               max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> Any:
    """Start the WAL linked to the caller (a supervisor); ``("ok", pid)``."""

    def init_it(proc: Process, parent: Pid, ack: Ref) -> None:
        gen.init_ack(parent, ack, ("ok", proc.pid))
        MemoryWal(disk, max_batch_size).loop()

    return gen.start(init_it, name=name, link=True)


class MemoryWal:
    """The batching loop; all state lives in the disk object."""

    def __init__(self, disk: MemoryDisk, max_batch_size: int) -> None:
        self.disk = disk
        self.max_batch_size = max_batch_size

    def loop(self) -> None:
        while True:
            batch = [actors.receive()]
            while len(batch) < self.max_batch_size:
                msg = actors.receive(0)
                if msg is actors.TIMEOUT:
                    break
                batch.append(msg)
            self.handle_batch(batch)

    def handle_batch(self, batch: list[Any]) -> None:
        #: writer pid -> [(term, [idx, ...])] runs in write order
        written: dict[Any, list[tuple[int, list[int]]]] = {}
        for msg in batch:
            match msg:
                case ("append", uid, writer, entries):
                    self._append(uid, writer, entries, written.setdefault(writer, []))
                case ("$gen_call", from_, ("last_writer_seq", uid)):
                    wlog = self.disk.wal.get(uid)
                    actors.get_node().reply(from_, wlog.last if wlog is not None else None)
        for writer, runs in written.items():
            for term, idxs in runs:
                actors.send(writer, ("ra_log_event", ("written", term, ra_seq.from_list(idxs))))

    def _append(self, uid: str, writer: Any, entries: list[Entry],
                runs: list[tuple[int, list[int]]]) -> None:
        disk = self.disk
        known = uid in disk.wal
        wlog = disk.writer(uid)
        smallest = disk.smallest_live_index(uid)
        for entry in entries:
            idx, term, _ = entry
            if idx < smallest:
                # below the snapshot: not needed, and the writer is in sequence up to it
                wlog.seq_state, wlog.last = "in_seq", max(wlog.last, smallest - 1)
                continue
            if known and (idx - 1 <= wlog.last or idx == smallest):
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
