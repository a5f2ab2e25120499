"""The node's message store for durable classic queues (``msg_store_persistent``).

Why a store process: RabbitMQ confirms a persistent message in a durable classic
queue only once it is on disk, and it gets there through one per-node store that
writes in batches (``rabbit_msg_store``, with the queue index beside it). Here the
store is a gen_batch_server: every queue process casts its records to it, and
each batch — whatever queued while the last one was being written — is appended
to the queues' files with one ``write`` per file. Then each queue gets
``(STORE_WRITTEN, ids)`` and confirms those messages. As in RabbitMQ 4.x the
records are handed to the operating system, not fsynced: a killed node process
loses nothing confirmed, a lost machine may. A store started with `fsync`
syncs every file it wrote before it answers, as RabbitMQ 3.10 confirmed only
after a sync.

A queue's file only grows while the queue holds messages: once every message
written to it has left, the store empties it (nothing in it is needed again).

Credit: as ``msg_store_credit_disc_bound`` (4000, 800) between a queue and
RabbitMQ's shared store, each large body (4096 bytes and more) a queue writes
spends one credit, and the store grants 800 more per 800 written. A queue out
of credit holds back the credit it owes its publishing channels, so a store
that cannot keep up slows the publishers down.

Layout under the store's root (directories 0700, files 0600): one directory
per durable queue incarnation, ``<digest of vhost and name>-<random>``, holding
``meta`` (how the queue was declared, written durably when it is created) and
``log`` (the records of `classic.store_log`). Deleting the queue deletes the
directory; a queue declared again gets a new one, so a late deletion of the old
incarnation never touches the new.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent

import actors
from actors import gen_batch_server
from actors.gen_batch_server import GenBatchServer
from classic import effects as e
from classic.store_log import Recovered, encode_remove, encode_write, replay
from ra.durable import Fsync, fsync_dir, make_dirs, open_private, replace_file

__all__ = ["EMBED_BELOW", "MSG_STORE_CREDIT", "STORE", "STORE_CREDIT", "STORE_WRITTEN",
           "MessageStore", "QueueStore", "StoredQueue", "open_queue", "recover", "start_link"]

STORE = "msg_store_persistent"
"""The registered name of a node's store (upstream's persistent store)."""

STORE_WRITTEN = "msg_store_written"
"""First element of the message a queue process gets when its records are written."""

MSG_STORE_CREDIT: tuple[int, int] = (4000, 800)
"""``msg_store_credit_disc_bound``: a queue may have this many large bodies written
before it is blocked by the store, which grants the second number more after writing
that many of them."""

EMBED_BELOW = 4096
"""``queue_index_embed_msgs_below``: smaller bodies live in the queue's own index in
RabbitMQ and cost no store credit."""

STORE_CREDIT = "msg_store_credit"
"""First element of a grant from the store to a queue: ``(STORE_CREDIT, quantity)``."""

_CALL_TIMEOUT = 30_000

log = logging.getLogger("warren.classic")


@dataclass(frozen=True)
class StoredQueue:
    """A durable queue found on disk: its declare as saved and its messages."""

    qdir: str
    meta: Any
    messages: list[Recovered]


@dataclass(frozen=True)
class QueueStore:
    """One durable queue's handle on the store, used from its queue process.

    ``encode`` turns the channel's message content into bytes; the store never
    looks inside them."""

    server: Any
    qdir: str
    encode: Callable[[Any], bytes]

    def write(self, messages: tuple[e.Delivery, ...]) -> int:
        """Cast the records; how many of them spend store credit (large bodies)."""
        records = b"".join(encode_write(m, self.encode(m.content)) for m in messages)
        large = sum(1 for m in messages if m.size >= EMBED_BELOW)
        gen_batch_server.cast(self.server, ("write", actors.self(), self.qdir, records,
                                            tuple(m.msg_id for m in messages), large))
        return large

    def remove(self, msg_ids: tuple[int, ...]) -> None:
        gen_batch_server.cast(self.server, ("remove", self.qdir, encode_remove(msg_ids),
                                            len(msg_ids)))

    def delete(self) -> None:
        gen_batch_server.cast(self.server, ("delete", self.qdir))

    def reread(self) -> list[Recovered]:
        """The queue's messages as its file holds them, once the store has written
        everything sent to it before: what a queue process restarted after a crash
        starts from."""
        result: list[Recovered] = gen_batch_server.call(
            self.server, ("recover_queue", self.qdir), _CALL_TIMEOUT)
        return result


def open_queue(server: Any, vhost: str, name: str, meta: Any,
               encode: Callable[[Any], bytes]) -> QueueStore:
    """Create the files of a new durable queue (its declare saved before this returns)."""
    qdir = gen_batch_server.call(server, ("open", vhost, name, meta), _CALL_TIMEOUT)
    return QueueStore(server, qdir, encode)


def recover(server: Any) -> list[StoredQueue]:
    """Every durable queue the store holds, with its messages, in id order."""
    result: list[StoredQueue] = gen_batch_server.call(server, ("recover",), _CALL_TIMEOUT)
    return result


@dataclass
class _State:
    root: str
    fsync: Fsync | None = None
    fds: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)
    """Messages written to each queue's file and not removed since."""
    handled: dict[Any, int] = field(default_factory=dict)
    """Large bodies written for each queue process since its last grant."""


def _write_files(jobs: list[tuple[int, bytes | None]], fsync: Fsync | None) -> None:
    """Append each file's bytes (``None``: empty the file), syncing each with `fsync`."""
    for fd, data in jobs:
        if data is None:
            os.ftruncate(fd, 0)
            continue
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync is not None:
            fsync(fd)


