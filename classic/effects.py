"""Effects and replies of the classic queue core.

The core never does I/O; it returns these frozen records and the process shell
executes them (matching on the type, exhaustively). Names follow what
``rabbit_amqqueue_process`` does at that point: ``confirm`` and
``reject_publish`` events to the publishing channel, ``deliver`` to a
consuming channel, ``basic.cancel`` from the server, at-most-once dead
lettering through ``rabbit_dead_letter``, ``erlang:monitor``/``demonitor``.
Deliveries, confirms and cancels reach channels on other nodes over the node
link, so each record pickles as its constructor call (`actors.wire.wire_record`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

from actors.wire import wire_record

__all__ = [
    "AmqpError",
    "CancelConsumer",
    "Confirm",
    "ConsumeOk",
    "DeadLetter",
    "Deleted",
    "Deliver",
    "Delivery",
    "Demonitor",
    "Effect",
    "GetEmpty",
    "GetOk",
    "Monitor",
    "Ok",
    "RejectPublish",
    "Reply",
    "StoreRemove",
    "StoreWrite",
]

ChannelId = Hashable
DeadLetterReason = Literal["rejected", "expired", "maxlen"]
DeleteReason = Literal["delete", "auto_delete", "expired", "owner_down"]


@wire_record
@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as it leaves the queue (to a consumer, a get or a dead-letter)."""

    msg_id: int
    redelivered: bool
    exchange: str
    routing_keys: tuple[str, ...]
    size: int
    persistent: bool
    priority: int
    expiration: int | None
    content: Any


# --- effects -------------------------------------------------------------------------------


@wire_record
@dataclass(frozen=True, slots=True)
class Confirm:
    """``basic.ack`` is due for these publisher sequence numbers of a channel."""

    channel: ChannelId
    seqs: tuple[int, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class RejectPublish:
    """``basic.nack`` is due: overflow refused the publish."""

    channel: ChannelId
    seq: int


@wire_record
@dataclass(frozen=True, slots=True)
class Deliver:
    """``basic.deliver`` of messages to one consumer of a channel."""

    channel: ChannelId
    tag: str
    ack_required: bool
    messages: tuple[Delivery, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Publish copies to the dead-letter exchange, at most once, and forget them.

    Carries what the shell needs for the ``x-death`` headers: the reason, this
    queue, the time, and each message's original exchange and routing keys
    (``routing_key`` replaces them when ``x-dead-letter-routing-key`` is set).
    """

    reason: DeadLetterReason
    queue: str
    vhost: str
    time: int
    exchange: str
    routing_key: str | None
    messages: tuple[Delivery, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class CancelConsumer:
    """Server-side ``basic.cancel`` (sent only if the client asked for it)."""

    channel: ChannelId
    tag: str


@wire_record
@dataclass(frozen=True, slots=True)
class Monitor:
    channel: ChannelId


@wire_record
@dataclass(frozen=True, slots=True)
class Demonitor:
    channel: ChannelId


@wire_record
@dataclass(frozen=True, slots=True)
class StoreWrite:
    """Persist these messages (persistent, durable queue); ``Written`` comes back."""

    messages: tuple[Delivery, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class StoreRemove:
    """These persisted messages left the queue for good."""

    msg_ids: tuple[int, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class Deleted:
    """The queue is gone; the shell removes its record and stops the process."""

    reason: DeleteReason
    message_count: int


Effect = (
    Confirm | RejectPublish | Deliver | DeadLetter | CancelConsumer | Monitor | Demonitor
    | StoreWrite | StoreRemove | Deleted
)

# --- replies -------------------------------------------------------------------------------


@wire_record
@dataclass(frozen=True, slots=True)
class Ok:
    """Success; ``message_count`` where the method reports one (purge, delete, stat)."""

    message_count: int | None = None
    consumer_count: int | None = None


@wire_record
@dataclass(frozen=True, slots=True)
class ConsumeOk:
    tag: str


@wire_record
@dataclass(frozen=True, slots=True)
class GetOk:
    """``basic.get-ok``; ``message_count`` = ready messages left after this one."""

    delivery: Delivery
    message_count: int


@wire_record
@dataclass(frozen=True, slots=True)
class GetEmpty:
    pass


@wire_record
@dataclass(frozen=True, slots=True)
class AmqpError:
    """A channel error with RabbitMQ's code, name and text."""

    code: int
    name: str
    text: str

    def __str__(self) -> str:
        return f"{self.code} {self.name} - {self.text}"


Reply = Ok | ConsumeOk | GetOk | GetEmpty | AmqpError
