"""At-most-once dead lettering from classic queues (``rabbit_dead_letter`` for a classic queue).

The classic queue process hands over a `DeadLetter` effect and forgets the
messages. This module does what RabbitMQ does with them: record the death on
each message (the same ``x-death`` / ``x-first-death-*`` / ``x-last-death-*``
headers quorum queues give, the ``expiration`` property moved to
``original-expiration``), give it the dead-letter routing key or keep its own
keys (3.10 also drops the message's ``CC`` header when the queue's own routing
key replaces its keys, the release's ``dead_letter_key_drops_cc``), route it
through the dead-letter exchange, drop targets that would close a dead-letter
cycle, and enqueue it without confirms in every classic and
quorum queue it reaches. A missing dead-letter exchange drops the messages.

It runs inside the source queue's process, so it must not block: routing
reads the node's copy of the topology, and the enqueues are casts to classic
queue processes and pipelined commands to quorum queue leaders.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import actors
from actors import gen_server
from channel.exchanges.exchange import Topology
from channel.queue_types.header_table import drop_header
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.queue_registry import QueueRegistry
from classic import commands as c
from classic import effects as e
from fifo.commands import make_enqueue
from fifo.dlx_worker import detect_cycles
from ra import api
from releases import Release

if TYPE_CHECKING:
    from channel.queue_types.classic.classic_queue import ClassicBackend

__all__ = ["ClassicDeadLetter", "enqueue", "stored", "without_cc"]

log = logging.getLogger("warren.channel.dlx")


def stored(content: Any) -> QqMessage:
    """The message as a container that keeps its death history across queues."""
    return content if isinstance(content, QqMessage) else QqMessage.from_message(content)


def without_cc(msg: QqMessage) -> QqMessage:
    """3.10's ``rabbit_dead_letter:make_msg``: a dead letter sent with the queue's own
    routing key loses its ``CC`` header (the rest of the table as the publisher sent it)."""
    return replace(msg, properties_bin=drop_header(msg.properties_bin, "CC"))


def enqueue(pid: Any, dead: QqMessage, persistent: bool) -> None:
    """Enqueue a dead letter in a classic queue process, without a confirm."""
    keys = tuple(dead.routing_keys or (dead.routing_key,))
    gen_server.cast(pid, c.Deliver(None, None, dead.exchange, keys, len(dead.body),
                                   persistent=persistent, priority=dead.priority,
                                   content=dead))


class ClassicDeadLetter:
    """The dead-letter hook of a node's classic queues."""

    def __init__(self, topology: Topology, classic: ClassicBackend,
                 registry: QueueRegistry | None = None,
                 release: Release | None = None) -> None:
        self.topology = topology
        self.classic = classic
        self.registry = registry
        #: the node's release: the quorum queues' registry's unless given
        self.release = release if release is not None or registry is None \
            else registry.release

    def __call__(self, dead_letter: e.DeadLetter) -> None:
        vhost, exchange = dead_letter.vhost, dead_letter.exchange
        if self.topology.lookup(vhost, exchange) is None:
            log.debug("dead-letter exchange %r of %r does not exist; %d message(s) dropped",
                      exchange, dead_letter.queue, len(dead_letter.messages))
            return
        now = int(actors.get_node().clock.system_time_ms())
        for delivery in dead_letter.messages:
            self._publish(dead_letter, delivery, now)

    def _publish(self, dl: e.DeadLetter, delivery: e.Delivery, now: int) -> None:
        msg = stored(delivery.content)
        keys = msg.mc_get_annotation("routing_keys") if dl.routing_key is None \
            else [dl.routing_key]
        dead = msg.mc_record_death(dl.reason, dl.queue, now)
        dead = dead.mc_set_annotation("routing_keys", keys).mc_set_annotation(
            "exchange", dl.exchange)
        if dl.routing_key is not None and self.release is not None \
                and self.release.dead_letter_key_drops_cc:
            dead = without_cc(dead)
        routed = self.topology.route(dl.vhost, dl.exchange, list(keys), dead.headers())
        cyclic, targets = detect_cycles(dl.reason, dead, routed)
        if cyclic:
            log.warning("message dead-lettered in a cycle from %r to %r; dropping those "
                        "copies", dl.queue, cyclic)
        for name in targets:
            record = self.classic.lookup(dl.vhost, name)
            if record is not None:
                enqueue(record.pid, dead, delivery.persistent)
                continue
            quorum = None if self.registry is None else self.registry.lookup(dl.vhost, name)
            if quorum is not None:
                server = quorum.leader or quorum.servers[0]
                api.pipeline_command(server, make_enqueue(None, None, dead))
