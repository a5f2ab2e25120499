"""`ra_log_wal`: the one write-ahead log of a node, shared by all its Ra servers.

Every Ra server on a node sends its log writes here. The process is a
`gen_batch_server`: each batch is its whole mailbox (up to
``wal_max_batch_size`` messages, from the first batch on), and it turns the
batch into one file write and one fdatasync, done on gevent's thread pool so
the node's other processes keep running meanwhile; only then does each writer
hear ``("ra_log_event", ("written", Term, Seq))``, one per term run, covering
exactly what was written for it. Many servers and many entries share one
fsync: that is where a quorum queue's throughput comes from.

The protocol a server uses (a message, so a dead WAL never blocks it):

    ("append", uid, writer_pid, mem_table_id, prev_idx, [(idx, term, cmd), ...])

The server has already put the entries into its mem table (`ra.log_ets`);
the WAL makes them durable and records which table each one went into.
``prev_idx`` is the index the writer wrote before the batch's first entry
(not necessarily ``first - 1``: a sparse write skips indexes), each later
entry's is the entry before it. Per uid the WAL tracks ``(in_seq |
out_of_seq, last_idx)`` and checks each write in ``ra_log_wal``'s order:
below the server's smallest live index it is dropped; from a known writer
whose ``prev_idx <= last_idx``, or at exactly the smallest live index, it is
written; from an unknown writer it is written; an ``out_of_seq`` writer's is
dropped; an ``in_seq`` writer with a gap is asked once with
``("resend_write", last_idx + 1)`` and becomes ``out_of_seq``.

When the current file exceeds ``wal_max_size_bytes`` (or holds
``wal_max_entries``) it is closed, the writer map is saved to
``writers.snapshot`` and the segment writer gets ``("mem_tables", {uid:
[(mem_table_id, seq), ...]}, wal_path)``: per server the tables the file's
entries went into, newest first, each sequence floored at the server's
smallest live index. It deletes the file once every server's entries are in
segments. On a node's start the files rebuild the servers' mem tables.

A slow disk is modelled by a sync delay (``("set_sync_delay", ms)``, the
`warren ctl set_disk_delay` hook): the pool thread sleeps that long before
each batch's fdatasync, so writers wait for "written" exactly as behind a
slow device while the node's other processes keep running. The delay lives
in the WAL process (a restarted WAL starts without one); ``"sync_stats"``
reports it with the number of syncs (one per batch), of delayed syncs and of the
entries those batches held.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent

import actors
from actors import gen_batch_server, trace
from actors.gen_batch_server import From, GenBatchServer
from actors.pid import Pid
from ra import crash_points, wal_file
from ra import seq as ra_seq
from ra.durable import make_dirs, open_private
from ra.log_base import WalDown
from ra.log_ets import LogEts
from ra.packed import own_batch
from ra.segment_writer import SEGMENT_WRITER_NAME
from ra.types import Entry

log = logging.getLogger("warren.ra.wal")

WAL_NAME = "ra_log_wal"
#: RabbitMQ's ``raft.wal_max_size_bytes`` default (RabbitMQ sets it; Ra's own is 256 000 000)
DEFAULT_WAL_MAX_SIZE_BYTES = 536_870_912
DEFAULT_WAL_MAX_BATCH_SIZE = 8192
WRITERS_SNAPSHOT = "writers.snapshot"

IN_SEQ = "in_seq"
OUT_OF_SEQ = "out_of_seq"

Fsync = Callable[[int], None]


def _no_sync(fd: int) -> None:
    return None


_SYNC_METHODS: dict[str, Fsync] = {"datasync": os.fdatasync, "sync": os.fsync, "none": _no_sync}


@dataclass
class WalConfig:
    """``ra_system`` keys of the WAL (``ra_system``); `fsync` overrides the sync method."""

    dir: str
    log_ets: LogEts = field(default_factory=LogEts)
    wal_max_size_bytes: int = DEFAULT_WAL_MAX_SIZE_BYTES
    #: roll over once the current file holds this many entries (None: no limit, as Ra's
    #: ``undefined``); it bounds the entries of a node held in memory until a flush
    wal_max_entries: int | None = None
    wal_max_batch_size: int = DEFAULT_WAL_MAX_BATCH_SIZE
    wal_sync_method: str = "datasync"
    wal_compute_checksums: bool = True
    #: allocate each new file's blocks up to its size limit when it is opened, so a
    #: batch's sync does not also commit the file's growth (Ra's ``wal_pre_allocate``)
    wal_pre_allocate: bool = False
    fsync: Fsync | None = None
    #: whether a uid belongs to a registered server (Ra's ``ra_directory``): recovery
    #: skips the entries of any other, a server deleted since they were written
    #: (None: every uid is)
    registered: Callable[[str], bool] | None = None
    #: where closed files go: a registered name, a pid, or None to keep them
    segment_writer: Any = SEGMENT_WRITER_NAME
    name: str | None = WAL_NAME
    #: seeds the random size limit of the first file (None: random)
    seed: int | None = None
    #: batches of at most this many entries are written and synced on the node's
    #: hub rather than on a pool thread, while syncs stay fast (0: always the pool)
    inline_sync_max_entries: int = 16


def append(wal: Any, uid: str, writer_pid: Pid, tid: int, prev_idx: int,
           entries: list[Entry]) -> None:
    """Send one batch of a server's entries, already in its mem table `tid`, to the
    WAL (``ra_log_wal:write/7`` for a run); `WalDown` if it is not running."""
    try:
        actors.send(wal, ("append", uid, writer_pid, tid, prev_idx, entries))
    except actors.NoSuchName:
        raise WalDown() from None


def start_link(config: WalConfig, timeout: int | None = None) -> Any:
    """Start the WAL linked to the caller (after recovering its files); ``("ok", pid)``.

    The batch size is fixed at ``wal_max_batch_size``: whatever queued while
    the last batch was being synced goes into the next one, so a burst costs
    one sync, not one per doubling of the batch size."""
    size = config.wal_max_batch_size
    return gen_batch_server.start_link(WalServer, config, name=config.name,
                                       min_batch_size=size, max_batch_size=size,
                                       timeout=timeout)


class WalServer(GenBatchServer):
    """The batch server's callbacks around a `Wal`: a batch's casts and other
    messages are its writes (Ra casts ``rollover``; servers send appends), its
    calls are answered once the batch is synced."""

    def init(self, config: WalConfig) -> Any:
        wal = Wal(config, actors.node())
        wal.recover()
        return ("ok", wal)

    def handle_batch(self, ops: list[Any], wal: Wal) -> Any:
        msgs: list[Any] = []
        calls: list[tuple[From, Any]] = []
        for op in ops:
            if op[0] == "call":
                calls.append((op[1], op[2]))
            else:
                msgs.append(op[1])
        return ("ok", wal.handle_batch(msgs, calls), wal)

    def terminate(self, reason: Any, wal: Wal) -> None:
        wal.close()


#: median write+sync time of the recent batches above which none is synced on the hub.
#: A write+sync is timed on the thread that makes it, so on a busy machine it includes
#: time spent runnable but descheduled: with three nodes on 2 cores it measured 0.8 to
#: 1.2 ms around a bare fdatasync of 0.2 ms. At 1.0 about a fifth of the batches then
#: went through the pool; at a limit twice that they stay inline, and window-1 AMQP
#: confirms were 2-9% faster in three alternated pairs (docs/performance.md).
INLINE_SYNC_MAX_MS = 2.0
#: how many recent batches that median is taken over
SYNC_HISTORY = 31


def _write_and_sync(fd: int, data: bytes, fsync: Fsync, delay_s: float = 0.0) -> float:
    """One batch's write and sync: on a pool thread (blocking there, the injected
    delay included, spares the hub), or on the hub for a small batch (`Wal._inline`).
    Returns how long the write and the sync took, in ms: the disk's own time, without
    the hand-over to a pool thread and back (that would count a busy hub as a slow disk)."""
    started = time.perf_counter()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if delay_s > 0:
        time.sleep(delay_s)
    fsync(fd)
    return (time.perf_counter() - started) * 1000.0


class _OpenFile:
    """The descriptor of the WAL's current file, as the process last left it.

    An Erlang runtime closes the files of a process that was killed; here a
    killed WAL runs no more code, so the descriptor is closed when the WAL's
    state is freed. Not while a pool thread still writes through it, and not
    if the number now names another file (it was closed and reused)."""

    __slots__ = ("fd", "ident", "writing")

    def __init__(self) -> None:
        self.fd = -1
        self.ident: tuple[int, int] = (0, 0)
        self.writing = False

    def open(self, fd: int) -> None:
        st = os.fstat(fd)
        self.fd, self.ident = fd, (st.st_dev, st.st_ino)

    def release(self) -> None:
        fd, self.fd = self.fd, -1
        if fd < 0 or self.writing:
            return
        try:
            st = os.fstat(fd)
        except OSError:
            return
        if (st.st_dev, st.st_ino) == self.ident:
            os.close(fd)


class Wal:
    """The WAL's state and its batch step (`WalServer` runs it as a process)."""

    def __init__(self, config: WalConfig, node_name: str = "") -> None:
        self.cfg = config
        self.node_name = node_name
        self.ets = config.log_ets
        self.fsync: Fsync = config.fsync or _SYNC_METHODS[config.wal_sync_method]
        self.pre_allocate = config.wal_pre_allocate
        self.writers: dict[str, tuple[str, int]] = {}
        self.file_no = 0
        self._file = _OpenFile()
        weakref.finalize(self, self._file.release)
        self.size = 0
        self.limit = config.wal_max_size_bytes
        #: entries written to the current file (``wal_max_entries`` counts these)
        self.entries = 0
        #: uid -> [(mem table id, seq)] written to the current file, newest table first
        self.ranges: dict[str, list[tuple[int, ra_seq.Seq]]] = {}
        self._pool = gevent.get_hub().threadpool
        #: injected before each batch's sync: a slow disk (0: none)
        self.sync_delay_ms = 0
        #: write+sync times (ms) of the last `SYNC_HISTORY` batches, oldest first
        self.sync_ms_recent: deque[float] = deque(maxlen=SYNC_HISTORY)
        self.syncs = 0
        self.delayed_syncs = 0
        #: entries in the batches synced so far (``entries`` counts the current file's)
        self.synced_entries = 0

    # ---- start and recovery (``ra_log_wal:init/1``) -----------------------

    def recover(self) -> None:
        """Read every file in order and hand each to the segment writer. On a node's
        start (``initial``) the files rebuild the mem tables, a successor table at
        each overwrite; a WAL restarted while the servers run (``post_boot``) leaves
        their tables alone and only finds which table holds each entry."""
        make_dirs(self.cfg.dir)
        self.writers = self._load_writers()
        initial = not self.ets.wal_recovered
        files = sorted(
            (n, name) for name in os.listdir(self.cfg.dir)
            if (n := wal_file.file_number(name)) is not None
        )
        registered = self.cfg.registered or (lambda _uid: True)
        self.writers = {uid: w for uid, w in self.writers.items() if registered(uid)}
        recovered: list[tuple[int, dict[str, list[tuple[int, ra_seq.Seq]]]]] = []
        for file_no, name in files:
            rec = wal_file.read(os.path.join(self.cfg.dir, name))
            if rec.torn:
                log.warning("WAL %s: torn tail after %d bytes discarded", name, rec.valid_bytes)
            self.ranges = {}
            for batch in rec.batches:
                for uid, entries in batch:
                    if registered(uid):
                        self._recover_entries(uid, entries, initial)
            recovered.append((file_no, self.ranges))
        self.ranges = {}
        self.ets.wal_recovered = True
        self.file_no = files[-1][0] if files else 0
        if files:
            # as Ra's roll_over at start: the files are about to be flushed and
            # deleted, and the writers' last indexes must outlive them
            self._save_writers()
        for file_no, ranges in recovered:
            self._hand_over(file_no, ranges)
        # the first file's limit is random in (max/2, max] so nodes roll at different times
        rng = random.Random(self.cfg.seed)
        half = self.cfg.wal_max_size_bytes // 2
        self.limit = rng.randint(half + 1, self.cfg.wal_max_size_bytes) \
            if self.cfg.wal_max_size_bytes > 1 else self.cfg.wal_max_size_bytes
        self._open_next()

    def _load_writers(self) -> dict[str, tuple[str, int]]:
        path = os.path.join(self.cfg.dir, WRITERS_SNAPSHOT)
        try:
            with open(path, "rb") as f:
                return dict(pickle.load(f))
        except FileNotFoundError:
            return {}
        except (pickle.UnpicklingError, EOFError, ValueError):
            log.warning("WAL: unreadable %s ignored", path)
            return {}

    def _save_writers(self) -> None:
        path = os.path.join(self.cfg.dir, WRITERS_SNAPSHOT)
        tmp = path + ".tmp"
        with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            pickle.dump(self.writers, f, protocol=5)
            f.flush()
            self.fsync(f.fileno())
        os.replace(tmp, path)

    @property
    def fd(self) -> int:
        """The current file's descriptor (-1: none open)."""
        return self._file.fd

    @property
    def _writing(self) -> bool:
        """A write is running on the thread pool: the fd must stay open."""
        return self._file.writing

    @_writing.setter
    def _writing(self, value: bool) -> None:
        self._file.writing = value

    def close(self) -> None:
        """Close the current file; one a pool thread still writes through is left
        to it (the process was killed mid-write)."""
        self._file.release()

    def _open_next(self) -> None:
        self.file_no += 1
        path = os.path.join(self.cfg.dir, wal_file.file_name(self.file_no))
        # writes go one after another from the header on: a pre-allocated file is
        # already as long as its limit, so appending at its end would skip the space
        self._file.open(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        os.write(self.fd, wal_file.HEADER)
        self.size = len(wal_file.HEADER)
        self.entries = 0
        self.ranges = {}
        if self.pre_allocate:
            self._pre_allocate(path)

    def _pre_allocate(self, path: str) -> None:
        """Reserve the file's blocks up to its limit; the unwritten rest reads as zeros,
        which recovery takes for the end of the records. Where the file system cannot
        allocate, Ra turns pre-allocation off and syncs with fsync instead of fdatasync
        from then on: so does this WAL."""
        try:
            os.posix_fallocate(self.fd, self.size, max(1, self.limit - self.size))
        except OSError as exc:
            log.info("WAL %s: pre-allocation not supported by the file system (%s); "
                     "syncing with fsync instead of fdatasync", path, exc)
            self.pre_allocate = False
            if self.cfg.fsync is None and self.cfg.wal_sync_method == "datasync":
                self.fsync = os.fsync
            elif getattr(self.fsync, "sync", None) is os.fdatasync:
                # a counting wrapper (`ra.disk_store.SyncCounter`) of fdatasync
                self.fsync.sync = os.fsync  # type: ignore[attr-defined]

    def _recover_entries(self, uid: str, entries: list[Entry], initial: bool) -> None:
        """One recovered write (``recover_entry``): nothing in a file says whether a
        write was sparse, so every entry is inserted as one may be."""
        smallest = self.ets.smallest_live_index(uid)
        head = self.ets.mem_tables.get(uid)
        for entry in entries:
            idx = entry[0]
            self.writers[uid] = (IN_SEQ, idx)
            if idx < smallest:
                continue
            if initial:
                table = head if head is not None else self.ets.mem_table_please(uid)
                if not table.insert(entry):
                    table = self.ets.new_mem_table_please(uid)
                    table.insert(entry)
                head = table
                self._add_range(uid, table.tid, [idx])
            else:
                tid = None if head is None else head.tid_for(idx, entry[1])
                if tid is not None:  # else flushed already
                    self._add_range(uid, tid, [idx])

    def _add_range(self, uid: str, tid: int, idxs: list[int]) -> None:
        """Record that `idxs` (ascending) went into table `tid` (``update_ranges``)."""
        ranges = self.ranges.get(uid)
        if ranges is None:
            self.ranges[uid] = [(tid, ra_seq.from_list(idxs))]
        elif ranges[0][0] != tid:
            ranges.insert(0, (tid, ra_seq.from_list(idxs)))
        else:
            seq = ranges[0][1]
            if idxs[0] > (ra_seq.last(seq) or -1):
                for idx in idxs:
                    seq = ra_seq.append(idx, seq)
            else:  # a resend of what the table already had in this file
                seq = ra_seq.from_list(ra_seq.expand(seq) + idxs)
            ranges[0] = (tid, seq)

    # ---- one batch -------------------------------------------------------

    def handle_batch(self, msgs: list[Any],
                     calls: list[tuple[From, Any]] | None = None) -> list[Any]:
        """Write a batch's appends with one write and one sync, then tell each
        writer; returns the ``reply`` actions for its `calls`, answered after a
        rollover the batch asked for (a reply means the file was handed over)."""
        batch: wal_file.Batch = []
        #: (uid, pid) -> [(tid, term, seq)] runs, oldest first
        notes: dict[tuple[str, Any], list[tuple[int, int, ra_seq.Seq]]] = {}
        calls = calls or []
        roll = any(request == "rollover" for _, request in calls)
        n_entries = 0
        for msg in msgs:
            match msg:
                case ("append", uid, pid, tid, prev_idx, entries) if entries:
                    accepted = self._accept(uid, pid, prev_idx, own_batch(entries))
                    if accepted:
                        batch.append((uid, accepted))
                        n_entries += len(accepted)
                        _note(notes.setdefault((uid, pid), []), tid, accepted)
                case "rollover":
                    roll = True
                case _:
                    log.warning("WAL: unexpected message %r", msg)
        if batch:
            data = wal_file.encode(batch, self.cfg.wal_compute_checksums)
            self._writing = True
            delay_ms = self.sync_delay_ms
            if self._inline(n_entries, delay_ms):
                fsync_ms = _write_and_sync(self.fd, data, self.fsync)
            else:
                fsync_ms = self._pool.apply(_write_and_sync,
                                            (self.fd, data, self.fsync, delay_ms / 1000.0))
            self._writing = False
            self.syncs += 1
            self.synced_entries += n_entries
            if delay_ms > 0:
                self.delayed_syncs += 1
            self.sync_ms_recent.append(fsync_ms)
            self.size += len(data)
            self.entries += n_entries
            trace.emit("ra_wal_batch", node=self.node_name, entries=n_entries,
                       writers=len(notes), bytes=len(data), fsync_ms=round(fsync_ms, 3))
            for (uid, pid), runs in notes.items():
                for tid, term, seq in runs:
                    self._add_range(uid, tid, ra_seq.expand(seq))
                    actors.send(pid, ("ra_log_event", ("written", term, seq)))
        if roll or self.size > self.limit or self._full():
            self.rollover()
        return [("reply", from_, self._answer(request)) for from_, request in calls]

    def _full(self) -> bool:
        """``wal_max_entries`` reached: checked after each batch, so a file may hold
        up to one batch more (Ra checks before each entry, so one entry more)."""
        max_entries = self.cfg.wal_max_entries
        return max_entries is not None and self.entries >= max_entries

    def _inline(self, n_entries: int, delay_ms: int) -> bool:
        """Whether to write and sync this batch on the hub.

        Handing a batch to a pool thread and back costs two thread wake-ups and
        GIL hand-overs, more than a fast fdatasync of a small batch; the write
        and the sync release the GIL, so the node's I/O thread keeps sending
        (the AppendEntries to the followers) meanwhile. Only the other
        processes of this node wait, as long as the sync takes: so only small
        batches (the latency case: few commands in flight), only while the
        median of the recent syncs stays under `INLINE_SYNC_MAX_MS`, never with
        an injected delay. Big batches (throughput) sync on the pool while the
        node works. A median, not a mean: one stall of a shared disk (several
        ms, now and then) must not send every later batch through the pool.
        """
        return (delay_ms == 0 and n_entries <= self.cfg.inline_sync_max_entries
                and self.sync_ms_median() < INLINE_SYNC_MAX_MS)

    def sync_ms_median(self) -> float:
        """Median write+sync time of the recent batches, in ms (0 before the first)."""
        recent = self.sync_ms_recent
        if not recent:
            return 0.0
        return sorted(recent)[len(recent) // 2]

    def _accept(self, uid: str, pid: Any, prev_idx: int, entries: list[Entry]) -> list[Entry]:
        """The part of a batch to write, checked as ``ra_log_wal:handle_msg`` checks each
        entry: only the first can fail once the ones below the smallest live index are
        dropped (each later entry's previous index is the entry before it)."""
        self.ets.register(uid, pid)
        smallest = self.ets.smallest_live_index(uid)
        if entries[-1][0] < smallest:
            self.writers[uid] = (IN_SEQ, smallest - 1)
            return []
        if entries[0][0] < smallest:
            # the dropped ones put the writer in sequence at smallest - 1, and the
            # first kept entry's previous index is below smallest
            entries = [e for e in entries if e[0] >= smallest]
            self.writers[uid] = (IN_SEQ, smallest - 1)
            prev_idx = smallest - 1
        first = entries[0][0]
        state = self.writers.get(uid)
        if state is None or prev_idx <= state[1] or first == smallest:
            self.writers[uid] = (IN_SEQ, entries[-1][0])
            return entries
        flag, last = state
        if flag == IN_SEQ:
            self.writers[uid] = (OUT_OF_SEQ, last)
            actors.send(pid, ("ra_log_event", ("resend_write", last + 1)))
        return []

    def _answer(self, request: Any) -> Any:
        match request:
            case ("last_writer_seq", uid):
                state = self.writers.get(uid)
                return None if state is None else state[1]
            case "sync" | "rollover":
                return "ok"
            case ("set_sync_delay", ms) if isinstance(ms, int) and ms >= 0:
                self.sync_delay_ms = ms
                return "ok"
            case "sync_stats":
                return {"sync_delay_ms": self.sync_delay_ms, "syncs": self.syncs,
                        "delayed_syncs": self.delayed_syncs, "entries": self.synced_entries}
            case "file":
                return os.path.join(self.cfg.dir, wal_file.file_name(self.file_no))
        return ("error", ("unknown_request", request))

    # ---- rollover --------------------------------------------------------

    def rollover(self) -> None:
        """Close the current file (if it holds anything) and hand it to the segment writer."""
        if not self.ranges:
            return
        self._file.release()
        self._pool.apply(self._save_writers)
        if crash_points.ARMED:
            crash_points.reached("wal_rollover")
        self._hand_over(self.file_no, self.ranges)
        # only the first file after a start has a random limit, as in Ra
        self.limit = self.cfg.wal_max_size_bytes
        self._open_next()

    def _hand_over(self, file_no: int, written: dict[str, list[tuple[int, ra_seq.Seq]]]) -> None:
        """Give a closed file to the segment writer: per server its tables, newest
        first, each sequence floored at the smallest live index (a snapshot taken
        since the write covers what is below)."""
        path = os.path.join(self.cfg.dir, wal_file.file_name(file_no))
        target = self.cfg.segment_writer
        ranges: dict[str, list[tuple[int, ra_seq.Seq]]] = {}
        for uid in sorted(written):
            smallest = self.ets.smallest_live_index(uid)
            floored = [(tid, ra_seq.floor(smallest, seq) if smallest > 0 else seq)
                       for tid, seq in written[uid]]
            ranges[uid] = [(tid, seq) for tid, seq in floored if seq]
        if target is None:
            return
        try:
            actors.send(target, ("mem_tables", ranges, path))
        except actors.NoSuchName:
            log.warning("WAL: no segment writer; %s kept until the next recovery", path)


def _note(runs: list[tuple[int, int, ra_seq.Seq]], tid: int, entries: list[Entry]) -> None:
    """Add written entries to a writer's runs: a new run per mem table, per term
    change and per overwrite (``written`` events go out per table and term, older first)."""
    for idx, term, _ in entries:
        if runs:
            r_tid, r_term, r_seq = runs[-1]
            if r_tid == tid and r_term == term and idx > ra_seq.last(r_seq):  # type: ignore[operator]
                runs[-1] = (tid, term, ra_seq.append(idx, r_seq))
                continue
        runs.append((tid, term, [idx]))
