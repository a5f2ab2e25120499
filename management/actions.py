"""The API's writes that a channel does: declare, delete, purge, publish, get, bind.

Each runs over `management.amqp` as the requesting user, so the broker's channel
answers as it answers any client; the bodies and replies are RabbitMQ's.
"""

from __future__ import annotations

import base64
from typing import Any

import pika

from management import amqp
from management.amqp import AmqpTarget
from management.errors import bad_request

__all__ = ["bind", "declare_exchange", "declare_queue", "delete_exchange", "delete_queue",
           "get", "publish", "purge", "unbind"]

def _flag(body: dict[str, Any], key: str, default: bool) -> bool:
    """A boolean field; rabbitmqadmin sends them as the strings "true" / "false"."""
    value = body.get(key, default)
    return value.lower() == "true" if isinstance(value, str) else bool(value)


ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true",
            "reject_requeue_false")


def declare_queue(t: AmqpTarget, name: str, body: dict[str, Any]) -> None:
    arguments = dict(body.get("arguments") or {})
    if body.get("type") or body.get("queue_type"):
        arguments.setdefault("x-queue-type", body.get("type") or body.get("queue_type"))
    amqp.run_method(t, lambda ch: ch.queue_declare(
        name, durable=_flag(body, "durable", True),
        auto_delete=_flag(body, "auto_delete", False), arguments=arguments))


def delete_queue(t: AmqpTarget, name: str, if_unused: bool, if_empty: bool) -> None:
    def go(ch: Any) -> None:
        ch.queue_declare(name, passive=True)
        ch.queue_delete(name, if_unused=if_unused, if_empty=if_empty)
    amqp.run_method(t, go)


def purge(t: AmqpTarget, name: str) -> None:
    amqp.run_method(t, lambda ch: ch.queue_purge(name))


def declare_exchange(t: AmqpTarget, name: str, body: dict[str, Any]) -> None:
    kind = body.get("type") or "direct"  # RabbitMQ's default when the body names none
    amqp.run_method(t, lambda ch: ch.exchange_declare(
        name, kind, durable=_flag(body, "durable", True),
        auto_delete=_flag(body, "auto_delete", False),
        internal=_flag(body, "internal", False), arguments=body.get("arguments") or {}))


def delete_exchange(t: AmqpTarget, name: str, if_unused: bool) -> None:
    def go(ch: Any) -> None:
        ch.exchange_declare(name, passive=True)
        ch.exchange_delete(name, if_unused=if_unused)
    amqp.run_method(t, go)


def bind(t: AmqpTarget, source: str, kind: str, destination: str,
         body: dict[str, Any]) -> None:
    key = str(body.get("routing_key", ""))
    args = body.get("arguments") or {}
    if kind == "q":
        amqp.run_method(t, lambda ch: ch.queue_bind(destination, source, key, args))
    else:
        amqp.run_method(t, lambda ch: ch.exchange_bind(destination, source, key, args))


def unbind(t: AmqpTarget, source: str, kind: str, destination: str, key: str) -> None:
    if kind == "q":
        amqp.run_method(t, lambda ch: ch.queue_unbind(destination, source, key))
    else:
        amqp.run_method(t, lambda ch: ch.exchange_unbind(destination, source, key))


def _payload(body: dict[str, Any]) -> bytes:
    payload = body.get("payload")
    encoding = body.get("payload_encoding")
    if not isinstance(payload, str) or encoding not in ("string", "base64"):
        raise bad_request("payload_encoding must be string or base64"
                          if isinstance(payload, str) else "payload missing")
    return payload.encode() if encoding == "string" else base64.b64decode(payload)


def publish(t: AmqpTarget, exchange: str, body: dict[str, Any]) -> bool:
    """Published mandatory with confirms: ``routed`` is whether no queue returned it."""
    if "routing_key" not in body or "properties" not in body:
        raise bad_request("routing_key and properties are required")
    data = _payload(body)
    props = dict(body.get("properties") or {})
    properties = pika.BasicProperties(**{k: v for k, v in props.items()
                                         if k in pika.BasicProperties().__dict__})

    def go(ch: Any) -> bool:
        ch.confirm_delivery()
        try:
            ch.basic_publish(exchange, str(body["routing_key"]), data, properties,
                             mandatory=True)
        except pika.exceptions.UnroutableError:
            return False
        return True
    return amqp.run(t, go)


def _decoded(data: bytes, encoding: str, truncate: int | None) -> tuple[str, str]:
    shown = data if truncate is None else data[:truncate]
    if encoding == "auto":
        try:
            return shown.decode("utf-8"), "string"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(shown).decode(), "base64"


def _properties(p: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(p).items() if v is not None}


def get(t: AmqpTarget, queue: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """basic.get up to `count` times, then settle every message as `ackmode` says."""
    ackmode = body.get("ackmode") or body.get("requeue")
    if ackmode not in ACKMODES:
        raise bad_request(f"Invalid ackmode value: {ackmode}")
    encoding = body.get("encoding", "auto")
    if encoding not in ("auto", "base64"):
        raise bad_request(f"Unsupported encoding {encoding}")
    count = int(body.get("count", 1))
    truncate = body.get("truncate")
    truncate = int(truncate) if truncate not in (None, "") else None

    def go(ch: Any) -> list[dict[str, Any]]:
        rows = []
        for _ in range(count):
            method, props, data = ch.basic_get(queue, auto_ack=False)
            if method is None:
                break
            payload, enc = _decoded(data, encoding, truncate)
            rows.append({"payload_bytes": len(data), "redelivered": method.redelivered,
                         "exchange": method.exchange, "routing_key": method.routing_key,
                         "message_count": method.message_count,
                         "properties": _properties(props), "payload": payload,
                         "payload_encoding": enc, "_tag": method.delivery_tag})
        for row in rows:
            tag = row.pop("_tag")
            if ackmode == "ack_requeue_false":
                ch.basic_ack(tag)
            else:
                ch.basic_reject(tag, requeue=ackmode.endswith("true"))
        return rows
    return amqp.run(t, go)
