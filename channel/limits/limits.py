"""RabbitMQ's connection, channel and queue limits, and the counts they are checked against.

Three layers of limits guard a node, each with RabbitMQ's refusal text:

* node config: `connection_max` (connections per node, `rabbit_reader`),
  `channel_max_per_node` (channels per node) and `cluster_queue_limit` (queues
  in the cluster, `rabbit_queue_type`); absent means infinity;
* vhost limits `max-connections` and `max-queues` (`rabbit_vhost_limit`);
* user limits `max-connections` and `max-channels`
  (`rabbit_auth_backend_internal`).

A vhost or user limit of 0 admits nothing, a negative one is no limit, and a
limit is only counted against when it is set. Vhost and user counts are
cluster-wide, as `rabbit_connection_tracking` / `rabbit_channel_tracking` sum
them over the running nodes: each node counts its own live readers (a
connection counts from its `connection.open` until its reader ends) and asks
its peers for theirs through `BrokerContext.peer_count`. Node counts are
local. Like RabbitMQ's, the counts are a snapshot, not a reservation: two
connections opened at the same moment on two nodes may both get the last
slot.

The validation of `set_vhost_limits` / `set_user_limits` definitions is here
too, with the texts of `rabbit_parameter_validation`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from channel.errors import AmqpError, json_term

__all__ = [
    "USER_LIMITS",
    "VHOST_LIMITS",
    "LimitsError",
    "PeerCount",
    "QueueLimits",
    "VhostLimits",
    "channel_refusal",
    "check_queue_limits",
    "connection_refusal",
    "effective_limit",
    "local_count",
    "validate_limits",
]

VHOST_LIMITS = ("max-connections", "max-queues")
USER_LIMITS = ("max-connections", "max-channels")

#: what `local_count` (and a peer's answer) can count
VHOST_CONNECTIONS = "vhost_connections"
USER_CONNECTIONS = "user_connections"
USER_CHANNELS = "user_channels"

#: `peer_count(kind, key)`: the sum over the other running nodes of the cluster
PeerCount = Callable[[str, str], int]
#: a backend's hook `(vhost, name, count)`, raising when a new queue would break a
#: queue limit; `count(vhost)` counts the backend's queues of a vhost (None: all)
QueueLimits = Callable[[str, str, Callable[[str | None], int]], None]


@dataclass
class VhostLimits:
    """The vhost limits table (vhost -> definition); a broker serves it from its store."""

    limits: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, vhost: str) -> Mapping[str, Any]:
        return self.limits.get(vhost, {})

    def set(self, vhost: str, definition: Mapping[str, Any]) -> None:
        self.limits[vhost] = dict(definition)

    def clear(self, vhost: str) -> None:
        self.limits.pop(vhost, None)


def effective_limit(limits: Mapping[str, Any] | None, key: str) -> int | None:
    """The limit in force: None when absent, negative (no limit) or not an integer."""
    value = (limits or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _over(limit: int | None, count: Callable[[], int]) -> bool:
    """0 admits nothing; otherwise full when `count()` (asked only then) reaches it."""
    if limit is None:
        return False
    return limit == 0 or count() >= limit


# ------------------------------------------------------------------ counting


def _opened(reader: Any) -> bool:
    """A reader is a tracked connection once its `connection.open` was accepted."""
    return bool(reader.vhost) and reader.user is not None


def local_count(readers: Iterable[Any], kind: str, key: str) -> int:
    """This node's count of `kind` for `key` (a vhost or a user name)."""
    if kind == VHOST_CONNECTIONS:
        return sum(1 for r in readers if _opened(r) and r.vhost == key)
    if kind == USER_CONNECTIONS:
        return sum(1 for r in readers if _opened(r) and r.user.name == key)
    if kind == USER_CHANNELS:
        return sum(len(r.channels) for r in readers if _opened(r) and r.user.name == key)
    raise ValueError(f"unknown count {kind!r}")


def _cluster_count(readers: Iterable[Any], peer_count: PeerCount | None,
                   kind: str, key: str) -> int:
    local = local_count(readers, kind, key)
    return local if peer_count is None else local + peer_count(kind, key)


# ------------------------------------------------------------------- checks


