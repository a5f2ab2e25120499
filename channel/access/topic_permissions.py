"""Topic permissions: per-exchange routing-key authorisation (RabbitMQ's topic
authorisation).

Resource permissions say which exchanges a user may write to or read from;
topic permissions narrow that for *topic* exchanges down to routing keys. A
user has, per vhost and per exchange, a write and a read regular expression.
Publishing to a topic exchange needs every routing key of the message (the
publish key, then the CC and BCC header keys) to match the write expression;
binding to or unbinding from a topic exchange needs the binding key to match
the read expression. An exchange the user has no topic permission for is not
restricted, and exchanges of other types are never checked.

Matching follows `rabbit_auth_backend_internal:check_topic_access`: an empty
expression stands for `^$`; `{username}` and `{vhost}` in the expression are
replaced by the user's name and the vhost, each escaped so that it matches
itself literally (`rabbit_re:escape`, RabbitMQ 4.2.9 and later); the
result is searched for anywhere in the routing key (unanchored, as `re:run`);
an expression that does not compile refuses. Refusal is RabbitMQ's
`403 ACCESS_REFUSED - write access to topic 'k' in exchange 'x' in vhost '/'
refused for user 'u'`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from channel.errors import AmqpError

__all__ = [
    "TopicPermission",
    "check_topic_access",
    "escape",
    "expand_topic_permission",
    "topic_access_allowed",
    "validate_pattern",
]

MAX_PATTERN_LENGTH = 1024
"""`rabbit_re:compile` refuses longer expressions (`pattern_too_long`, 4.2.8 and later)."""

_SPECIAL = frozenset("\\^$.|?*+()[]{}-")
"""What `rabbit_re:escape` backslash-escapes: the metacharacters, and `-`
for the inside of a character class."""


@dataclass(frozen=True, slots=True)
class TopicPermission:
    write: str
    read: str


def escape(value: str) -> str:
    """`rabbit_re:escape/1`: `value` as an expression matching exactly itself."""
    return "".join("\\" + c if c in _SPECIAL else c for c in value)


def expand_topic_permission(pattern: str, variables: Mapping[str, str]) -> str:
    """Replace every `{name}` of `variables` by its escaped value.

    Variables are applied in the order of their names, as `maps:fold` walks an
    Erlang map (`username` before `vhost`).
    """
    for name in sorted(variables):
        pattern = pattern.replace("{" + name + "}", escape(variables[name]))
    return pattern


def validate_pattern(pattern: str) -> str | None:
    """None when `pattern` is accepted by `set_topic_permissions`, else why not."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return "pattern_too_long"
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


def topic_access_allowed(perm: TopicPermission | None, which: str, routing_key: str,
                         variables: Mapping[str, str]) -> bool:
    """Whether `routing_key` passes the `which` ("write" / "read") expression."""
    if perm is None:
        return True
    pattern = expand_topic_permission(getattr(perm, which) or "^$", variables)
    try:
        return re.search(pattern, routing_key) is not None
    except re.error:  # RabbitMQ denies on a regex error
        return False


def check_topic_access(user: Any, vhost: str, exchange: str, routing_key: str,
                       which: str) -> None:
    """Raise 403 unless `user` (a `channel.access.auth.User` or None) may use `routing_key`
    on the topic exchange `exchange` of `vhost`."""
    name = "" if user is None else user.name
    perm = None if user is None else user.topic_permissions.get(vhost, {}).get(exchange)
    if topic_access_allowed(perm, which, routing_key, {"username": name, "vhost": vhost}):
        return
    raise AmqpError("ACCESS_REFUSED",
                    f"{which} access to topic '{routing_key}' in exchange '{exchange}' "
                    f"in vhost '{vhost}' refused for user '{name}'")
