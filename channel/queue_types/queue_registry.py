"""Where a channel finds a quorum queue's Ra cluster (the queue table of the metadata store).

A `QueueRegistry` is node-wide. The broker implements it over the metadata
store (a Ra cluster of its own); tests that run without a broker use
`LocalRegistry`, which keeps records in memory for the nodes of one OS process.
Calls are made from a warren process and may block it (they wait for Ra).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from releases import Release

ServerId = tuple[str, str]  # (ra server name, node name)


@dataclass(frozen=True)
class QueueRecord:
    vhost: str
    name: str
    durable: bool
    arguments: Mapping[str, Any]
    #: the queue's Ra cluster name (unique, e.g. "%2F_q1") and its members
    ra_name: str
    servers: tuple[ServerId, ...]
    leader: ServerId | None = None
    #: the effective policy definition (key -> value) applied to this queue
    policy: Mapping[str, Any] = field(default_factory=dict)
    #: the connection owning an exclusive queue (quorum queues: always None)
    owner: Any = None


class QueueRegistry(Protocol):
    release: Release
    """The node's release: the machine version (and config defaults) of the queues
    it declares, which the channel's fifo clients speak."""

    def lookup(self, vhost: str, name: str) -> QueueRecord | None: ...

    def declare(self, vhost: str, name: str, *, durable: bool,
                arguments: Mapping[str, Any], declaring_node: str) -> tuple[str, QueueRecord]:
        """Create the record and start the queue's Ra cluster on
        x-quorum-initial-group-size nodes chosen by the leader locator (or
        return the existing one): ("created" | "existing", record). Raises
        channel.errors.AmqpError for RabbitMQ's errors."""
        ...

    def delete(self, vhost: str, name: str) -> None:
        """Remove the record and delete the Ra cluster (idempotent)."""
        ...

    def update_leader(self, vhost: str, name: str, leader: ServerId) -> None: ...

    def list(self, vhost: str | None = None) -> list[QueueRecord]: ...
