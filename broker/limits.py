"""Vhost limits served from the metadata store, and the cluster-wide counts of the limits.

Limits are set on any node and must hold on every node, so they live in the
replicated metadata store (vhost limits in the state's `vhost_limits`, user
limits on the users' records) and each node reads them from its copy, as it
reads users and permissions.

What they are counted against is not replicated. RabbitMQ keeps per-node
tracking tables and, to check a vhost or user limit, sums them over the
running nodes (`rabbit_tracking:count_on_all_nodes`, an `erpc:multicall`).
warren does the same: a node counts its own live readers
(`channel.limits.limits.local_count`) and asks each connected cluster peer for its
count with an rpc. A peer that does not answer counts as 0 (RabbitMQ logs and
skips it too), so a partition can admit more connections than the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import actors
from broker.running import broker_of
from broker.store import Metadata
from channel.limits.limits import VhostLimits, local_count
from ra import system as ra_system

if TYPE_CHECKING:
    from broker.node import BrokerNode

__all__ = ["ReplicatedVhostLimits", "count_here", "peer_counter"]

log = logging.getLogger("warren.broker")

#: how long a node waits for a peer's count before counting it as 0 (ms)
PEER_COUNT_TIMEOUT = 5000


class ReplicatedVhostLimits(VhostLimits):
    """The vhost limits table of the node's metadata copy (writes go through `warren ctl`)."""

    def __init__(self, metadata: Metadata) -> None:
        super().__init__()
        self.metadata = metadata

    def get(self, vhost: str) -> Mapping[str, Any]:
        return self.metadata.view.state.vhost_limits.get(vhost, {})

    def set(self, vhost: str, definition: Mapping[str, Any]) -> None:
        self.metadata.command(("set_vhost_limits", vhost, dict(definition)))

    def clear(self, vhost: str) -> None:
        self.metadata.command(("clear_vhost_limits", vhost))


def count_here(kind: str, key: str) -> int:
    """Runs on a peer (by rpc): that node's own count."""
    return local_count(broker_of().ctx.readers.values(), kind, key)


def peer_counter(broker: BrokerNode) -> Any:
    """`BrokerContext.peer_count` of `broker`: the sum of its running peers' counts."""

    def peer_count(kind: str, key: str) -> int:
        me = actors.node()
        total = 0
        for peer in broker.registry.running_nodes():
            if peer == me:
                continue
            count = ra_system.rpc(peer, count_here, kind, key, timeout=PEER_COUNT_TIMEOUT)
            if isinstance(count, int):
                total += count
            else:
                log.error("Failed to fetch number of %s %s on node %s: %r",
                          kind, key, peer, count)
        return total

    return peer_count
