"""Inputs of the classic queue core: what the channel, the message store, the
monitors and the timers tell one ``rabbit_amqqueue_process``.

Each input is a frozen record named after the upstream message it stands for
(``deliver``, ``basic_consume``, ``ack``, ``notify_down``, ...). Channel-side
delivery tags never reach the queue: the channel resolves them to the queue's
own message ids (upstream ``AckTag``s) before it settles. A channel on another
node than the queue sends them over the node link, so each pickles as its
constructor call (`actors.wire.wire_record`), not through ``dataclasses.fields``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from actors.wire import wire_record

__all__ = [
    "Ack",
    "BasicCancel",
    "BasicConsume",
    "BasicGet",
    "Command",
    "Delete",
    "Deliver",
    "LimiterCredit",
    "NotifyDown",
    "NotifySent",
    "OwnerDown",
    "Purge",
    "Recover",
    "Reject",
    "Stat",
    "Tick",
    "Written",
]

ChannelId = Hashable
"""Whatever identifies a channel process to the shell (its pid)."""


@wire_record
@dataclass(frozen=True, slots=True)
class Deliver:
    """A publish routed to this queue (upstream ``{deliver, Delivery, ...}``).

    ``seq`` is the publisher-confirm sequence number, ``None`` when the channel
    is not in confirm mode. ``expiration`` is the message's own TTL in ms
    (already validated by the channel); ``content`` is opaque to the core and
    comes back unchanged in deliveries and dead-letter effects.
    """

    channel: ChannelId
    seq: int | None
    exchange: str
    routing_keys: tuple[str, ...]
    size: int
    persistent: bool = False
    priority: int | None = None
    expiration: int | None = None
    content: Any = None


@wire_record
@dataclass(frozen=True, slots=True)
class Written:
    """The message store has written these messages to the operating system."""

    msg_ids: tuple[int, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class BasicConsume:
    """``basic.consume``; ``prefetch`` is the channel's per-consumer qos (0 = none)."""

    channel: ChannelId
    tag: str
    ack_required: bool = True
    prefetch: int = 0
    priority: int = 0
    exclusive: bool = False
    args: tuple[tuple[str, Any], ...] = ()


@wire_record
@dataclass(frozen=True, slots=True)
class BasicCancel:
    channel: ChannelId
    tag: str


@wire_record
@dataclass(frozen=True, slots=True)
class BasicGet:
    channel: ChannelId
    ack_required: bool = True


@wire_record
@dataclass(frozen=True, slots=True)
class Ack:
    channel: ChannelId
    msg_ids: tuple[int, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class Reject:
    """``basic.reject`` / ``basic.nack`` (the channel expands ``multiple``)."""

    channel: ChannelId
    msg_ids: tuple[int, ...]
    requeue: bool


@wire_record
@dataclass(frozen=True, slots=True)
class Recover:
    """``basic.recover(requeue=true)``: every unacked message of the channel goes back."""

    channel: ChannelId


@wire_record
@dataclass(frozen=True, slots=True)
class NotifyDown:
    """The channel died or closed: its consumers go, its unacked messages come back."""

    channel: ChannelId


@wire_record
@dataclass(frozen=True, slots=True)
class OwnerDown:
    """The exclusive owner connection went away: the queue deletes itself."""


@wire_record
@dataclass(frozen=True, slots=True)
class NotifySent:
    """The channel's writer has written ``count`` more of our deliveries."""

    channel: ChannelId
    count: int


@wire_record
@dataclass(frozen=True, slots=True)
class LimiterCredit:
    """The channel's global-qos limiter allows ``credit`` more ack-required deliveries.

    Upstream the queue asks ``rabbit_limiter:can_send/3`` synchronously; a pure
    core cannot call, so the shell hands the limiter's answer in as an
    allowance (``None`` = no global limit) and the limiter's ``resume`` becomes
    a fresh allowance.
    """

    channel: ChannelId
    credit: int | None


@wire_record
@dataclass(frozen=True, slots=True)
class Purge:
    pass


@wire_record
@dataclass(frozen=True, slots=True)
class Delete:
    if_unused: bool = False
    if_empty: bool = False


@wire_record
@dataclass(frozen=True, slots=True)
class Stat:
    """A non-``nowait`` declare asking for the counts; it counts as a use (x-expires)."""


@wire_record
@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: expire head messages and check the queue's own x-expires."""


Command = (
    Deliver | Written | BasicConsume | BasicCancel | BasicGet | Ack | Reject | Recover
    | NotifyDown | OwnerDown | NotifySent | LimiterCredit | Purge | Delete | Stat | Tick
)
