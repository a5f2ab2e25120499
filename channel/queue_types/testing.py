"""An in-memory, classic-queue-like backend for tests of the channel layer.

It implements `channel.queue_types.backend.QueueBackend` with plain FIFO queues held in
the node's memory: no replication, no Raft, no quorum-queue semantics (it
refuses `x-queue-type` other than `classic`). Confirms, deliveries and queue
deletion reach channels asynchronously as mailbox messages, as they do from
real queues, so the channel's event paths are exercised. `hold` / `release`
make a queue withhold confirms and push back on its publishers the way a slow
queue does, which is how tests drive credit flow.
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actors import Node
from channel.errors import AmqpError, rs
from channel.limits.limits import QueueLimits
from channel.queue_types.backend import (
    Action,
    Block,
    ConsumerCancelled,
    ConsumeSpec,
    DeclareOk,
    Deliver,
    Delivery,
    Got,
    Message,
    QueueEol,
    Rejected,
    Settled,
    Unblock,
)
from channel.queue_types.consumer_args import check_consume_arguments
from channel.queue_types.consumer_timeout import queue_timeout
from channel.queue_types.queue_args import Declared, check_equivalence

__all__ = ["MemoryBackend", "MemoryQueue", "MemorySession"]

EVENT = "queue_event"


@dataclass
class _Consumer:
    channel: Any
    spec: ConsumeSpec
    in_flight: int = 0


@dataclass
class MemoryQueue:
    vhost: str
    name: str
    durable: bool
    auto_delete: bool
    owner: Any
    arguments: dict[str, Any]
    ready: deque[Delivery] = field(default_factory=deque)
    consumers: dict[tuple[Any, str], _Consumer] = field(default_factory=dict)
    checked_out: dict[Any, tuple[Any, str | int, Delivery]] = field(default_factory=dict)
    held: bool = False
    withheld: list[tuple[Any, int]] = field(default_factory=list)
    blocked: set[Any] = field(default_factory=set)
    had_consumers: bool = False
    rr: int = 0


class MemoryBackend:
    """Queues of one node, in memory. Events are sent with `node.send`."""

    def __init__(self, node: Node,
                 on_deleted: Callable[[str, str], None] | None = None) -> None:
        self.node = node
        self.queues: dict[tuple[str, str], MemoryQueue] = {}
        self.on_deleted = on_deleted
        #: `BrokerContext.check_queue_limits`, asked before a queue is created
        self.queue_limits: QueueLimits | None = None
        self._ids = itertools.count(1)

    def queue_count(self, vhost: str | None = None) -> int:
        """Queues of `vhost` (all queues for None), as the queue limits count them."""
        if vhost is None:
            return len(self.queues)
        return sum(1 for vh, _name in self.queues if vh == vhost)

    # -------------------------------------------------------- QueueBackend

    def session(self, channel: Any, vhost: str, owner: Any, user: str) -> MemorySession:
        return MemorySession(self, channel, vhost, owner)

    def connection_closed(self, owner: Any) -> None:
        for q in list(self.queues.values()):
            if q.owner is not None and q.owner == owner:
                self.remove(q)

    # ------------------------------------------------------------ test hooks

    def queue(self, vhost: str, name: str) -> MemoryQueue | None:
        return self.queues.get((vhost, name))

    def hold(self, vhost: str, name: str) -> None:
        """Withhold confirms and block publishers, like a queue that cannot keep up."""
        self.queues[(vhost, name)].held = True

    def release(self, vhost: str, name: str) -> None:
        q = self.queues[(vhost, name)]
        q.held = False
        withheld, q.withheld = q.withheld, []
        for channel in sorted(q.blocked, key=repr):
            self.node.send(channel, (EVENT, name, ("unblock",)))
        q.blocked.clear()
        by_channel: dict[Any, list[int]] = {}
        for channel, seqno in withheld:
            by_channel.setdefault(channel, []).append(seqno)
        for channel, seqnos in by_channel.items():
            self.node.send(channel, (EVENT, name, ("settled", tuple(seqnos))))

    # -------------------------------------------------------------- internals

    def remove(self, q: MemoryQueue) -> int:
        self.queues.pop((q.vhost, q.name), None)
        notified = set()
        for (channel, tag) in q.consumers:
            self.node.send(channel, (EVENT, q.name, ("cancelled", tag)))
            notified.add(channel)
        for channel in {c for c, _ in q.withheld} | q.blocked | notified:
            self.node.send(channel, (EVENT, q.name, ("eol",)))
        if self.on_deleted is not None:
            self.on_deleted(q.vhost, q.name)
        return len(q.ready)

    def dispatch(self, q: MemoryQueue) -> None:
        """Hand ready messages to consumers with spare prefetch, round robin."""
        batches: dict[tuple[Any, str], list[Delivery]] = {}
        while q.ready and q.consumers:
            keys = list(q.consumers)
            chosen = None
            for i in range(len(keys)):
                key = keys[(q.rr + i) % len(keys)]
                c = q.consumers[key]
                if c.spec.prefetch == 0 or c.in_flight < c.spec.prefetch:
                    chosen = key
                    q.rr = (q.rr + i + 1) % len(keys)
                    break
            if chosen is None:
                break
            consumer = q.consumers[chosen]
            delivery = q.ready.popleft()
            if consumer.spec.ack_required:
                consumer.in_flight += 1
                q.checked_out[delivery.msg_id] = (chosen[0], chosen[1], delivery)
            batches.setdefault(chosen, []).append(delivery)
        for (channel, tag), deliveries in batches.items():
            ack = q.consumers[(channel, tag)].spec.ack_required
            self.node.send(channel, (EVENT, q.name, ("deliver", tag, ack, tuple(deliveries))))

    def next_id(self) -> int:
        return next(self._ids)


class MemorySession:
    """One channel's client state towards the in-memory queues of a vhost."""

    def __init__(self, backend: MemoryBackend, channel: Any, vhost: str, owner: Any) -> None:
        self.b = backend
        self.channel = channel
        self.vhost = vhost
        self.owner = owner

    def _q(self, name: str) -> MemoryQueue | None:
        return self.b.queues.get((self.vhost, name))

    def _where(self, name: str) -> str:
        return rs("queue", name, self.vhost)

    def consumer_timeout(self, name: str, node_default: int | None) -> int | None:
        q = self._q(name)
        return node_default if q is None else queue_timeout(q.arguments, {}, node_default)

    def check_access(self, name: str) -> None:
        q = self._q(name)
        if q is None:
            raise AmqpError("NOT_FOUND", f"no {self._where(name)}")
        if q.owner is not None and q.owner != self.owner:
            raise AmqpError(
                "RESOURCE_LOCKED",
                f"cannot obtain exclusive access to locked {self._where(name)}. It could be "
                "originally declared on another connection or the exclusive property value "
                "does not match that of the original declaration.",
            )

    def _ok(self, q: MemoryQueue) -> DeclareOk:
        return DeclareOk(q.name, len(q.ready), len(q.consumers))

    def exists(self, name: str) -> bool:
        return self._q(name) is not None

    def routable(self, name: str) -> bool:
        return self.exists(name)

    def declare(self, name: str, *, passive: bool, durable: bool, exclusive: bool,
                auto_delete: bool, arguments: Mapping[str, Any]) -> DeclareOk:
        if passive:
            self.check_access(name)
            q = self._q(name)
            assert q is not None
            return self._ok(q)
        qtype = arguments.get("x-queue-type", "classic")
        if qtype != "classic":
            raise AmqpError(
                "PRECONDITION_FAILED",
                f"invalid arg 'x-queue-type' for {self._where(name)}: "
                f"\"unsupported queue type '{qtype}'\"",
            )
        if name.startswith("amq."):  # a client's own name; a server-named one is made below
            raise AmqpError(
                "ACCESS_REFUSED", f"queue name '{name}' contains reserved prefix 'amq.*'"
            )
        if name == "":
            name = "amq.gen-" + secrets.token_urlsafe(16)
        q = self._q(name)
        if q is not None:
            self.check_access(name)
            current = Declared(q.durable, q.auto_delete, q.arguments)
            new = Declared(durable, auto_delete, dict(arguments))
            check_equivalence(name, self.vhost, current, new,
                              tuple(dict.fromkeys([*q.arguments, *arguments])))
            return self._ok(q)
        if self.b.queue_limits is not None:
            self.b.queue_limits(self.vhost, name, self.b.queue_count)
        q = MemoryQueue(self.vhost, name, durable and not exclusive, auto_delete,
                        self.owner if exclusive else None, dict(arguments))
        self.b.queues[(self.vhost, name)] = q
        return self._ok(q)

    def delete(self, name: str, *, if_unused: bool, if_empty: bool) -> int:
        q = self._q(name)
        if q is None:
            return 0
        self.check_access(name)
        if if_unused and q.consumers:
            raise AmqpError("PRECONDITION_FAILED", f"{self._where(name)} in use")
        if if_empty and q.ready:
            raise AmqpError("PRECONDITION_FAILED", f"{self._where(name)} is not empty")
        return self.b.remove(q)

    def purge(self, name: str) -> int:
        self.check_access(name)
        q = self._q(name)
        assert q is not None
        count = len(q.ready)
        q.ready.clear()
        return count

    def deliver(self, queues: list[str], message: Message,
                correlation: int | None) -> list[Action]:
        actions: list[Action] = []
        confirmed: list[str] = []
        for name in queues:
            q = self._q(name)
            if q is None:
                continue
            q.ready.append(Delivery(self.b.next_id(), message, False))
            if q.held:
                if correlation is not None:
                    q.withheld.append((self.channel, correlation))
                if self.channel not in q.blocked:
                    q.blocked.add(self.channel)
                    actions.append(Block(name))
            elif correlation is not None:
                confirmed.append(name)
            self.b.dispatch(q)
        for name in confirmed:
            self.b.node.send(self.channel, (EVENT, name, ("settled", (correlation,))))
        return actions

    def validate_consume(self, name: str, spec: ConsumeSpec) -> None:
        """404 / 405, the classic consumer arguments, then exclusive-consumer rules."""
        self.check_access(name)
        check_consume_arguments(name, self.vhost, "classic", spec.arguments)
        q = self._q(name)
        assert q is not None
        if q.consumers and (spec.exclusive or any(c.spec.exclusive
                                                  for c in q.consumers.values())):
            raise AmqpError("ACCESS_REFUSED", f"{self._where(name)} in exclusive use")

    def consume(self, name: str, spec: ConsumeSpec) -> list[Action]:
        self.validate_consume(name, spec)
        q = self._q(name)
        assert q is not None
        q.consumers[(self.channel, spec.consumer_tag)] = _Consumer(self.channel, spec)
        q.had_consumers = True
        self.b.dispatch(q)
        return []

    def _maybe_auto_delete(self, q: MemoryQueue) -> None:
        if q.auto_delete and q.had_consumers and not q.consumers:
            self.b.remove(q)

    def cancel(self, name: str, consumer_tag: str) -> list[Action]:
        q = self._q(name)
        if q is not None and q.consumers.pop((self.channel, consumer_tag), None) is not None:
            self._maybe_auto_delete(q)
        return []

    def settle(self, name: str, op: str, consumer_tag: str | int,
               msg_ids: list[Any]) -> list[Action]:
        q = self._q(name)
        if q is None:
            return []
        returned = []
        for msg_id in msg_ids:
            entry = q.checked_out.pop(msg_id, None)
            if entry is None:
                continue
            channel, tag, delivery = entry
            consumer = q.consumers.get((channel, tag)) if isinstance(tag, str) else None
            if consumer is not None:
                consumer.in_flight -= 1
            if op == "requeue":
                returned.append(Delivery(delivery.msg_id, delivery.message, True))
        self._requeue(q, returned)
        self.b.dispatch(q)
        return []

    def _requeue(self, q: MemoryQueue, returned: list[Delivery]) -> None:
        if returned:
            merged = sorted([*returned, *q.ready], key=lambda d: d.msg_id)
            q.ready = deque(merged)

    def get(self, name: str, *, ack_required: bool, delivery_tag: int,
            node_timeout: int | None = None) -> Got | None:
        self.check_access(name)
        q = self._q(name)
        assert q is not None
        if not q.ready:
            return None
        delivery = q.ready.popleft()
        if ack_required:
            q.checked_out[delivery.msg_id] = (self.channel, delivery_tag, delivery)
        return Got(delivery, len(q.ready))

    def handle_event(self, msg: Any) -> list[Action] | None:
        if not (isinstance(msg, tuple) and len(msg) == 3 and msg[0] == EVENT):
            return None
        _, name, event = msg
        kind = event[0]
        if kind == "settled":
            return [Settled(name, tuple(event[1]))]
        if kind == "rejected":
            return [Rejected(name, tuple(event[1]))]
        if kind == "deliver":
            _, tag, ack, deliveries = event
            return [Deliver(name, tag, ack, tuple(deliveries))]
        if kind == "unblock":
            return [Unblock(name)]
        if kind == "eol":
            return [QueueEol(name), Unblock(name)]
        if kind == "cancelled":
            return [ConsumerCancelled(name, event[1])]
        return []

    def close(self) -> None:
        for q in list(self.b.queues.values()):
            if q.vhost != self.vhost:
                continue
            for key in [k for k in q.consumers if k[0] == self.channel]:
                del q.consumers[key]
            mine = [m for m, (ch, _, _) in q.checked_out.items() if ch == self.channel]
            returned = [Delivery(m, q.checked_out.pop(m)[2].message, True) for m in mine]
            self._requeue(q, returned)
            q.blocked.discard(self.channel)
            self.b.dispatch(q)
            self._maybe_auto_delete(q)
