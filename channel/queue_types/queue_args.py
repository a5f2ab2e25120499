"""queue.declare argument checks for quorum queues, exact to RabbitMQ's texts.

RabbitMQ validates queue arguments in `rabbit_amqqueue` (one checker per key, a
fixed order, first failure wins) and then lets the queue type refuse the
properties it cannot honour. All of it is pure, so it lives here as functions
over the decoded argument table; the channel turns the raised `AmqpError` into
a channel (406/403) or connection (541) close. Texts: `rabbit_amqqueue`'s and
`rabbit_quorum_queue`'s.

pamqp decodes field tables into Python values and loses the integer width, so
`amqp_type` infers the RabbitMQ type name the way pika encodes values (ints as
`signedint` when they fit 32 bits, else `long`; bytes as byte array).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from channel.errors import AmqpError, Atom, erlang_term, rs

__all__ = [
    "MAX_EXPIRY",
    "OTHER_TYPE_ARGS",
    "amqp_type",
    "check_declare_properties",
    "check_equivalence",
    "check_queue_name",
    "int_arg_error",
    "validate_quorum_args",
]

MAX_EXPIRY = 315_360_000_000
"""Ten years in milliseconds: the ceiling of every TTL-like argument."""

_INT_TYPES = frozenset(
    {"byte", "short", "signedint", "long", "unsignedbyte", "unsignedshort", "unsignedint"}
)
KNOWN_QUEUE_TYPES = ("classic", "quorum", "stream")


def amqp_type(value: Any) -> str:
    """RabbitMQ's type name for a decoded field value."""
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if -(2**31) <= value < 2**31 else "long"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, bytes | bytearray):
        return "binary"
    if isinstance(value, float):
        return "double"
    if isinstance(value, decimal.Decimal):
        return "decimal"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


# --------------------------------------------------------------- value checks
# Each returns None when the value is acceptable, else the Erlang error term.

Check = Callable[[Any, Mapping[str, Any]], Any]


def _unacceptable(value: Any) -> tuple[Atom, Atom]:
    return (Atom("unacceptable_type"), Atom(amqp_type(value)))


def int_arg_error(value: Any) -> str | None:
    """`rabbit_amqqueue:check_int_arg`: None for a value of any AMQP integer type.

    Anything else is refused as `expected integer, got <type>` (a string term,
    printed quoted) — RabbitMQ's text since 3.10 for queue and consumer arguments
    alike, so both checks use this one function.
    """
    kind = amqp_type(value)
    return None if kind in _INT_TYPES else f"expected integer, got {kind}"


def _int(value: Any, _args: Mapping[str, Any]) -> Any:
    return int_arg_error(value)


def _non_neg_int(value: Any, args: Mapping[str, Any]) -> Any:
    error = _int(value, args)
    if error is None and value < 0:
        return (Atom("value_negative"), value)
    return error


def _expiry(value: int) -> Any:
    if value < 0:
        return (Atom("value_negative"), value)
    if value > MAX_EXPIRY:
        return (Atom("value_too_large"), value)
    return None


def _expires(value: Any, args: Mapping[str, Any]) -> Any:
    error = _int(value, args)
    if error is not None:
        return error
    if value == 0:
        return (Atom("value_zero"), value)
    return _expiry(value)


def _message_ttl(value: Any, args: Mapping[str, Any]) -> Any:
    error = _int(value, args)
    return error if error is not None else _expiry(value)


def _string(value: Any, _args: Mapping[str, Any]) -> Any:
    return None if isinstance(value, str) else _unacceptable(value)


