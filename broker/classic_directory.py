"""The classic queue table over the metadata store, so every node finds every classic queue.

RabbitMQ keeps all queues, whatever their type, in one replicated table: a
channel on any node looks a classic queue up there and reaches its process on
the home node. `MetadataDirectory` is that table for warren's classic queues:
reads come from the node's copy of the metadata store, writes are metadata
commands (a record is added once its queue process runs, and removed when
that process deletes the queue). When a node goes down, every other node
removes the records of that node's transient queues (`node_down`), as
`rabbit_amqqueue:on_node_down` does; durable records stay until the node
comes back or the queue is deleted.
"""

from __future__ import annotations

import logging

from actors.pid import Pid
from broker.metadata import classic_queues
from broker.store import Metadata, StoreUnavailable
from channel.errors import AmqpError, rs
from channel.queue_types.classic.classic_directory import ClassicRecord

__all__ = ["MetadataDirectory"]

log = logging.getLogger("warren.broker")


class MetadataDirectory:
    """`channel.queue_types.classic.classic_directory.ClassicDirectory` over the node's
    metadata store."""

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata

    def lookup(self, vhost: str, name: str) -> ClassicRecord | None:
        return classic_queues(self.metadata.view.state).get((vhost, name))

    def list(self, vhost: str | None = None) -> list[ClassicRecord]:
        return [r for r in classic_queues(self.metadata.view.state).values()
                if vhost is None or r.vhost == vhost]

    def insert(self, record: ClassicRecord) -> ClassicRecord:
        _outcome, stored = self.metadata.command(("declare_classic_queue", record))
        if stored is None:  # a queue of another type holds the name
            raise AmqpError("PRECONDITION_FAILED",
                            f"{rs('queue', record.name, record.vhost)} exists with another type")
        return stored

    def recover(self, record: ClassicRecord) -> ClassicRecord | None:
        """Point the record of a durable queue of this node at its restarted process,
        keeping its bindings; the record that holds the name after this, or ``None``
        when the queue was deleted while the node was down."""
        _outcome, stored = self.metadata.command(("recover_classic_queue", record))
        return stored

    def remove(self, vhost: str, name: str, pid: Pid) -> bool:
        _ok, count = self.metadata.command(("delete_classic_queue", vhost, name, pid))
        return bool(count)

    def node_down(self, node: str) -> None:
        """Forget the transient classic queues of a node that went down."""
        if not any(r.node == node and not r.durable for r in self.list()):
            return
        try:
            self.metadata.command(("classic_node_down", node))
        except StoreUnavailable as exc:
            log.warning("transient queues of %s not removed: %s", node, exc)
