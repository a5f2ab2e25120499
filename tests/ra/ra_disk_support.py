"""Shared pieces of the log-stack tests: a node, a counted fsync, the WAL and
segment writer started under the test process, and a driver loop that plays
the server shell's part for a `DiskLog` (hand writes to the WAL, feed events)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import actors
from actors import gen_server
from ra import segment_writer as ra_sw
from ra import wal as ra_wal
from ra.log_ets import LogEts


class CountingFsync:
    """An injectable fsync: really syncs, and remembers how often it was called."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        os.fdatasync(fd)


@dataclass
class Stack:
    """One node's log processes over `root` (``wal/`` and one dir per uid)."""

    root: str
    ets: LogEts = field(default_factory=LogEts)
    fsync: CountingFsync = field(default_factory=CountingFsync)
    wal_pid: Any = None
    sw_pid: Any = None

    @property
    def wal_dir(self) -> str:
        return os.path.join(self.root, "wal")

    def server_dir(self, uid: str) -> str:
        return ra_sw.server_dir(self.root, uid)

    def start(self, *, segments: bool = True, **wal_opts: Any) -> Stack:
        """Start (or restart) the segment writer and the WAL; call inside a process."""
        if segments:
            ok, self.sw_pid = ra_sw.start_link(ra_sw.SegmentWriterConfig(
                data_dir=self.root, log_ets=self.ets, segment_max_entries=wal_opts.pop(
                    "segment_max_entries", 4096), fsync=self.fsync))
            assert ok == "ok"
        cfg = ra_wal.WalConfig(dir=self.wal_dir, log_ets=self.ets, fsync=self.fsync, seed=1,
                               segment_writer=ra_sw.SEGMENT_WRITER_NAME if segments else None,
                               **wal_opts)
        result = ra_wal.start_link(cfg)
        assert result[0] == "ok", result
        self.wal_pid = result[1]
        return self

    def kill_wal(self) -> None:
        assert _kill(self.wal_pid) is not actors.TIMEOUT

    def stop_all(self) -> None:
        for pid in (self.wal_pid, self.sw_pid):
            if pid is not None and actors.is_process_alive(pid):
                _kill(pid)

    def sync(self) -> None:
        """Barrier: everything sent to the WAL is written and every closed file flushed."""
        assert gen_server.call(ra_wal.WAL_NAME, "sync") == "ok"
        if self.sw_pid is not None:
            assert gen_server.call(ra_sw.SEGMENT_WRITER_NAME, "await") == "ok"

    def rollover(self) -> None:
        assert gen_server.call(ra_wal.WAL_NAME, "rollover") == "ok"
        self.sync()

    def wal_files(self) -> list[str]:
        return sorted(n for n in os.listdir(self.wal_dir) if n.endswith(".wal"))


def _kill(pid: Any) -> Any:
    """Kill linked `pid` without taking the test process down; its DOWN message,
    or TIMEOUT if none came within two seconds."""
    actors.unlink(pid)
    ref = actors.monitor(pid)
    actors.exit(pid, "kill")
    return actors.receive(2000, match=lambda m: m[:2] == ("DOWN", ref))


def flush_to_wal(log: Any, uid: str) -> int:
    """The shell's part after each event: hand the log's pending writes to the WAL."""
    n = 0
    for tid, prev_idx, batch in log.take_wal_appends():
        ra_wal.append(ra_wal.WAL_NAME, uid, actors.self(), tid, prev_idx, batch)
        n += len(batch)
    return n


def write(ets: LogEts, uid: str, pid: Any, batch: list[Any], prev_idx: int | None = None) -> int:
    """A server log's part in the WAL protocol, without the rest of a log: put `batch`
    into the uid's mem table (a successor when it would overwrite a row) and send it
    with the table's id and the index written before it (default: the one before the
    batch's first). Returns the table id."""
    table = ets.mem_table_please(uid)
    if batch[0][0] <= table.last:
        table = ets.new_mem_table_please(uid)
    for entry in batch:
        assert table.insert(entry)
    prev = batch[0][0] - 1 if prev_idx is None else prev_idx
    ra_wal.append(ra_wal.WAL_NAME, uid, pid, table.tid, prev, batch)
    return table.tid


def held(ets: LogEts, uid: str) -> list[Any]:
    """What the log of `uid` holds in memory: per index the newest table's row."""
    head = ets.mem_tables.get(uid)
    if head is None:
        return []
    top = max(t.last for t in head.chain())
    out = []
    for idx in range(0, top + 1):
        entry = head.lookup(idx)
        if entry is not None:
            out.append(entry)
    return out


def pump(log: Any, uid: str, until: Callable[[], bool], timeout: int = 3000) -> None:
    """Feed ``ra_log_event``s to `log` (re-sending what it asks for) until `until()`."""
    flush_to_wal(log, uid)
    while not until():
        msg = actors.receive(timeout)
        assert msg is not actors.TIMEOUT, "log events stopped before the condition held"
        if isinstance(msg, tuple) and msg[0] == "ra_log_event":
            log.handle_event(msg[1])
            flush_to_wal(log, uid)


def drain_events(log: Any, uid: str, quiet_ms: int = 50) -> None:
    """Feed whatever log events arrive until none comes for `quiet_ms`."""
    while True:
        msg = actors.receive(quiet_ms)
        if msg is actors.TIMEOUT:
            return
        if isinstance(msg, tuple) and msg[0] == "ra_log_event":
            log.handle_event(msg[1])
            flush_to_wal(log, uid)


def relay(parent: actors.Pid, tag: Any) -> None:
    """A writer stand-in: forward every message to `parent` as ``(tag, msg)``."""
    while True:
        actors.send(parent, (tag, actors.receive()))


def entries(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    """Entries `first`..`last` of `term`, each command naming its index."""
    return [(i, term, ("cmd", i)) for i in range(first, last + 1)]


def written(term: int, seq: list[Any]) -> tuple[str, Any]:
    """The log event the WAL sends a writer once `seq` of `term` is synced."""
    return ("ra_log_event", ("written", term, seq))


def next_msg(timeout: int = 2000) -> Any:
    """The next message to the test process; it must come within `timeout` ms."""
    msg = actors.receive(timeout)
    assert msg is not actors.TIMEOUT
    return msg


def nothing_more(timeout: int = 100) -> bool:
    """Whether no message arrives within `timeout` ms."""
    return actors.receive(timeout) is actors.TIMEOUT
