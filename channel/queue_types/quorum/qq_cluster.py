"""Where a quorum queue's replicas live and how its Ra cluster is started.

This is the part of `rabbit_quorum_queue` that runs at `queue.declare` and
`queue.delete`: the Ra cluster name (`<vhost>_<queue>`, the vhost `/` written
`%2F`), the `rabbit_fifo` machine configuration derived from the queue
arguments (`rabbit_quorum_queue:ra_machine_config/1`), the choice of member nodes and of the first
leader (`x-quorum-initial-group-size`, `x-queue-leader-locator`), and starting
or deleting the members. It is shared by every `QueueRegistry` so that all of
them start queues the same way; none of it keeps state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from channel.errors import AmqpError, rs
from channel.queue_types.queue_registry import ServerId
from channel.queue_types.quorum.qq_dead_letter import handler
from channel.queue_types.quorum.qq_release_config import release_machine_config
from fifo.ra_glue import QueueMachine, machine_config
from ra import api
from releases import Release

__all__ = [
    "QUORUM_CLUSTER_SIZE",
    "delete_members",
    "fifo_config",
    "place_members",
    "queue_resource",
    "ra_name",
    "start_members",
]

#: `quorum_cluster_size`: replicas of a queue declared without an initial group size.
QUORUM_CLUSTER_SIZE = 3


def ra_name(vhost: str, name: str) -> str:
    """`qname_to_internal_name`: the Ra cluster (and server) name of a queue."""
    prefix = "%2F" if vhost == "/" else vhost
    return f"{prefix}_{name}"


def queue_resource(vhost: str, name: str) -> tuple[str, str, str, str]:
    """`#resource{virtual_host, kind = queue, name}` as the machine stores it."""
    return ("resource", vhost, "queue", name)


def fifo_config(vhost: str, name: str, arguments: Mapping[str, Any],
                created_ms: int, release: Release) -> dict[str, Any]:
    """The full machine config a declare passes (policies are not applied yet).

    Without an `x-delivery-limit` the limit is `release`'s default (20 from 4.0,
    none in 3.10). 4.3 adds the disconnected-consumer timeout and delayed retry
    (`channel.queue_types.quorum.qq_release_config`).

    `reject-publish-dlx` is refused by quorum queues with a warning and the
    default `drop-head` is used. Dead lettering follows the
    `x-dead-letter-*` arguments (`channel.queue_types.quorum.qq_dead_letter.handler`).
    """
    overflow = "reject_publish" if arguments.get("x-overflow") == "reject-publish" \
        else "drop_head"
    limit = arguments.get("x-delivery-limit", release.default_delivery_limit)
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = release.default_delivery_limit
    return machine_config(
        ra_name(vhost, name), queue_resource(vhost, name),
        max_length=arguments.get("x-max-length"),
        max_bytes=arguments.get("x-max-length-bytes"),
        overflow_strategy=overflow,
        delivery_limit=limit,
        expires=arguments.get("x-expires"),
        msg_ttl=arguments.get("x-message-ttl"),
        single_active_consumer_on=arguments.get("x-single-active-consumer") is True,
        dead_letter_handler=handler(
            arguments.get("x-dead-letter-exchange"), arguments.get("x-dead-letter-routing-key"),
            arguments.get("x-dead-letter-strategy"), str(arguments.get("x-overflow", "drop-head")),
            queue_resource(vhost, name)),
        created=created_ms,
        **release_machine_config(arguments, {}, release),
    )


def group_size(arguments: Mapping[str, Any], cluster_size: int, nodes: int) -> int:
    """`x-quorum-initial-group-size` (else `quorum_cluster_size`), capped by the nodes."""
    wanted = arguments.get("x-quorum-initial-group-size", cluster_size)
    return max(1, min(int(wanted), nodes))


def place_members(nodes: Sequence[str], declaring_node: str, size: int, locator: str,
                  leaders: Mapping[str, int], replicas: Mapping[str, int]) -> list[str]:
    """The member nodes of a new queue, the chosen leader first.

    `client-local` (the default) leads on the declaring node when it is a
    cluster member; `balanced` (and its deprecated aliases) leads on the node
    with the fewest queue leaders. Followers go to the nodes holding the
    fewest replicas; ties keep the cluster order, starting after the leader.
    """
    ring = list(nodes)
    if declaring_node in ring:
        start = ring.index(declaring_node)
        ring = ring[start:] + ring[:start]
    if locator in ("balanced", "random", "least-leaders", "min-masters"):
        leader = min(ring, key=lambda n: (leaders.get(n, 0), ring.index(n)))
    else:
        leader = ring[0]
    rest = [n for n in ring if n != leader]
    pos = ring.index(leader)
    rest.sort(key=lambda n: (replicas.get(n, 0), (ring.index(n) - pos) % len(ring)))
    return [leader, *rest[:size - 1]]


def start_members(system: str, vhost: str, name: str, servers: Sequence[ServerId],
                  config: Mapping[str, Any], machine_version: int, *, timeout: int = 5000,
                  server_config: Mapping[str, Any] | None = None) -> None:
    """Start one member per server and let the first one stand for election.

    `ra.api.start_cluster` would elect the member local to the caller; a
    queue's first leader is the locator's choice instead, so the members are
    started one by one and the election is triggered on `servers[0]`.
    Raises 541 when the cluster does not form (the started members are
    deleted again). Every member starts at `machine_version` (the declaring
    node's release's).
    """
    cluster = servers[0][0]
    started: list[ServerId] = []
    for sid in servers:
        conf = {**dict(server_config or {}), "id": sid, "uid": api.new_uid(cluster),
                "cluster_name": cluster, "initial_members": list(servers),
                "machine": QueueMachine(dict(config), machine_version),
                "initial_machine_version": machine_version, "log_init_args": {}}
        if api.start_server(system, conf) == "ok":
            started.append(sid)
    if servers[0] in started:
        api.trigger_election(servers[0], timeout)
        if api.members(list(started), timeout * len(servers))[0] == "ok":
            return
    for sid in started:
        api.force_delete_server(system, sid)
    raise AmqpError("INTERNAL_ERROR", f"Cannot declare quorum queue {rs('queue', name, vhost)}"
                                      ", ra cluster could not be formed")


def delete_members(system: str, servers: Sequence[ServerId]) -> None:
    """Delete every member and its data; members that cannot be reached are skipped.

    Ra's `delete_cluster` commits a delete entry first, which the pure Raft
    core does not model yet, so members are force-deleted one by one.
    """
    for sid in servers:
        api.force_delete_server(system, sid)
