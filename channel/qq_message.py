"""The message a channel stores in a quorum queue (`mc` with the AMQP 0-9-1 protocol).

RabbitMQ wraps every publish in a message container before it reaches a
queue; the queue machine reads only its size, TTL, priority and annotations,
and the consumer side turns annotations such as `x-delivery-count` back into
AMQP headers (`mc_amqpl`). `QqMessage` is that container: the raw property
bytes and body travel untouched, the TTL (`expiration`) and `priority` are
decoded once at publish, and annotations become headers only on the way out,
so a message without annotations is delivered byte for byte as published.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from channel.backend import Message
from channel.framing import Content

__all__ = ["QqMessage"]


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

    @classmethod
    def from_message(cls, message: Message) -> QqMessage:
        content = message.content
        props = content.properties()
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
        return dict(self.annotations).get(key)

    def mc_set_annotation(self, key: str, value: Any) -> QqMessage:
        kept = tuple((k, v) for k, v in self.annotations if k != key)
        return replace(self, annotations=(*kept, (key, value)))

    # --- back to the channel ---------------------------------------------------------------

    def to_message(self) -> Message:
        """The message as delivered: `x-` annotations added to the headers table."""
        extra = [(k, v) for k, v in self.annotations if k.startswith("x-")]
        content = Content(self.properties_bin, self.body, self.class_id)
        if extra:
            props = content.properties()
            headers = dict(props.headers or {})
            headers.update(extra)
            props.headers = headers
            content = Content(props.marshal(), self.body, self.class_id)
        return Message(self.exchange, self.routing_key, content, self.routing_keys)
