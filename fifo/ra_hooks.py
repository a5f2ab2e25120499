"""What the machine's leader-side calls do when the queue runs on Ra.

`rabbit_fifo` names RabbitMQ modules in its ``mod_call`` effects
(``rabbit_quorum_queue``, ``rabbit_global_counters``, ``logger``). Ra executes a
``mod_call`` inside the leader's process, so each name needs a target in
warren. Counters and log lines become trace points (``actors.trace.emit``) and
log records; the calls that belong to the broker's queue metadata (consumer
metrics, decorators) are recorded the same way until the broker package owns
them. None of them may block: they run in the Ra server's process.

``dead_letter_publish`` (at-most-once dead lettering) needs the node's exchanges
and queues, which `fifo` does not know: the node installs a publisher for it
(`set_dead_letter_publisher`, keyed by node name because several nodes may
share one OS process). Without one, dead letters are dropped and counted as
``disabled``. ``spawn_deleter`` (the machine's request to delete a queue that
expired) needs the node's queue table too: the node installs a deleter
(`set_queue_deleter`, `channel.queue_types.quorum.qq_delete`); without one the request is only
recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import actors
from actors import trace

__all__ = [
    "MODULES",
    "logger",
    "rabbit_global_counters",
    "rabbit_quorum_queue",
    "set_dead_letter_publisher",
    "set_queue_deleter",
]

log = logging.getLogger("warren.fifo")


#: node name -> ``publish(exchange, routing_key, queue_resource, reason, msgs)``
_PUBLISHERS: dict[str, Callable[..., None]] = {}


def set_dead_letter_publisher(node_name: str, publisher: Callable[..., None] | None) -> None:
    """Install (or with None remove) the node's at-most-once dead-letter publisher."""
    if publisher is None:
        _PUBLISHERS.pop(node_name, None)
    else:
        _PUBLISHERS[node_name] = publisher


#: node name -> ``delete(queue_resource)``, which must not block
_DELETERS: dict[str, Callable[[Any], None]] = {}


def set_queue_deleter(node_name: str, deleter: Callable[[Any], None] | None) -> None:
    """Install (or with None remove) the node's deleter of expired queues."""
    if deleter is None:
        _DELETERS.pop(node_name, None)
    else:
        _DELETERS[node_name] = deleter


def _record(kind: str, fun: str, args: tuple[Any, ...]) -> None:
    if trace.enabled():
        trace.emit(kind, fun=fun, args=args)


class _QuorumQueue:
    """``rabbit_quorum_queue``: metrics and lifecycle hooks of the broker."""

    def spawn_notify_decorators(self, *args: Any) -> None:
        _record("fifo_queue_hook", "spawn_notify_decorators", args)

    def cancel_consumer_handler(self, *args: Any) -> None:
        _record("fifo_queue_hook", "cancel_consumer_handler", args)

    def update_consumer_handler(self, *args: Any) -> None:
        _record("fifo_queue_hook", "update_consumer_handler", args)

    def handle_tick(self, *args: Any) -> None:
        _record("fifo_queue_hook", "handle_tick", args)

    # 3.10's file-handle reservations (the log's open segments); warren's
    # processes have no file-handle budget, so they are only recorded
    def file_handle_leader_reservation(self, *args: Any) -> None:
        _record("fifo_queue_hook", "file_handle_leader_reservation", args)

    def file_handle_other_reservation(self, *args: Any) -> None:
        _record("fifo_queue_hook", "file_handle_other_reservation", args)

    def file_handle_release_reservation(self, *args: Any) -> None:
        _record("fifo_queue_hook", "file_handle_release_reservation", args)

    def spawn_deleter(self, queue_resource: Any) -> None:
        _record("fifo_queue_hook", "spawn_deleter", (queue_resource,))
        deleter = _DELETERS.get(actors.node())
        if deleter is None:
            log.debug("no queue deleter on %s: expired %r kept", actors.node(), queue_resource)
            return
        deleter(queue_resource)

    def dead_letter_publish(self, exchange: Any, routing_key: Any, queue_resource: Any,
                            reason: str, msgs: list[Any]) -> None:
        publisher = _PUBLISHERS.get(actors.node())
        if publisher is None:
            log.warning("no dead-letter publisher on %s: %d message(s) from %r dropped",
                        actors.node(), len(msgs), queue_resource)
            rabbit_global_counters.messages_dead_lettered(
                reason, "rabbit_quorum_queue", "disabled", len(msgs))
            return
        try:
            publisher(exchange, routing_key, queue_resource, reason, msgs)
        except Exception:  # a publishing failure must not take the queue's leader down
            log.exception("dead-lettering %d message(s) from %r failed", len(msgs),
                          queue_resource)


class _GlobalCounters:
    """``rabbit_global_counters``: dead-letter counters."""

    def messages_dead_lettered(self, *args: Any) -> None:
        _record("fifo_counter", "messages_dead_lettered", args)

    def messages_dead_lettered_confirmed(self, *args: Any) -> None:
        _record("fifo_counter", "messages_dead_lettered_confirmed", args)


class _Logger:
    """``logger``: Erlang-style format strings are logged with their arguments."""

    def debug(self, fmt: str, args: Any = ()) -> None:
        log.debug("%s %r", fmt, args)

    def info(self, fmt: str, args: Any = ()) -> None:
        log.info("%s %r", fmt, args)

    def warning(self, fmt: str, args: Any = ()) -> None:
        log.warning("%s %r", fmt, args)


rabbit_quorum_queue = _QuorumQueue()
rabbit_global_counters = _GlobalCounters()
logger = _Logger()

#: module atom in a ``mod_call`` effect -> the object whose method Ra calls
MODULES: dict[str, Any] = {
    "rabbit_quorum_queue": rabbit_quorum_queue,
    "rabbit_global_counters": rabbit_global_counters,
    "logger": logger,
}
