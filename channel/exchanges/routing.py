"""Exchange-type matching, pure: which bindings of one exchange a message takes.

One function per RabbitMQ exchange type (`rabbit_exchange_type_*`): direct and
the default exchange compare keys, fanout takes everything, topic matches
dot-separated words with `*` (one word) and `#` (zero or more), headers
compares binding arguments with the message headers under `x-match`.
Transitive exchange-to-exchange routing and the alternate exchange live in
`channel.exchanges.exchange`, which calls these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from channel.errors import AmqpError
from channel.queue_types.queue_args import amqp_type

__all__ = [
    "X_MATCH_VALUES",
    "check_x_match",
    "headers_match",
    "routing_keys",
    "topic_match",
]

X_MATCH_VALUES = ("all", "any", "all-with-x", "any-with-x")


def topic_match(binding_key: str, routing_key: str) -> bool:
    """AMQP topic matching: `*` is exactly one word, `#` zero or more words."""
    pattern = binding_key.split(".")
    words = routing_key.split(".")
    memo: dict[tuple[int, int], bool] = {}

    def match(p: int, w: int) -> bool:
        key = (p, w)
        if key in memo:
            return memo[key]
        if p == len(pattern):
            result = w == len(words)
        elif pattern[p] == "#":
            result = match(p + 1, w) or (w < len(words) and match(p, w + 1))
        elif w == len(words):
            result = False
        else:
            result = (pattern[p] == "*" or pattern[p] == words[w]) and match(p + 1, w + 1)
        memo[key] = result
        return result

    return match(0, 0)


def check_x_match(arguments: Mapping[str, Any]) -> None:
    """queue.bind / exchange.bind on a headers exchange: x-match must be valid."""
    value = arguments.get("x-match")
    if value is None or value in X_MATCH_VALUES:
        return
    shown = value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else value
    raise AmqpError(
        "PRECONDITION_FAILED",
        f'Invalid x-match field value "{shown}"; expected all, any, all-with-x, or any-with-x',
    )


def _equal(a: Any, b: Any) -> bool:
    ta, tb = amqp_type(a), amqp_type(b)
    if ta in ("signedint", "long") and tb in ("signedint", "long"):
        return bool(a == b)
    return ta == tb and a == b


def headers_match(binding_args: Mapping[str, Any], headers: Mapping[str, Any] | None) -> bool:
    """rabbit_exchange_type_headers: all/any, with or without x- arguments."""
    mode = binding_args.get("x-match", "all")
    with_x = mode in ("all-with-x", "any-with-x")
    want_all = mode in ("all", "all-with-x")
    headers = headers or {}
    for key, value in binding_args.items():
        if key == "x-match" or (key.startswith("x-") and not with_x):
            continue
        if key in headers and (value is None or _equal(value, headers[key])):
            if not want_all:
                return True
        elif want_all:
            return False
    return want_all


def routing_keys(routing_key: str, headers: Mapping[str, Any] | None) -> list[str]:
    """Publish key, then the longstr entries of the CC and BCC headers (mc_amqpl)."""
    keys = [routing_key]
    if not headers:
        return keys
    for name in ("CC", "BCC"):
        if name not in headers:
            continue
        value = headers[name]
        if not isinstance(value, list):
            raise AmqpError(
                "PRECONDITION_FAILED",
                f'invalid message: {{unacceptable_type_in_header,"{name}",'
                f"{amqp_type(value)}}}",
            )
        keys.extend(v for v in value if isinstance(v, str))
    return keys


def dedup(items: Iterable[Any]) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


__all__ += ["dedup"]
