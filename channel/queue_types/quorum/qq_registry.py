"""`LocalRegistry`: the queue table of nodes that share one OS process.

Nodes running without a broker (tests, embedded clusters on the in-memory
network) still need one place where every channel finds a quorum queue's Ra
cluster. This registry keeps the records in a dict shared by those nodes and
starts or deletes the Ra clusters itself (`channel.queue_types.quorum.qq_cluster`); the broker's
registry does the same over its metadata store. Declarations of the same
queue are serialised so that a race between two channels starts one cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gevent.lock import BoundedSemaphore

import actors
from channel.queue_types.queue_args import validate_quorum_args
from channel.queue_types.queue_registry import QueueRecord, ServerId
from channel.queue_types.quorum import qq_cluster
from releases import DEFAULT_SERIES, RELEASES, Release

__all__ = ["LocalRegistry"]


class LocalRegistry:
    """In-memory `QueueRegistry` over a fixed list of cluster nodes."""

    def __init__(self, nodes: Sequence[str], *, system: str = "default",
                 cluster_size: int = qq_cluster.QUORUM_CLUSTER_SIZE, timeout: int = 5000,
                 server_config: Mapping[str, Any] | None = None,
                 release: Release | None = None) -> None:
        self.nodes = list(nodes)
        #: the release whose machine version and defaults new queues get
        #: (the newest series warren builds unless told)
        self.release = release or RELEASES[DEFAULT_SERIES]
        self.system = system
        self.cluster_size = cluster_size
        self.timeout = timeout
        self.server_config = dict(server_config or {})
        self.records: dict[tuple[str, str], QueueRecord] = {}
        self._locks: dict[tuple[str, str], BoundedSemaphore] = {}

    def lookup(self, vhost: str, name: str) -> QueueRecord | None:
        return self.records.get((vhost, name))

    def list(self, vhost: str | None = None) -> list[QueueRecord]:
        return [r for (v, _), r in self.records.items() if vhost is None or v == vhost]

    def update_leader(self, vhost: str, name: str, leader: ServerId) -> None:
        record = self.records.get((vhost, name))
        if record is not None and leader in record.servers:
            self.records[(vhost, name)] = replace(record, leader=leader)

    def declare(self, vhost: str, name: str, *, durable: bool,
                arguments: Mapping[str, Any], declaring_node: str) -> tuple[str, QueueRecord]:
        key = (vhost, name)
        lock = self._locks.setdefault(key, BoundedSemaphore())
        with lock:
            existing = self.records.get(key)
            if existing is not None:
                return ("existing", existing)
            validate_quorum_args(name, vhost, arguments)
            record = self._start(vhost, name, durable, arguments, declaring_node)
            self.records[key] = record
            return ("created", record)

    def _start(self, vhost: str, name: str, durable: bool, arguments: Mapping[str, Any],
               declaring_node: str) -> QueueRecord:
        leaders: dict[str, int] = {}
        replicas: dict[str, int] = {}
        for r in self.records.values():
            leader = r.leader or r.servers[0]
            leaders[leader[1]] = leaders.get(leader[1], 0) + 1
            for _, node in r.servers:
                replicas[node] = replicas.get(node, 0) + 1
        size = qq_cluster.group_size(arguments, self.cluster_size, len(self.nodes))
        locator = str(arguments.get("x-queue-leader-locator", "client-local"))
        nodes = qq_cluster.place_members(self.nodes, declaring_node, size, locator,
                                         leaders, replicas)
        cluster = qq_cluster.ra_name(vhost, name)
        servers = tuple((cluster, node) for node in nodes)
        created = int(actors.get_node().clock.system_time_ms())
        config = qq_cluster.fifo_config(vhost, name, arguments, created, self.release)
        qq_cluster.start_members(self.system, vhost, name, servers, config,
                                 self.release.machine_version, timeout=self.timeout,
                                 server_config=self.server_config)
        return QueueRecord(vhost, name, durable, dict(arguments), cluster, servers,
                           leader=servers[0])

    def delete(self, vhost: str, name: str) -> None:
        record = self.records.pop((vhost, name), None)
        if record is not None:
            qq_cluster.delete_members(self.system, record.servers)
