"""At-most-once dead lettering of quorum queues (`rabbit_quorum_queue:dead_letter_publish`).

The queue machine decides *that* messages are dead-lettered; this module does
the rest, the way RabbitMQ's `rabbit_dead_letter` does: record the death on
each message, give it the dead-letter routing key (or keep its own keys) and
exchange, route it through the node's exchanges, drop targets that would
close a dead-letter cycle and enqueue it in every remaining queue without
confirms: quorum queues, and the classic queues of this node. It runs inside
the source queue's leader (the machine's ``mod_call``), so it must not block:
routing reads the node's copy of the topology, and the enqueues are Ra casts
and casts to classic queue processes.

It also builds the machine's ``dead_letter_handler`` from the effective
dead-letter settings, so the registries that start queues and the policy
code that reconfigures them agree on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import actors
from channel.exchanges.exchange import Topology
from channel.protocol.framing import Content
from channel.queue_types.classic.classic_dead_letter import enqueue, without_cc
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.queue_registry import QueueRegistry
from fifo import ra_hooks
from fifo.commands import make_enqueue
from fifo.dlx_worker import detect_cycles
from ra import api

__all__ = ["DeadLetterPublisher", "handler", "install", "uninstall"]

log = logging.getLogger("warren.channel.dlx")

#: the machine's at-most-once callback: ``rabbit_quorum_queue:dead_letter_publish``
PUBLISH_MFA = ("rabbit_quorum_queue", "dead_letter_publish")


def handler(exchange: str | None, routing_key: str | None, strategy: str | None,
            overflow: str, queue_resource: Any) -> Any:
    """The ``dead_letter_handler`` for effective settings, as upstream's.

    No exchange: ``None`` (dead letters are dropped). ``at-least-once`` with
    ``reject-publish`` overflow: ``"at_least_once"``; with any other overflow
    it falls back, with a warning, to at-most-once, which is also the default.
    """
    if exchange is None:
        return None
    if strategy == "at-least-once":
        if overflow == "reject-publish":
            return "at_least_once"
        log.warning("dead-letter-strategy at-least-once is not compatible with overflow %s; "
                    "falling back to at-most-once for %r", overflow, queue_resource)
    return ("at_most_once", (*PUBLISH_MFA, [exchange, routing_key, queue_resource]))


class DeadLetterPublisher:
    """One node's at-most-once dead-letter publishing, over its topology and queues."""

    def __init__(self, topology: Topology, registry: QueueRegistry,
                 classic: Any = None) -> None:
        self.topology = topology
        self.registry = registry
        #: the node's `ClassicBackend`, whose queues take dead letters too
        self.classic = classic

    def __call__(self, exchange: str, routing_key: str | None, queue_resource: Any,
                 reason: str, msgs: Sequence[Any]) -> None:
        _res, vhost, _kind, source = queue_resource
        if self.topology.lookup(vhost, exchange) is None:
            log.debug("dead-letter exchange %r of %r does not exist; %d message(s) dropped",
                      exchange, source, len(msgs))
            ra_hooks.rabbit_global_counters.messages_dead_lettered(
                reason, "rabbit_quorum_queue", "disabled", len(msgs))
            return
        for msg in msgs:
            if isinstance(msg, QqMessage):
                self._publish(vhost, exchange, routing_key, source, reason, msg)
            else:
                log.warning("cannot dead-letter %r from %r: not a stored message", msg, source)
        ra_hooks.rabbit_global_counters.messages_dead_lettered(
            reason, "rabbit_quorum_queue", "at_most_once", len(msgs))

    def _publish(self, vhost: str, exchange: str, routing_key: str | None, source: str,
                 reason: str, msg: QqMessage) -> None:
        now = int(actors.get_node().clock.system_time_ms())
        keys = msg.mc_get_annotation("routing_keys") if routing_key is None else [routing_key]
        dead = msg.mc_record_death(reason, source, now)
        dead = dead.mc_set_annotation("routing_keys", keys).mc_set_annotation(
            "exchange", exchange)
        if routing_key is not None and self.registry.release.dead_letter_key_drops_cc:
            dead = without_cc(dead)
        routed = self.topology.route(vhost, exchange, list(keys), dead.headers())
        records = {q: self.registry.lookup(vhost, q) for q in routed}
        classic = {q: self.classic.lookup(vhost, q) for q, r in records.items()
                   if r is None and self.classic is not None}
        cyclic, targets = detect_cycles(reason, dead, [q for q in routed
                                                       if records[q] or classic.get(q)])
        if cyclic:
            log.warning("message dead-lettered in a cycle from %r to %r; dropping those "
                        "copies", source, cyclic)
        for q in targets:
            record = records[q]
            if record is None:
                enqueue(classic[q].pid, dead, persistent=_persistent(dead))
                continue
            server = record.leader or record.servers[0]
            api.pipeline_command(server, make_enqueue(None, None, dead))


def _persistent(msg: QqMessage) -> bool:
    props = Content(msg.properties_bin, msg.body, msg.class_id).properties()
    return props.delivery_mode == 2


def install(node_name: str, publisher: DeadLetterPublisher) -> None:
    """Make `publisher` the node's ``dead_letter_publish`` target."""
    ra_hooks.set_dead_letter_publisher(node_name, publisher)


def uninstall(node_name: str) -> None:
    ra_hooks.set_dead_letter_publisher(node_name, None)
