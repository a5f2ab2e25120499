"""Exchanges and bindings shared by the whole cluster.

A channel only knows `channel.exchanges.exchange.Topology`. `ReplicatedTopology` is one
whose reads (lookup, route, bindings) come from the node's copy of the
metadata store and whose changes are metadata commands, so a binding made
through any node routes on every node. The checks that need this node's
knowledge (does the bound queue exist here, for the queue backend in use)
run before the command; the rest run inside the machine, with the same
`Topology` code and therefore the same errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.store import Metadata
from channel.errors import AmqpError, rs
from channel.exchanges.exchange import DEFAULT_EXCHANGE_ERROR, Exchange, Topology, _VHost

__all__ = ["ReplicatedTopology"]


class ReplicatedTopology(Topology):
    def __init__(self, metadata: Metadata) -> None:  # no local tables of its own
        self.metadata = metadata

    @property
    def vhosts(self) -> dict[str, _VHost]:  # type: ignore[override]  # read-only: metadata's
        return self.metadata.view.state.topology.vhosts

    def add_vhost(self, vhost: str) -> None:
        self.metadata.command(("add_vhost", vhost))

    def declare(self, vhost: str, name: str, type_: str, *, passive: bool = False,
                durable: bool = False, auto_delete: bool = False, internal: bool = False,
                arguments: Mapping[str, Any] | None = None) -> Exchange:
        if passive:
            return super().declare(vhost, name, type_, passive=True)
        existing = self.lookup(vhost, name)
        flags = {"durable": durable, "auto_delete": auto_delete, "internal": internal}
        if existing is not None:  # equivalence only: no need to write
            return super().declare(vhost, name, type_, **flags, arguments=arguments)
        self.metadata.command(("declare_exchange", vhost, name, type_, flags,
                               dict(arguments or {})))
        return self.lookup_or_die(vhost, name)

    def delete(self, vhost: str, name: str, *, if_unused: bool = False) -> None:
        self.metadata.command(("delete_exchange", vhost, name, if_unused))

    def bind(self, vhost: str, source: str, kind: str, destination: str, key: str,
             arguments: Mapping[str, Any] | None, queue_exists: Callable[[str], bool]) -> None:
        if source == "" or (kind == "exchange" and destination == ""):
            raise AmqpError("ACCESS_REFUSED", DEFAULT_EXCHANGE_ERROR)
        self.lookup_or_die(vhost, source)
        if kind == "queue" and not queue_exists(destination):
            raise AmqpError("NOT_FOUND", f"no {rs('queue', destination, vhost)}")
        self.metadata.command(("bind", vhost, source, kind, destination, key,
                               dict(arguments or {})))

    def unbind(self, vhost: str, source: str, kind: str, destination: str, key: str,
               arguments: Mapping[str, Any] | None) -> None:
        self.metadata.command(("unbind", vhost, source, kind, destination, key,
                               dict(arguments or {})))

    def remove_queue(self, vhost: str, queue: str) -> None:
        """Bindings of a queue deleted outside the store (a node-local test backend)."""
        for source, bindings in self._vh(vhost).bindings.items():
            for b in bindings:
                if b.kind == "queue" and b.destination == queue:
                    self.unbind(vhost, source, "queue", queue, b.key, b.args)