def connection_refusal(*, connection_max: int | None, active_connections: int,
                       vhost: str, vhost_limits: Mapping[str, Any], user: str,
                       user_limits: Mapping[str, Any], readers: Collection[Any],
                       peer_count: PeerCount | None) -> AmqpError | None:
    """The limit checks of `connection.open`, in `rabbit_reader`'s order (node,
    vhost, user); `active_connections` includes the connection being opened
    (ranch's count), the vhost and user counts do not."""
    if connection_max is not None and active_connections > connection_max:
        return AmqpError("NOT_ALLOWED", f"connection refused: node connection limit "
                                        f"({connection_max}) is reached", (10, 40))
    limit = effective_limit(vhost_limits, "max-connections")
    if _over(limit, lambda: _cluster_count(readers, peer_count, VHOST_CONNECTIONS, vhost)):
        return AmqpError("NOT_ALLOWED", f"access to vhost '{vhost}' refused for user '{user}': "
                                        f"connection limit ({limit}) is reached", (10, 40))
    limit = effective_limit(user_limits, "max-connections")
    if _over(limit, lambda: _cluster_count(readers, peer_count, USER_CONNECTIONS, user)):
        return AmqpError("NOT_ALLOWED", f"connection refused for user '{user}': "
                                        f"user connection limit ({limit}) is reached", (10, 40))
    return None


def channel_refusal(*, user: str, user_limits: Mapping[str, Any],
                    channel_max_per_node: int | None, node: str, readers: Collection[Any],
                    peer_count: PeerCount | None) -> AmqpError | None:
    """`rabbit_reader:is_over_limits`: the user's `max-channels` (cluster-wide, over
    all of the user's connections), then the node's `channel_max_per_node`."""
    limit = effective_limit(user_limits, "max-channels")
    if _over(limit, lambda: _cluster_count(readers, peer_count, USER_CHANNELS, user)):
        return AmqpError("NOT_ALLOWED", f"number of channels opened for user '{user}' has "
                                        f"reached the maximum allowed user limit of {limit}")
    if channel_max_per_node is not None:
        channels = sum(len(r.channels) for r in readers)
        if channels >= channel_max_per_node:
            return AmqpError("NOT_ALLOWED", f"number of channels opened on node '{node}' has "
                                            "reached the maximum allowed limit of "
                                            f"{channel_max_per_node}")
    return None


def check_queue_limits(name: str, vhost: str, vhost_limits: Mapping[str, Any],
                       cluster_queue_limit: int | None,
                       count: Callable[[str | None], int]) -> None:
    """`rabbit_queue_type:check_queue_limits` for a new queue: the vhost's
    `max-queues`, then `cluster_queue_limit`; `count(vhost)` counts the queues of a
    vhost, `count(None)` all of them."""
    limit = effective_limit(vhost_limits, "max-queues")
    if _over(limit, lambda: count(vhost)):
        raise AmqpError("PRECONDITION_FAILED", f"cannot declare queue '{name}': queue limit "
                                               f"in vhost '{vhost}' ({limit}) is reached")
    if cluster_queue_limit is not None and count(None) >= cluster_queue_limit:
        raise AmqpError("PRECONDITION_FAILED", f"cannot declare queue '{name}': queue limit "
                                               f"in cluster ({cluster_queue_limit}) is reached")


# --------------------------------------------------------------- validation


class LimitsError(ValueError):
    """A refused limits definition; the message is rabbitmqctl's."""


def validate_limits(definition: Any, keys: tuple[str, ...], name: str) -> list[str]:
    """`rabbit_parameter_validation:proplist` over optional integer keys: the errors,
    in RabbitMQ's order (unknown keys first, then the known keys last to first)."""
    if not isinstance(definition, dict):
        return [f"{name} not a list {json_term(definition)}"]
    errors = [f"{key} should be a number, actually was {json_term(definition[key])}"
              for key in reversed(keys) if key in definition
              and (isinstance(definition[key], bool) or not isinstance(definition[key], int))]
    rest = sorted(((k, v) for k, v in definition.items() if k not in keys),
                  key=lambda kv: kv[0])
    if rest:
        terms = "[" + ",".join("{" + json_term(k) + "," + json_term(v) + "}"
                               for k, v in rest) + "]"
        errors.insert(0, f"Unrecognised terms {terms} in {name}")
    return errors
