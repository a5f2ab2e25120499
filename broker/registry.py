"""`QueueRegistry` over the metadata store: where quorum queues live.

Declaring a quorum queue is what `rabbit_quorum_queue:declare` does: store the
record, pick `x-quorum-initial-group-size` (default `quorum_cluster_size`, 3)
running nodes with the leader locator, start the queue's Ra cluster
(`rabbit_fifo` with the full machine config) with its leader on the chosen
node, and record the members; a cluster that cannot be started takes its
record with it (`541 INTERNAL_ERROR - Cannot declare quorum queue ...`).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

import actors
from broker import policy as pol
from broker.metadata import effective_policy
from broker.queue_code import initial_machine_version
from broker.queue_config import machine_config, queue_resource, ra_name
from broker.store import Metadata
from channel.errors import AmqpError, rs
from channel.queue_types.queue_args import validate_quorum_args
from channel.queue_types.queue_registry import QueueRecord, ServerId
from fifo import ra_glue
from ra import api
from ra import system as ra_system
from releases import Release

__all__ = ["MetadataRegistry", "choose_nodes"]

log = logging.getLogger("warren.broker")
QUORUM_CLUSTER_SIZE = 3


def choose_nodes(running: list[str], declaring_node: str, size: int, locator: str,
                 leaders: Mapping[str, int], replicas: Mapping[str, int]) -> list[str]:
    """Members for a new queue, leader first (`rabbit_queue_location`).

    client-local: the declaring node leads (if it runs); balanced: the node
    with the fewest leaders does. Followers are the nodes with the fewest
    replicas. Deterministic: ties go to the node name that sorts first.
    """
    size = max(1, min(size, len(running)))
    if locator == "balanced" or declaring_node not in running:
        leader = min(running, key=lambda n: (leaders.get(n, 0), n))
    else:
        leader = declaring_node
    rest = sorted((n for n in running if n != leader), key=lambda n: (replicas.get(n, 0), n))
    return [leader, *rest[: size - 1]]


_LOCATOR_ALIASES = {"random": "balanced", "least-leaders": "balanced",
                    "min-masters": "balanced"}


class MetadataRegistry:
    def __init__(self, metadata: Metadata, release: Release, system: str = "default",
                 cluster_size: int = QUORUM_CLUSTER_SIZE) -> None:
        self.metadata = metadata
        self.system = system
        self.cluster_size = cluster_size
        #: the node's release: the `rabbit_fifo` version new queues start at and the
        #: defaults of their config
        self.release = release

    @property
    def machine_version(self) -> int:
        """The `rabbit_fifo` version a queue declared here starts at."""
        return self.release.machine_version

    # ------------------------------------------------------------------ reads

    def lookup(self, vhost: str, name: str) -> QueueRecord | None:
        return self.metadata.view.state.queues.get((vhost, name))

    def list(self, vhost: str | None = None) -> list[QueueRecord]:
        return [r for r in self.metadata.view.state.queues.values()
                if vhost is None or r.vhost == vhost]

    # ----------------------------------------------------------------- writes

    def declare(self, vhost: str, name: str, *, durable: bool, arguments: Mapping[str, Any],
                declaring_node: str) -> tuple[str, QueueRecord]:
        existing = self.lookup(vhost, name)
        if existing is not None:
            return ("existing", existing)
        validate_quorum_args(name, vhost, arguments)
        state = self.metadata.view.state
        policy = effective_policy(state, vhost, name)
        definition = dict(policy.definition) if policy else {}
        locator = pol.effective("queue-leader-locator", arguments, definition) or "client-local"
        size = int(arguments.get("x-quorum-initial-group-size", self.cluster_size))
        leaders: dict[str, int] = {}
        replicas: dict[str, int] = {}
        for r in state.queues.values():
            if r.leader is not None:
                leaders[r.leader[1]] = leaders.get(r.leader[1], 0) + 1
            for _n, node in r.servers:
                replicas[node] = replicas.get(node, 0) + 1
        nodes = choose_nodes(self.running_nodes(), declaring_node, size,
                             _LOCATOR_ALIASES.get(locator, locator), leaders, replicas)
        rname = ra_name(vhost, name)
        servers = tuple((rname, n) for n in nodes)
        record = QueueRecord(vhost, name, durable, dict(arguments), rname, servers)
        outcome, record = self.metadata.command(("declare_queue", record))
        if outcome == "existing":
            return ("existing", record)
        result = self._start_cluster(record, nodes)
        if result[0] != "ok":
            self.metadata.command(("delete_queue", vhost, name))
            raise AmqpError("INTERNAL_ERROR", f"Cannot declare quorum queue "
                            f"{rs('queue', name, vhost)}, nodes {nodes}: {result!r}")
        self.metadata.command(("update_leader", vhost, name, servers[0]))
        return ("created", self.lookup(vhost, name) or record)

    def _start_cluster(self, record: QueueRecord, nodes: builtins.list[str]) -> Any:
        config = machine_config(record, int(actors.get_node().clock.system_time_ms()),
                                self.release)
        config.pop("name")
        config.pop("queue_resource")
        # started from the chosen leader's node, whose member stands for election first,
        # at the oldest machine version the member nodes' code runs
        version = initial_machine_version(self.machine_version, nodes)
        start = partial(ra_glue.start_queue, machine_version=version)
        return ra_system.rpc(nodes[0], start, self.system, record.ra_name,
                             queue_resource(record.vhost, record.name), nodes, config,
                             timeout=30_000)

    def delete(self, vhost: str, name: str) -> None:
        record = self.lookup(vhost, name)
        if record is None:
            return
        self.metadata.command(("delete_queue", vhost, name))
        result = api.delete_cluster(list(record.servers), 5000, self.system)
        if result[0] != "ok":
            for sid in record.servers:
                api.force_delete_server(self.system, sid)

    def update_leader(self, vhost: str, name: str, leader: ServerId) -> None:
        record = self.lookup(vhost, name)
        if record is not None and record.leader != leader:
            self.metadata.command(("update_leader", vhost, name, leader))

    # ---------------------------------------------------------------- nodes

    def running_nodes(self) -> builtins.list[str]:
        """Metadata members this node is connected to, and itself."""
        node = actors.get_node()
        connected = set(node.nodes())
        members = {n for n in [self.metadata.node_name, *self.metadata.peers]}
        return sorted(n for n in members if n == node.name or n in connected)