def _dlx_routing_key(value: Any, args: Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return _unacceptable(value)
    if "x-dead-letter-exchange" not in args:
        return Atom("routing_key_but_no_dlx_defined")
    return None


def _one_of(values: tuple[str, ...], error: str) -> Check:
    def check(value: Any, _args: Mapping[str, Any]) -> Any:
        if not isinstance(value, str):
            return _unacceptable(value)
        return None if value in values else Atom(error)
    return check


def _bool(value: Any, _args: Mapping[str, Any]) -> Any:
    return None if isinstance(value, bool) else _unacceptable(value)


def _initial_group_size(value: Any, args: Mapping[str, Any]) -> Any:
    error = _non_neg_int(value, args)
    if error is None and value == 0:
        return (Atom("value_zero"), value)
    return error


def _placement_tag(value: Any, _args: Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return _unacceptable(value)
    return None if value else (Atom("value_empty"), "")


def _queue_type(value: Any, _args: Mapping[str, Any]) -> Any:
    if not isinstance(value, str):
        return _unacceptable(value)
    return None if value in KNOWN_QUEUE_TYPES else f"unsupported queue type '{value}'"


_VALIDATORS: tuple[tuple[str, Check], ...] = (
    ("x-expires", _expires),
    ("x-message-ttl", _message_ttl),
    ("x-dead-letter-exchange", _string),
    ("x-dead-letter-routing-key", _dlx_routing_key),
    ("x-dead-letter-strategy", _one_of(("at-most-once", "at-least-once"), "invalid_dlx_strategy")),
    ("x-max-length", _non_neg_int),
    ("x-max-length-bytes", _non_neg_int),
    ("x-max-in-memory-length", _non_neg_int),
    ("x-max-in-memory-bytes", _non_neg_int),
    ("x-overflow", _one_of(("drop-head", "reject-publish", "reject-publish-dlx"),
                           "invalid_overflow")),
    ("x-single-active-consumer", _bool),
    ("x-consumer-timeout", _non_neg_int),
    ("x-consumer-disconnected-timeout", _non_neg_int),
    ("x-quorum-initial-group-size", _initial_group_size),
    ("x-queue-leader-locator",
     _one_of(("client-local", "balanced", "random", "least-leaders", "min-masters"),
             "invalid_queue_locator_arg")),
    ("x-member-placement-tag", _placement_tag),
)


OTHER_TYPE_ARGS = frozenset(
    {
        # classic
        "x-max-priority", "x-queue-mode", "x-queue-master-locator", "x-queue-version",
        # stream
        "x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size",
        "x-stream-filter-size-bytes",
    }
)
"""Arguments another queue type knows, which a quorum queue refuses."""


def _invalid_arg(key: str, queue: str, vhost: str, term: Any) -> AmqpError:
    return AmqpError(
        "PRECONDITION_FAILED",
        f"invalid arg '{key}' for {rs('queue', queue, vhost)}: {erlang_term(term)}",
    )


def validate_quorum_args(queue: str, vhost: str, args: Mapping[str, Any]) -> None:
    """Validate the arguments of a new quorum queue; raise the first failure (406)."""
    if "x-queue-type" in args:
        error = _queue_type(args["x-queue-type"], args)
        if error is not None:
            raise _invalid_arg("x-queue-type", queue, vhost, error)
    for key, check in _VALIDATORS:
        if key in args:
            error = check(args[key], args)
            if error is not None:
                raise _invalid_arg(key, queue, vhost, error)
    for key in args:
        if key in OTHER_TYPE_ARGS:
            raise AmqpError(
                "PRECONDITION_FAILED",
                f"invalid arg '{key}' for {rs('queue', queue, vhost)} "
                "of queue type rabbit_quorum_queue",
            )


def check_queue_name(queue: str) -> None:
    """Name checks of an active quorum-queue declare (server-named, reserved prefix)."""
    if queue == "":
        raise AmqpError(
            "PRECONDITION_FAILED",
            "Cannot declare a server-named queue for type rabbit_quorum_queue",
        )
    if queue.startswith("amq."):
        raise AmqpError(
            "ACCESS_REFUSED", f"queue name '{queue}' contains reserved prefix 'amq.*'"
        )


def check_declare_properties(queue: str, vhost: str, *, durable: bool, exclusive: bool,
                             auto_delete: bool) -> None:
    """The quorum queue type's refusals, in RabbitMQ's order (profile with
    `transient_nonexcl_queues` permitted, the 4.0-4.2 default)."""
    where = rs("queue", queue, vhost)
    if auto_delete:
        raise AmqpError("PRECONDITION_FAILED", f"invalid property 'auto-delete' for {where}")
    if exclusive:
        raise AmqpError("PRECONDITION_FAILED", f"invalid property 'exclusive-owner' for {where}")
    if not durable:
        raise AmqpError("PRECONDITION_FAILED", f"invalid property 'non-durable' for {where}")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "'true'" if value else "'false'"
    return f"'{value}'"


def _render_typed(value: Any) -> str:
    return f"the value {_render(value)} of type '{amqp_type(value)}'"


def _same(a: Any, b: Any) -> bool:
    ta, tb = amqp_type(a), amqp_type(b)
    if ta in _INT_TYPES and tb in _INT_TYPES:
        return bool(a == b)
    return ta == tb and a == b


@dataclass(frozen=True, slots=True)
class Declared:
    """What equivalence compares: the flags and arguments of a queue."""

    durable: bool
    auto_delete: bool
    arguments: Mapping[str, Any]


def check_equivalence(queue: str, vhost: str, current: Declared, new: Declared,
                      keys: tuple[str, ...]) -> None:
    """Re-declare of an existing queue: durable, auto_delete, then each argument of
    `keys` in order (a quorum queue's are its release's `quorum_queue_arguments`)."""
    def fail(key: str, received: str, was: str) -> AmqpError:
        return AmqpError(
            "PRECONDITION_FAILED",
            f"inequivalent arg '{key}' for {rs('queue', queue, vhost)}: "
            f"received {received} but current is {was}",
        )
    for key, mine, theirs in (("durable", new.durable, current.durable),
                              ("auto_delete", new.auto_delete, current.auto_delete)):
        if mine != theirs:
            raise fail(key, _render(mine), _render(theirs))
    for key in keys:
        has_new, has_cur = key in new.arguments, key in current.arguments
        if not has_new and not has_cur:
            continue
        if has_new and has_cur:
            if not _same(new.arguments[key], current.arguments[key]):
                raise fail(key, _render(new.arguments[key]), _render(current.arguments[key]))
        elif has_new:
            raise fail(key, _render_typed(new.arguments[key]), "none")
        else:
            raise fail(key, "none", _render_typed(current.arguments[key]))


__all__ += ["KNOWN_QUEUE_TYPES", "Declared"]
