"""`ra_log_segment_writer`: moves closed WAL files into per-server segments.

The WAL hands over each closed file as ``("mem_tables", {uid: [(mem_table_id,
seq), ...]}, wal_path)``: per server, the mem tables the file's entries went
into, newest first. A newer table shadows the older ones from its first index
on (an overwrite opened it), so each older sequence is cut below the first
index of the newer one, and everything below the server's smallest live index
(its snapshot) is left out. The rest is read from the tables and written into
new segment files of at most ``segment_max_entries`` entries under
``<data_dir>/<uid>/`` (fsynced, then renamed into place, off the hub); then
the server hears

    ("ra_log_event", ("segments", [(mem_table_id, seq), ...], [(file_name, (first, last)), ...]))

(Ra's ``TidSeqs``, as handed over) and deletes those rows from its tables
when it handles the event. A server that is not running cannot: the segment
writer deletes the rows it flushed itself. When every server of the file is
done, the WAL file is deleted.

Segments are immutable: every flush creates new files, so a reader never sees
one being filled. Ra tops its newest segment up across flushes; warren does
not, so a server with little traffic per WAL file has more, smaller segments.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent

import actors
from actors import gen_batch_server, trace
from actors.gen_batch_server import GenBatchServer
from actors.process import Process, current
from ra import crash_points
from ra import segment as ra_segment
from ra import seq as ra_seq
from ra.durable import make_dirs
from ra.log_ets import LogEts
from ra.types import Entry

log = logging.getLogger("warren.ra.segment_writer")

SEGMENT_WRITER_NAME = "ra_log_segment_writer"


@dataclass
class SegmentWriterConfig:
    """``ra_system`` keys of the segment writer (``ra_system:default_config/0``)."""

    data_dir: str
    log_ets: LogEts = field(default_factory=LogEts)
    segment_max_entries: int = ra_segment.DEFAULT_SEGMENT_MAX_ENTRIES
    segment_compute_checksums: bool = True
    fsync: Callable[[int], None] | None = None
    name: str | None = SEGMENT_WRITER_NAME


def server_dir(data_dir: str, uid: str) -> str:
    """``<data_dir>/<UId>``: where a server's segments, snapshots and meta live."""
    return os.path.join(data_dir, uid)


def start_link(config: SegmentWriterConfig, timeout: int | None = None) -> Any:
    """Start the segment writer linked to the caller; ``("ok", pid)``.

    A batch server that takes its mailbox one message at a time: each WAL
    file is flushed, and each call answered, in the order they came."""
    return gen_batch_server.start_link(SegmentWriterServer, config, name=config.name,
                                       min_batch_size=1, max_batch_size=1,
                                       timeout=timeout)


class SegmentWriterServer(GenBatchServer):
    """The batch server's callbacks around a `SegmentWriter`."""

    def init(self, config: SegmentWriterConfig) -> Any:
        proc = current()
        return ("ok", SegmentWriter(config, proc.node.name, owner=proc))

    def handle_batch(self, ops: list[Any], writer: SegmentWriter) -> Any:
        replies: list[Any] = []
        for op in ops:
            match op:
                case ("info" | "cast", ("mem_tables", ranges, wal_path)):
                    writer.flush(ranges, wal_path)
                case ("call", from_, request):
                    replies.append(("reply", from_, writer.answer(request)))
                case _:
                    log.warning("segment writer: unexpected message %r", op[-1])
        return ("ok", replies, writer)

    def terminate(self, reason: Any, writer: SegmentWriter) -> None:
        writer.stop()


def split_runs(entries: list[Entry], max_entries: int) -> list[list[Entry]]:
    """Contiguous chunks of at most `max_entries` (a snapshot jump starts a new one)."""
    chunks: list[list[Entry]] = []
    start, n = 0, len(entries)
    while start < n:
        # a contiguous run's last index is its first plus its length less one
        end = min(start + max_entries, n)
        while entries[end - 1][0] - entries[start][0] != end - 1 - start:
            end = start + 1 + _contiguous(entries, start, end)
        chunks.append(entries[start:end])
        start = end
    return chunks


def _contiguous(entries: list[Entry], start: int, end: int) -> int:
    """How many entries after `start` (below `end`) follow it without a gap."""
    k = start
    while k + 1 < end and entries[k + 1][0] == entries[k][0] + 1:
        k += 1
    return k - start


_DIR_LOCKS: dict[str, threading.Lock] = {}
_DIR_LOCKS_GUARD = threading.Lock()


def _dir_lock(data_dir: str) -> threading.Lock:
    with _DIR_LOCKS_GUARD:
        return _DIR_LOCKS.setdefault(os.path.abspath(data_dir), threading.Lock())


class WriterStopped(Exception):
    """A pool job of a segment writer that has since died: it must not write."""