class MessageStore(GenBatchServer):
    """Batches the records of every durable classic queue of the node into their files."""

    def init(self, args: tuple[str, Fsync | None]) -> Any:
        root, fsync = args
        make_dirs(root)
        return ("ok", _State(root, fsync))

    def handle_batch(self, ops: list[Any], state: _State) -> Any:
        buffers: dict[str, list[bytes]] = {}
        written: dict[Any, list[int]] = {}
        actions: list[Any] = []
        for op in ops:
            match op:
                case ("cast", ("write", pid, qdir, records, ids, large)):
                    buffers.setdefault(qdir, []).append(records)
                    written.setdefault(pid, []).extend(ids)
                    state.handled[pid] = state.handled.get(pid, 0) + large
                    state.live[qdir] = state.live.get(qdir, 0) + len(ids)
                case ("cast", ("remove", qdir, record, count)):
                    buffers.setdefault(qdir, []).append(record)
                    state.live[qdir] = state.live.get(qdir, 0) - count
                case ("cast", ("delete", qdir)):
                    buffers.pop(qdir, None)
                    state.live.pop(qdir, None)
                    self._delete(state, qdir)
                case ("call", from_, ("open", vhost, name, meta)):
                    actions.append(("reply", from_, self._open(state, vhost, name, meta)))
                case ("call", from_, ("recover",)):
                    self._flush(state, buffers)
                    actions.append(("reply", from_, self._recover(state)))
                case ("call", from_, ("recover_queue", qdir)):
                    self._flush(state, buffers)
                    actions.append(("reply", from_, self._read_log(state, qdir)))
                case _:
                    raise ValueError(f"message store: unexpected {op!r}")
        self._flush(state, buffers)
        more = MSG_STORE_CREDIT[1]
        for pid, ids in written.items():
            actors.send(pid, (STORE_WRITTEN, tuple(ids)))
            grants, state.handled[pid] = divmod(state.handled[pid], more)
            if grants:
                actors.send(pid, (STORE_CREDIT, grants * more))
            if not state.handled[pid]:
                del state.handled[pid]
        return ("ok", actions, state)

    def terminate(self, reason: Any, state: _State) -> None:
        for fd in state.fds.values():
            os.close(fd)
        state.fds.clear()

    def _flush(self, state: _State, buffers: dict[str, list[bytes]]) -> None:
        """One write per queue file, handed to the OS (synced only with `fsync`); a
        file none of whose messages is left is emptied instead.

        With `fsync` the writes and syncs run on the hub's thread pool: a sync takes
        the disk's time, during which the node's other processes (the queues and
        their channels) keep running instead of waiting with the store, and what
        they send the store meanwhile makes its next batch."""
        jobs: list[tuple[int, bytes | None]] = []
        for qdir, chunks in buffers.items():
            fd = state.fds.get(qdir)
            if fd is None:
                fd = open_private(os.path.join(state.root, qdir, "log"),
                                  os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                state.fds[qdir] = fd
            jobs.append((fd, None if state.live.get(qdir) == 0 else b"".join(chunks)))
        buffers.clear()
        if not jobs:
            return
        if state.fsync is None:
            _write_files(jobs, None)
        else:
            gevent.get_hub().threadpool.apply(_write_files, (jobs, state.fsync))

    def _open(self, state: _State, vhost: str, name: str, meta: Any) -> str:
        digest = hashlib.sha256(f"{vhost}\0{name}".encode()).hexdigest()[:16]
        qdir = f"{digest}-{secrets.token_hex(4)}"
        path = os.path.join(state.root, qdir)
        make_dirs(path)
        replace_file(os.path.join(path, "meta"), pickle.dumps(meta), os.fsync)
        fsync_dir(path)
        fsync_dir(state.root)
        return qdir

    def _delete(self, state: _State, qdir: str) -> None:
        fd = state.fds.pop(qdir, None)
        if fd is not None:
            os.close(fd)
        shutil.rmtree(os.path.join(state.root, qdir), ignore_errors=True)

    def _recover(self, state: _State) -> list[StoredQueue]:
        found: list[StoredQueue] = []
        for qdir in sorted(os.listdir(state.root)):
            meta_path = os.path.join(state.root, qdir, "meta")
            if not os.path.isfile(meta_path):
                # a queue whose creation never finished: it was never declared
                shutil.rmtree(os.path.join(state.root, qdir), ignore_errors=True)
                continue
            try:
                with open(meta_path, "rb") as f:
                    meta = pickle.load(f)
            except Exception as exc:  # whatever makes it unreadable
                # the node still starts; the files stay for an operator to look at
                log.error("message store: queue files %s unreadable, not recovered: %r",
                          qdir, exc)
                continue
            found.append(StoredQueue(qdir, meta, self._read_log(state, qdir)))
        return found

    @staticmethod
    def _read_log(state: _State, qdir: str) -> list[Recovered]:
        """Replay one queue's file (a torn last record is cut off)."""
        log_path = os.path.join(state.root, qdir, "log")
        data = b""
        if os.path.isfile(log_path):
            with open(log_path, "rb") as f:
                data = f.read()
        messages, whole = replay(data)
        if whole < len(data):
            os.truncate(log_path, whole)
        state.live[qdir] = len(messages)
        return messages


def start_link(root: str, name: str | None = STORE, fsync: Fsync | None = None) -> Any:
    """Start a store over `root` linked to the caller (a node's supervision tree);
    with `fsync`, each batch's files are synced before their queues are told."""
    return gen_batch_server.start_link(MessageStore(), (root, fsync), name=name)
