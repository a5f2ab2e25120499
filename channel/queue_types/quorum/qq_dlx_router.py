"""The dead-letter worker's way into exchanges and quorum queues (at-least-once).

`fifo.dlx_worker` forwards a quorum queue's dead letters through a
`fifo.dlx_router.DeadLetterRouter`. This is the node's real one: it reads the
source queue's dead-letter settings from the queue registry (argument over
policy), routes through the node's topology, and publishes with confirms
through a `QuorumSession` owned by the worker process — the same fifo client
sessions a channel uses, so the targets' leaders track the worker as an
enqueuer, resend after leader changes and confirm every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import actors
from channel.exchanges.exchange import Topology
from channel.queue_types.backend import Rejected, Settled
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.quorum.quorum_queue import QuorumBackend, QuorumSession
from fifo.dlx_router import RouterFactory

__all__ = ["QuorumDlxRouter", "router_factory"]

#: the user the worker's publishes are attributed to
DLX_USER = "rabbit_fifo_dlx_worker"


class QuorumDlxRouter:
    """One worker's router: one source queue's vhost, one session with the targets."""

    def __init__(self, backend: QuorumBackend, topology: Topology, queue_resource: Any) -> None:
        _res, vhost, _kind, _name = queue_resource
        self.backend = backend
        self.topology = topology
        self.vhost: str = vhost
        me = actors.self()
        self.session = QuorumSession(backend, me, vhost, me, DLX_USER, None)

    def lookup_topology(self, queue_resource: Any) -> tuple[Any, Any]:
        _res, vhost, _kind, name = queue_resource
        record = self.backend.registry.lookup(vhost, name)
        if record is None:
            return (None, None)
        args, policy = record.arguments, record.policy
        exchange = args.get("x-dead-letter-exchange", policy.get("dead-letter-exchange"))
        key = args.get("x-dead-letter-routing-key", policy.get("dead-letter-routing-key"))
        return (exchange, key)

    def exchange_exists(self, exchange: Any) -> bool:
        return isinstance(exchange, str) and self.topology.lookup(self.vhost, exchange) is not None

    def route(self, exchange: Any, routing_keys: Sequence[Any], msg: Any) -> list[Any]:
        headers = msg.headers() if isinstance(msg, QqMessage) else None
        routed = self.topology.route(self.vhost, exchange, list(routing_keys), headers)
        return [q for q in routed if self.backend.registry.lookup(self.vhost, q) is not None]

    def publish(self, queues: Sequence[Any], msg: Any, correlation: int) -> tuple[str, Any]:
        if not isinstance(msg, QqMessage):
            return ("error", ("not_a_stored_message", msg))
        return ("ok", _outcomes(self.session.deliver_stored(list(queues), msg, correlation)))

    def handle_event(self, queue: Any, event: Any) -> list[Any]:
        if isinstance(event, tuple) and event[:1] == ("ra_event",):
            actions = self.session.handle_event(event)
        else:
            actions = self.session.handle_event(("$gen_cast", ("queue_event", queue, event)))
        return _outcomes(actions or [])

    def redelivers(self, queue: Any) -> bool:
        return True  # every target is a quorum queue, whose session resends by itself


def _outcomes(actions: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for a in actions:
        if isinstance(a, Settled):
            out.append(("settled", a.queue, list(a.seqnos)))
        elif isinstance(a, Rejected):
            out.append(("rejected", a.queue, list(a.seqnos)))
    return out


def router_factory(backend: QuorumBackend, topology: Topology) -> RouterFactory:
    """The `DlxWorkerEnv.router_factory` of a node."""
    return lambda queue_resource: QuorumDlxRouter(backend, topology, queue_resource)
