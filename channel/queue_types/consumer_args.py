"""basic.consume arguments, checked per queue type before the consumer exists.

RabbitMQ (`rabbit_amqqueue:check_consume_arguments`) lets each queue type
declare which consumer arguments it understands. The ones it understands are
validated (`x-priority`: an integer type; `x-consumer-timeout`: a
non-negative integer); an argument that only *another* queue type understands
is refused with 406 naming the queue type's module; anything else, including
the long-gone `x-cancel-on-ha-failover` and `x-credit`, is ignored. This runs
before `basic.consume-ok` is written, so a refused consumer never looks
registered to the client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from channel.errors import AmqpError, Atom, erlang_term, rs
from channel.queue_types.queue_args import int_arg_error

__all__ = ["CONSUMER_ARGUMENTS", "check_consume_arguments", "consumer_priority"]

CONSUMER_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "classic": ("x-priority",),
    "quorum": ("x-priority", "x-consumer-timeout"),
    "stream": ("x-stream-offset", "x-stream-filter", "x-stream-match-unfiltered"),
}
MODULES = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue",
           "stream": "rabbit_stream_queue"}
_ALL = tuple(dict.fromkeys(k for keys in CONSUMER_ARGUMENTS.values() for k in keys))


def _non_negative_int(value: Any) -> Any:
    error = int_arg_error(value)
    if error is None and value < 0:
        return (Atom("value_negative"), value)
    return error


_VALIDATORS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("x-priority", int_arg_error), ("x-consumer-timeout", _non_negative_int))


def check_consume_arguments(queue: str, vhost: str, queue_type: str,
                            args: Mapping[str, Any]) -> None:
    """406 for a bad value of a known argument, or an argument of another queue type."""
    known = CONSUMER_ARGUMENTS[queue_type]
    where = rs("queue", queue, vhost)
    for key, validate in _VALIDATORS:
        if key in known and key in args:
            error = validate(args[key])
            if error is not None:
                raise AmqpError("PRECONDITION_FAILED",
                                f"invalid arg '{key}' for {where}: {erlang_term(error)}")
    for key in args:
        if key in _ALL and key not in known:
            raise AmqpError("PRECONDITION_FAILED",
                            f"invalid arg '{key}' for {where} of queue type "
                            f"{MODULES[queue_type]}")


def consumer_priority(args: Mapping[str, Any]) -> int:
    """`x-priority` (already validated), 0 when absent."""
    return int(args.get("x-priority", 0))
