"""Durable classic queues on disk, seen from the channel side: what a message's
content is as bytes, what a queue's declare is as a saved record, and bringing
the node's durable classic queues back when it starts.

Why here and not in `classic/`: the queue core and the message store treat a
message's content as opaque; only the channel knows it is a `Message` (or a
dead-lettered quorum-queue message that becomes one when delivered). The store
keeps the bytes this module makes.

Recovery follows RabbitMQ after an unclean stop: every durable queue comes back
on its node, empty of transient messages (they were never written), with its
persistent messages in their order, each flagged ``redelivered`` (the queue
cannot know which of them had reached a consumer, so it says they may have).
Non-durable queues were never saved, so they are gone.
"""

from __future__ import annotations

import logging
import os
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors import gen_server
from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.classic.classic_args import queue_config
from channel.queue_types.classic.classic_directory import ClassicRecord
from channel.queue_types.qq_message import QqMessage
from classic import effects as e
from classic.msg_store import STORE, QueueStore, StoredQueue, open_queue, recover, start_link
from classic.queue_sup import start_queue
from classic.store_log import Recovered

if TYPE_CHECKING:
    from channel.queue_types.classic.classic_queue import ClassicBackend

__all__ = ["SavedDeclare", "child_specs", "decode_content", "encode_content", "open_store",
           "recover_queues", "reread"]

log = logging.getLogger("warren.classic")


@dataclass(frozen=True)
class SavedDeclare:
    """How a durable classic queue was declared: what a redeclare compares against."""

    vhost: str
    name: str
    durable: bool
    auto_delete: bool
    arguments: dict[str, Any]


def encode_content(content: Any) -> bytes:
    """A queued message's content as the store keeps it."""
    m = content.to_message() if isinstance(content, QqMessage) else content
    c = m.content
    return pickle.dumps((m.exchange, m.routing_key, tuple(m.routing_keys), c.properties_bin,
                         c.body, c.class_id), protocol=pickle.HIGHEST_PROTOCOL)


def decode_content(data: bytes) -> Message:
    exchange, routing_key, routing_keys, properties_bin, body, class_id = pickle.loads(data)
    return Message(exchange, routing_key, Content(properties_bin, body, class_id),
                   routing_keys)


def open_store(server: Any, declare: SavedDeclare) -> QueueStore:
    """Save a new durable queue's declare and get its handle on the store."""
    return open_queue(server, declare.vhost, declare.name, declare, encode_content)


def recover_queues(backend: ClassicBackend) -> int:
    """Start every durable classic queue the node's store holds; how many came back."""
    assert backend.store is not None
    count = 0
    for stored in recover(backend.store):
        declare: SavedDeclare = stored.meta
        config = queue_config(declare.name, declare.vhost, declare.arguments, durable=True,
                              auto_delete=declare.auto_delete, owner=None)
        handle = QueueStore(backend.store, stored.qdir, encode_content)
        result = start_queue(backend.queue_sup, config, backend.env, handle,
                             _deliveries(stored))
        if result[0] != "ok":
            log.error("classic queue %r in vhost %r not recovered: %r", declare.name,
                      declare.vhost, result)
            continue
        record = ClassicRecord(declare.vhost, declare.name, result[1], True,
                               declare.auto_delete, None, declare.arguments)
        holder = backend.directory.recover(record)
        if holder is not None and holder.pid == record.pid:
            count += 1
            continue
        gen_server.stop(result[1])
        if holder is None:
            # deleted while this node was down: its messages go too, as in RabbitMQ
            handle.delete()
        else:
            log.warning("classic queue %r in vhost %r: a queue on %s holds the name; "
                        "its files stay, the queue is not started", declare.name,
                        declare.vhost, holder.node)
    return count


def reread(handle: QueueStore) -> tuple[e.Delivery, ...]:
    """What a durable queue restarted after a crash holds: its stored messages in
    order, each flagged redelivered as after an unclean stop."""
    return _from_records(handle.reread())


def _deliveries(stored: StoredQueue) -> tuple[e.Delivery, ...]:
    return _from_records(stored.messages)


def _from_records(records: list[Recovered]) -> tuple[e.Delivery, ...]:
    return tuple(e.Delivery(m.msg_id, True, m.exchange, m.routing_keys, m.size, True,
                            m.priority, m.expiration, decode_content(m.content))
                 for m in records)


def child_specs(backend: Any, data_dir: str | None,
                sync: bool = False) -> list[dict[str, Any]]:
    """The node's message store and the recovery of its durable classic queues, as
    children of the node's supervisor, after the queue supervisor and before the
    listener (no channel sees the node before its durable queues are back).

    None on a node without a data dir, or whose backend has no classic queues:
    there a persistent message is confirmed on arrival and lives in memory only.
    With `sync` (the release's `classic_confirm_after_fsync`) the store syncs what
    it wrote before the queues confirm it."""
    classic = getattr(backend, "classic", None)
    if data_dir is None or classic is None or not hasattr(classic, "store"):
        return []
    root = os.path.join(data_dir, "msg_stores", "vhosts")
    fsync = os.fsync if sync else None
    return [{"id": STORE, "start": (start_link, [root, STORE, fsync]), "shutdown": 30_000},
            {"id": "rabbit_classic_queue_recovery", "start": (_recover_child, [classic]),
             "restart": "transient"}]


def _recover_child(classic: ClassicBackend) -> str:
    classic.store = STORE
    count = recover_queues(classic)
    if count:
        log.info("recovered %d durable classic queue(s)", count)
    return "ignore"
