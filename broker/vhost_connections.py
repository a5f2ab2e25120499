"""The connections of a deleted vhost are closed on every node.

RabbitMQ's `rabbit_connection_tracking` handles the `vhost_deleted` event on
each node by closing that node's connections to the vhost with `320
CONNECTION_FORCED - vhost 'V' is deleted`; the vhost's queues are deleted
before that (their consumers get `basic.cancel`), so a client sees its
consumers cancelled first and then its connection closed. Here the node that
deletes the vhost asks each running member of the cluster, itself included,
to close its own readers on it (an rpc, as `rabbitmqctl` reaches a node).
"""

from __future__ import annotations

import logging

import actors
from broker.running import broker_of
from ra import system as ra_system

__all__ = ["close_everywhere", "close_here"]

log = logging.getLogger("warren.broker")

PEER_TIMEOUT = 5000
"""How long a peer is given to say it has told its readers (ms)."""


def close_here(vhost: str) -> int:
    """Runs on each node (by rpc): every reader of this node on `vhost` closes its
    connection; how many were told."""
    text = f"vhost '{vhost}' is deleted"
    readers = [r for r in list(broker_of().ctx.readers.values()) if r.vhost == vhost]
    for reader in readers:
        actors.send(reader.me, ("force_close", text))
    if readers:
        log.info("Closing all connections in vhost '%s' because it's being deleted", vhost)
    return len(readers)


def close_everywhere(vhost: str) -> None:
    """Every running node closes its connections to `vhost`; a node that does not
    answer is logged and skipped (its connections fail on their next use)."""
    me = actors.node()
    for peer in broker_of().registry.running_nodes():
        if peer == me:
            close_here(vhost)
            continue
        result = ra_system.rpc(peer, close_here, vhost, timeout=PEER_TIMEOUT)
        if not isinstance(result, int):
            log.warning("connections to vhost '%s' on %s not closed: %r", vhost, peer, result)