class SegmentWriter:
    """The process state. Segment files are only touched on a pool thread
    holding the data dir's lock, after checking that this writer still runs
    (neither stopped nor its `owner` process dead): a killed writer's job
    cannot race its restarted successor, and segment numbers (the fold order)
    always follow the order of the flushes."""

    def __init__(self, config: SegmentWriterConfig, node_name: str = "",
                 owner: Process | None = None) -> None:
        self.cfg = config
        self.node_name = node_name
        self.ets = config.log_ets
        self.fsync = config.fsync or os.fsync
        self.stopped = False
        self._owner = owner
        self._lock = _dir_lock(config.data_dir)
        self._cleaned: set[str] = set()
        #: highest segment number written per directory (never reused while running)
        self._high: dict[str, int] = {}
        self._pool = gevent.get_hub().threadpool

    def stop(self) -> None:
        """No pool job of this writer writes from now on."""
        with self._lock:
            self.stopped = True

    def running(self) -> bool:
        return not self.stopped and not (self._owner is not None and self._owner.dead)

    def answer(self, request: Any) -> Any:
        match request:
            case "await":
                return "ok"
            case ("my_segments", uid):
                return self.my_segments(uid)
        return ("error", ("unknown_request", request))

    def my_segments(self, uid: str) -> list[ra_segment.SegRef]:
        """The segment refs of `uid` on disk, oldest first."""
        directory = server_dir(self.cfg.data_dir, uid)
        refs: list[ra_segment.SegRef] = []
        for name in ra_segment.list_segments(directory):
            idx = ra_segment.read_index(os.path.join(directory, name))
            refs.append((name, (idx.first, idx.last)))
        return refs


    def flush(self, ranges: dict[str, list[tuple[int, ra_seq.Seq]]], wal_path: str) -> None:
        for uid, tid_seqs in ranges.items():
            self._flush_uid(uid, tid_seqs)
        if crash_points.ARMED:
            crash_points.reached("segments_reported")
        try:
            os.unlink(wal_path)
        except FileNotFoundError:
            pass

    def _flush_uid(self, uid: str, tid_seqs: list[tuple[int, ra_seq.Seq]]) -> None:
        entries = self.entries_to_flush(uid, tid_seqs)
        if not entries:
            return
        directory = server_dir(self.cfg.data_dir, uid)
        chunks = split_runs(entries, self.cfg.segment_max_entries)
        refs = self._pool.apply(self._write_all, (directory, chunks))
        if crash_points.ARMED:
            crash_points.reached("segments_written")
        trace.emit("ra_segments_written", node=self.node_name, uid=uid,
                   entries=len(entries), segments=len(refs))
        pid = self.ets.whereis(uid)
        if pid is not None and actors.is_process_alive(pid):
            actors.send(pid, ("ra_log_event", ("segments", tid_seqs, refs)))
        else:
            for tid, seq in tid_seqs:
                self.ets.delete_flushed(uid, tid, seq)

    def entries_to_flush(self, uid: str, tid_seqs: list[tuple[int, ra_seq.Seq]]) -> list[Entry]:
        """What a file's tables hold for `uid` that belongs in segments, in index order
        (``flush_mem_table_ranges``): newest table first, each older one cut below
        where the newer one starts, all of it at or above the smallest live index."""
        floor = self.ets.smallest_live_index(uid)
        chosen: list[tuple[Any, ra_seq.Seq]] = []
        ceiling: int | None = None
        for tid, seq in tid_seqs:
            table = self.ets.table(tid)
            if table is None:
                continue  # deleted: a snapshot covered it, or the server is gone
            seq = ra_seq.floor(floor, seq) if floor > 0 else seq
            if ceiling is not None:
                seq = ra_seq.limit(ceiling - 1, seq)
            if not seq:
                continue
            chosen.append((table, seq))
            first = ra_seq.first(seq)
            assert first is not None
            ceiling = first if table.start is None else min(first, table.start)
        entries: list[Entry] = []
        for table, seq in reversed(chosen):
            entries.extend(table.entries_of(seq))
        return entries

    def _write_all(self, directory: str, chunks: list[list[Entry]]) -> list[ra_segment.SegRef]:
        """On a pool thread: number and write the segments of one flush."""
        with self._lock:
            if not self.running():
                raise WriterStopped(directory)
            make_dirs(directory)
            if directory not in self._cleaned:
                # under the lock no job is writing here: temporary files are debris
                for name in os.listdir(directory):
                    if name.endswith(".segment.tmp"):
                        os.unlink(os.path.join(directory, name))
                self._cleaned.add(directory)
            names = ra_segment.list_segments(directory)
            on_disk = (ra_segment.file_number(names[-1]) or 0) if names else 0
            first_no = max(on_disk, self._high.get(directory, 0)) + 1
            self._high[directory] = first_no + len(chunks) - 1
            return ra_segment.write_all(directory, first_no, chunks,
                                        checksums=self.cfg.segment_compute_checksums,
                                        fsync=self.fsync)
