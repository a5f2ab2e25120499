"""The queue backend interface: what a channel needs from queues.

RabbitMQ's channel talks to queues only through `rabbit_queue_type`, keeping
one client state per queue it touched. warren mirrors that split: a node-wide
`QueueBackend` hands each channel a `QueueSession` (the per-channel client
states of all queues of one vhost). Synchronous operations (declare, delete,
purge, get, consume, cancel) return at once or raise `AmqpError`; everything
that happens later in the queue (confirms, rejections, deliveries, deletion,
back-pressure) arrives in the channel's mailbox as a message the session
recognises in `handle_event`, and comes out as `Action`s the channel executes.
The quorum-queue glue implements this with the fifo client; tests use the
in-memory classic-like backend in `channel.queue_types.testing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.wire import frozen_init
from channel.protocol.framing import Content

__all__ = [
    "Action",
    "Block",
    "ConsumerCancelled",
    "ConsumerReleased",
    "DeclareOk",
    "Deliver",
    "Delivery",
    "Got",
    "Message",
    "QueueBackend",
    "QueueEol",
    "QueueSession",
    "Rejected",
    "Settled",
    "Unblock",
]


@frozen_init
@dataclass(frozen=True, slots=True)
class Message:
    """A routed message: where it was published, its routing keys, its content.

    ``properties`` is the content's decoded ``Basic.Properties`` when the
    publishing channel already has them (it reads expiration, headers and user_id
    of every publish), so that a queue type reading them again does not decode
    the same bytes twice; ``None`` means decode ``content`` when needed. It is
    read-only: the channel hands the same object to consecutive publishes that
    carry the same raw properties.
    """

    exchange: str
    routing_key: str
    content: Content
    routing_keys: tuple[str, ...] = ()
    properties: Any = field(default=None, compare=False, repr=False)

    def decoded_properties(self) -> Any:
        props = self.properties
        return self.content.properties() if props is None else props

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its constructor call, without the decoded properties: the raw
        ones travel in `content`, and a node that reads them decodes them again (a
        delivery to another node's channel only copies the raw bytes out). Pickling
        pamqp's properties object took as long as the rest of a delivery."""
        return (Message, (self.exchange, self.routing_key, self.content, self.routing_keys))


@frozen_init
@dataclass(frozen=True, slots=True)
class Delivery:
    msg_id: Any
    message: Message
    redelivered: bool = False


@dataclass(frozen=True, slots=True)
class DeclareOk:
    queue: str
    message_count: int = 0
    consumer_count: int = 0


@dataclass(frozen=True, slots=True)
class Got:
    """basic.get result: one message and the ready messages left behind it."""

    delivery: Delivery
    message_count: int


# ------------------------------------------------------------------ actions

@frozen_init
@dataclass(frozen=True, slots=True)
class Settled:
    """The queue has the publishes with these correlation seqnos (confirm)."""

    queue: str
    seqnos: tuple[int, ...]


@frozen_init
@dataclass(frozen=True, slots=True)
class Rejected:
    """The queue refused these publishes (nack; `partial tx completion` in tx)."""

    queue: str
    seqnos: tuple[int, ...]
    reason: str = "rejected"


@frozen_init
@dataclass(frozen=True, slots=True)
class Deliver:
    queue: str
    consumer_tag: str
    ack_required: bool
    deliveries: tuple[Delivery, ...]


@dataclass(frozen=True, slots=True)
class Block:
    """Stop granting credit to the reader (credit_flow.block(key))."""

    key: Any


@dataclass(frozen=True, slots=True)
class Unblock:
    key: Any


@dataclass(frozen=True, slots=True)
class QueueEol:
    """The queue is gone: cancel its consumers, count its pending confirms as done."""

    queue: str


@dataclass(frozen=True, slots=True)
class ConsumerCancelled:
    """The queue cancelled a consumer (e.g. queue down): server-side basic.cancel."""

    queue: str
    consumer_tag: str


@dataclass(frozen=True, slots=True)
class ConsumerReleased:
    """The queue took these deliveries back from a consumer (4.3's consumer timeout:
    `reason` "timeout"); the channel cancels the consumer."""

    queue: str
    consumer_tag: str
    msg_ids: tuple[Any, ...]
    reason: str


Action = (Settled | Rejected | Deliver | Block | Unblock | QueueEol | ConsumerCancelled
          | ConsumerReleased)


@dataclass(frozen=True, slots=True)
class ConsumeSpec:
    consumer_tag: str
    ack_required: bool
    prefetch: int
    exclusive: bool = False
    arguments: Mapping[str, Any] = field(default_factory=dict)
    global_qos: bool = False
    limiter: Any = None
    """The channel's limiter process while a global qos is set: a classic queue asks
    it before each ack-required delivery to this consumer (`channel.limits.limiter`)."""
    node_timeout: int | None = None
    """The node's `consumer_timeout`: a queue that times out its own consumers (4.3's
    quorum queues) uses it when neither the consumer nor the queue names one."""


__all__ += ["ConsumeSpec"]


class QueueSession(Protocol):
    """One channel's view of the queues of its vhost (rabbit_queue_type state)."""

    def declare(self, name: str, *, passive: bool, durable: bool, exclusive: bool,
                auto_delete: bool, arguments: Mapping[str, Any]) -> DeclareOk:
        """queue.declare after the channel's own checks; raises AmqpError."""
        ...

    def exists(self, name: str) -> bool: ...

    def routable(self, name: str) -> bool:
        """Whether a publish routed to the queue reaches it: the queue exists and is in
        the release's live table (3.10 takes a durable classic queue whose home node is
        down out of it, so a `mandatory` publish routed only there is returned)."""
        ...

    def check_access(self, name: str) -> None:
        """404 if missing, 405 if exclusive to another connection."""
        ...

    def delete(self, name: str, *, if_unused: bool, if_empty: bool) -> int: ...

    def purge(self, name: str) -> int: ...

    def deliver(self, queues: list[str], message: Message, correlation: int | None,
                ) -> list[Action]:
        """Enqueue to every target; confirms for `correlation` arrive later as events."""
        ...

    def validate_consume(self, name: str, spec: ConsumeSpec) -> None:
        """Refuse a consumer before consume-ok: 404, 405, argument and exclusivity errors."""
        ...

    def consume(self, name: str, spec: ConsumeSpec) -> list[Action]: ...

    def cancel(self, name: str, consumer_tag: str) -> list[Action]: ...

    def settle(self, name: str, op: str, consumer_tag: str | int,
               msg_ids: list[Any]) -> list[Action]:
        """op is `complete`, `requeue` or `discard` (the 4.0-4.2 settle ops)."""
        ...

    def get(self, name: str, *, ack_required: bool, delivery_tag: int,
            node_timeout: int | None = None) -> Got | None:
        """`basic.get`; `node_timeout` is the node's `consumer_timeout`, which a queue
        that times out its own deliveries (4.3's quorum queues) holds a got message
        for when neither its argument nor its policy names one."""
        ...

    def handle_event(self, msg: Any) -> list[Action] | None:
        """Actions for a queue event message, or None when `msg` is not one."""
        ...

    def close(self) -> None:
        """The channel is gone: queues drop its consumers and requeue its unacked."""
        ...


class QueueBackend(Protocol):
    """Node-wide: sessions for channels, and connection-level housekeeping."""

    def session(self, channel: Any, vhost: str, owner: Any, user: str) -> QueueSession: ...

    def connection_closed(self, owner: Any) -> None:
        """Delete the exclusive queues of a connection (QueueCollector)."""
        ...
