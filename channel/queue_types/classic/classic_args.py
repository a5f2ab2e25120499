"""queue.declare arguments of classic queues: validation, equivalence keys, the queue's config.

RabbitMQ checks a new classic queue's arguments one key at a time in a fixed
order (first failure wins), then refuses the keys that belong to another queue
type. A redeclare compares the classic keys only, in their own order. The
checked arguments become the `QueueConfig` the queue process runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channel.errors import AmqpError, Atom, erlang_term, rs
from channel.queue_types.queue_args import (
    _bool,
    _dlx_routing_key,
    _expires,
    _int,
    _message_ttl,
    _non_neg_int,
    _one_of,
    _queue_type,
    _string,
)
from classic.config import MAX_PRIORITY, QueueConfig

__all__ = ["CLASSIC_ARGS", "queue_config", "validate_classic_args"]


def _max_priority(value: Any, args: Mapping[str, Any]) -> Any:
    error = _non_neg_int(value, args)
    if error is None and value > MAX_PRIORITY:
        return (Atom("max_value_exceeded"), value)
    return error


def _queue_mode(value: Any, _args: Mapping[str, Any]) -> Any:
    return None if value in ("default", "lazy") else f"unsupported queue mode '{value}'"


def _queue_version(value: Any, args: Mapping[str, Any]) -> Any:
    error = _int(value, args)
    if error is not None:
        return error
    return None if value in (1, 2) else f"unsupported queue version '{value}'"


_VALIDATORS = (
    ("x-expires", _expires),
    ("x-message-ttl", _message_ttl),
    ("x-dead-letter-exchange", _string),
    ("x-dead-letter-routing-key", _dlx_routing_key),
    ("x-max-length", _non_neg_int),
    ("x-max-length-bytes", _non_neg_int),
    ("x-max-priority", _max_priority),
    ("x-overflow", _one_of(("drop-head", "reject-publish", "reject-publish-dlx"),
                           "invalid_overflow")),
    ("x-queue-mode", _queue_mode),
    ("x-queue-version", _queue_version),
    ("x-single-active-consumer", _bool),
    ("x-queue-leader-locator",
     _one_of(("client-local", "balanced", "random", "least-leaders", "min-masters"),
             "invalid_queue_locator_arg")),
)

CLASSIC_ARGS: tuple[str, ...] = (
    "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
    "x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
    "x-queue-version", "x-single-active-consumer", "x-queue-type", "x-queue-master-locator",
    "x-queue-leader-locator",
)
"""The arguments a classic queue knows, in the order a redeclare compares them."""

_OTHER_TYPE_ARGS = frozenset({
    "x-delivery-limit", "x-dead-letter-strategy", "x-quorum-initial-group-size",
    "x-max-in-memory-length", "x-max-in-memory-bytes", "x-max-age",
    "x-stream-max-segment-size-bytes", "x-stream-filter-size-bytes", "x-initial-cluster-size",
})
"""Keys of quorum queues and streams, which a classic queue refuses."""


def validate_classic_args(queue: str, vhost: str, args: Mapping[str, Any]) -> None:
    """Validate the arguments of a new classic queue; raise the first failure (406)."""
    where = rs("queue", queue, vhost)
    checks = [("x-queue-type", _queue_type), *_VALIDATORS] if "x-queue-type" in args \
        else list(_VALIDATORS)
    for key, check in checks:
        if key in args:
            error = check(args[key], args)
            if error is not None:
                raise AmqpError("PRECONDITION_FAILED",
                                f"invalid arg '{key}' for {where}: {erlang_term(error)}")
    for key in args:
        if key in _OTHER_TYPE_ARGS:
            raise AmqpError("PRECONDITION_FAILED",
                            f"invalid arg '{key}' for {where} of queue type rabbit_classic_queue")


def queue_config(queue: str, vhost: str, args: Mapping[str, Any], *, durable: bool,
                 auto_delete: bool, owner: Any) -> QueueConfig:
    """The effective settings of a new classic queue from its (validated) arguments."""
    dlx = args.get("x-dead-letter-exchange")
    return QueueConfig(
        name=queue, vhost=vhost, durable=durable and owner is None, auto_delete=auto_delete,
        exclusive_owner=owner, expires=args.get("x-expires"),
        message_ttl=args.get("x-message-ttl"), dead_letter_exchange=dlx,
        dead_letter_routing_key=args.get("x-dead-letter-routing-key") if dlx is not None
        else None,
        max_length=args.get("x-max-length"), max_length_bytes=args.get("x-max-length-bytes"),
        overflow=args.get("x-overflow", "drop-head"), max_priority=args.get("x-max-priority"),
        single_active_consumer=args.get("x-single-active-consumer") is True)
