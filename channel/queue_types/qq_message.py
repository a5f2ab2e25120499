"""The message a channel stores in a quorum queue (`mc` with the AMQP 0-9-1 protocol).

RabbitMQ wraps every publish in a message container before it reaches a
queue; the queue machine reads only its size, TTL, priority and annotations,
and the consumer side turns annotations such as `x-delivery-count` back into
AMQP headers (`mc_amqpl`), integers as long-longs (`channel.queue_types.header_table`).
`QqMessage` is that container: the raw property bytes and body travel untouched,
the TTL (`expiration`) and `priority` are decoded once at publish, and
annotations become headers only on the way out, so a message without
annotations is delivered byte for byte as published.
A dead-lettered message also carries its death history (`channel.queue_types.qq_death`),
delivered as the `x-death` headers; its exchange and routing keys are the
dead-letter exchange's and keys, as in RabbitMQ.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from actors.wire import wire_record
from channel.protocol.framing import Content
from channel.queue_types import qq_death
from channel.queue_types.backend import Message
from channel.queue_types.header_table import Long, drop_expiration, with_headers
from channel.queue_types.qq_death import Deaths

__all__ = ["QqMessage"]


@wire_record
@dataclass(frozen=True, slots=True)
class QqMessage:
    exchange: str
    routing_key: str
    routing_keys: tuple[str, ...]
    properties_bin: bytes
    body: bytes
    class_id: int = 60
    ttl: int | None = None
    priority: int | None = None
    annotations: tuple[tuple[str, Any], ...] = ()
    deaths: Deaths | None = None

    @classmethod
    def from_message(cls, message: Message) -> QqMessage:
        content = message.content
        props = message.decoded_properties()
        ttl = int(props.expiration) if props.expiration is not None else None
        return cls(message.exchange, message.routing_key, message.routing_keys,
                   content.properties_bin, content.body, content.class_id, ttl,
                   props.priority)

    # --- the message-container interface the machine reads ---------------------------------

    def mc_size(self) -> tuple[int, int]:
        return (len(self.properties_bin), len(self.body))

    def mc_ttl(self) -> int | None:
        return self.ttl

    def mc_priority(self) -> int | None:
        return self.priority

    def mc_get_annotation(self, key: str) -> Any:
        match key:
            case "exchange":
                return self.exchange
            case "routing_keys":
                return list(self.routing_keys or (self.routing_key,))
            case "deaths":
                return None if self.deaths is None else self.deaths.queue_reasons()
        return dict(self.annotations).get(key)

    def mc_set_annotation(self, key: str, value: Any) -> QqMessage:
        match key:
            case "exchange":
                return replace(self, exchange=value)
            case "routing_keys":
                keys = tuple(value)
                return replace(self, routing_key=keys[0] if keys else "", routing_keys=keys)
            case "ttl":
                return replace(self, ttl=value)
        kept = tuple((k, v) for k, v in self.annotations if k != key)
        return replace(self, annotations=(*kept, (key, value)))

    def mc_record_death(self, reason: str, queue: str, now_ms: int) -> QqMessage:
        """Dead-lettered from `queue`: one more death, and no TTL any more.

        The recorded routing keys are the publish key and its `CC` keys (the
        `BCC` keys route but are never shown); the `expiration` property is
        removed and kept as the death's `original-expiration`.
        """
        content = Content(self.properties_bin, self.body, self.class_id)
        props = content.properties()
        cc = (props.headers or {}).get("CC")
        shown = (self.routing_key, *(k for k in cc if isinstance(k, str))) \
            if isinstance(cc, list) else (self.routing_key,)
        expiration = props.expiration
        deaths = qq_death.record(self.deaths, reason, queue, self.exchange, shown,
                                 expiration, now_ms)
        # cut out of the bytes: encoding the properties again would change the
        # publisher's header field types (a short as a byte, a double as a float)
        return replace(self, deaths=deaths, ttl=None,
                       properties_bin=drop_expiration(self.properties_bin))

    def headers(self) -> dict[str, Any]:
        """The headers table as a consumer will see it (routing by headers exchanges)."""
        return dict(self.to_message().content.properties().headers or {})

    # --- back to the channel ---------------------------------------------------------------

    def to_message(self, last_death: bool = True) -> Message:
        """The message as delivered: `x-` annotations added to the headers table (the
        `x-last-death-*` ones only where the consumer's release has them)."""
        extra = {k: _typed(v) for k, v in self.annotations if k.startswith("x-")}
        if self.deaths is not None:
            extra.update(qq_death.death_headers(self.deaths, last_death))
        content = Content(with_headers(self.properties_bin, extra), self.body, self.class_id)
        return Message(self.exchange, self.routing_key, content, self.routing_keys)


def _typed(value: Any) -> Any:
    """An annotation as RabbitMQ writes it into the headers (`mc_amqpl`): an integer
    as a long-long, a boolean and a text as themselves."""
    return Long(value) if type(value) is int else value
