"""Configuration of the AMQP side of a node, and what every connection shares.

Defaults are RabbitMQ's; where a release changed one, `release` (the
`releases.Release` of the node's `rabbitmq_version`) decides. `BrokerContext` bundles the
node-wide services a reader and its channels use: users, vhosts, the exchange
topology, the queue backend, the alarm hub, and what the limits of
`channel.limits.limits` need (vhost limits, the live readers, the peers' counts).
The broker assembles one per node; tests build their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors import Node
from channel.access.auth import Users
from channel.exchanges.exchange import Topology
from channel.limits.alarm import Alarm
from channel.limits.credit_flow import DEFAULT_CREDIT, validate_credit
from channel.limits.limits import PeerCount, VhostLimits, check_queue_limits
from channel.queue_types.backend import QueueBackend
from channel.queue_types.consumer_timeout import (
    DEFAULT_CONSUMER_TIMEOUT_MS,
    DEFAULT_TICK_INTERVAL_MS,
)
from releases import DEFAULT_SERIES, RELEASES, Release, when_denied

__all__ = ["BrokerContext", "Config"]


@dataclass
class Config:
    frame_max: int = 131072
    initial_frame_max: int | None = None
    """The largest frame read before tune-ok; None: `release`'s `?FRAME_MIN_SIZE`
    (4096 up to 4.0, 8192 from 4.1), as `rabbit_reader` defaults it."""
    channel_max: int = 2047
    heartbeat: int = 60
    handshake_timeout_ms: int = 10_000
    max_message_size: int | None = None
    """The largest message body accepted; None: `release`'s default (128 MiB in
    3.10, 16 MiB from 3.13)."""
    credit_flow_default_credit: tuple[int, int] = DEFAULT_CREDIT
    silent_close_delay_ms: int = 3000
    channel_termination_timeout_ms: int = 3000
    closing_timeout_ms: int = 30_000
    release: Release = field(default_factory=lambda: RELEASES[DEFAULT_SERIES])
    """The RabbitMQ release the node behaves as (the node's `rabbitmq_version`)."""
    permit_global_qos: bool | None = None
    """Whether the deprecated feature `global_qos` is permitted; None: as `release`
    has it by default (permitted up to 4.2)."""
    deprecated_features_permit: dict[str, bool] = field(default_factory=dict)
    """`deprecated_features.permit.<feature>`: the configuration's word on a deprecated
    feature, over the release's default phase."""
    cluster_name: str = "warren"
    server_properties: dict[str, Any] = field(default_factory=dict)
    """Extra or replaced `connection.start` server properties (RabbitMQ's
    `server_properties`); they win over the release's, except `capabilities`."""
    connection_max: int | None = None
    """Connections per node (`connection_max`); None (or "infinity") is no limit."""
    channel_max_per_node: int | None = None
    """Channels per node, a positive integer or None (infinity)."""
    cluster_queue_limit: int | None = None
    """Queues in the cluster, a positive integer or None (infinity)."""
    consumer_timeout: int | None = DEFAULT_CONSUMER_TIMEOUT_MS
    """Milliseconds an unacked delivery may wait (`channel.queue_types.consumer_timeout`);
    None: off."""
    channel_tick_interval: int = DEFAULT_TICK_INTERVAL_MS
    """How often a channel checks its oldest unacked delivery."""

    @property
    def frame_max_before_tune(self) -> int:
        """`initial_frame_max`, else the release's `?FRAME_MIN_SIZE`."""
        if self.initial_frame_max is None:
            return self.release.frame_min_size
        return self.initial_frame_max

    @property
    def message_size_limit(self) -> int:
        """`max_message_size`, else the release's default."""
        if self.max_message_size is None:
            return self.release.default_max_message_size
        return self.max_message_size

    def permits(self, feature: str) -> bool:
        """Whether a deprecated feature may be used: the configuration's say, else the
        release's default."""
        if feature == "global_qos" and self.permit_global_qos is not None:
            return self.permit_global_qos
        if feature in self.deprecated_features_permit:
            return self.deprecated_features_permit[feature]
        return self.release.permits(feature)

    def denied_warning(self, feature: str) -> str:
        """RabbitMQ's text for `feature` used while not permitted."""
        return when_denied(feature, self.release.deprecated_features.get(
            feature, "permitted_by_default"))

    def __post_init__(self) -> None:
        validate_credit(self.credit_flow_default_credit)
        if self.permit_global_qos is None:
            self.permit_global_qos = self.release.permits("global_qos")
        for key, minimum in (("connection_max", None), ("channel_max_per_node", 1),
                             ("cluster_queue_limit", 1)):
            value = getattr(self, key)
            if value == "infinity":
                setattr(self, key, value := None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or (minimum is not None and value < minimum)):
                raise ValueError(f"{key} should be "
                                 + ("an integer" if minimum is None else "positive integer")
                                 + f" or 'infinity', got {value!r}")


@dataclass
class BrokerContext:
    node: Node
    backend: QueueBackend
    config: Config = field(default_factory=Config)
    users: Users = field(default_factory=Users.default)
    topology: Topology = field(default_factory=Topology)
    vhost_limits: VhostLimits = field(default_factory=VhostLimits)
    peer_count: PeerCount | None = None
    """Counts of the other nodes of the cluster (`channel.limits.limits`); None: a lone node."""
    readers: dict[Any, Any] = field(default_factory=dict)
    """The node's live readers (the listener's), which the limits count."""
    alarm: Alarm = field(init=False)

    def __post_init__(self) -> None:
        self.alarm = Alarm(self.node)
        if hasattr(self.backend, "queue_limits"):
            self.backend.queue_limits = self.check_queue_limits

    def check_queue_limits(self, vhost: str, name: str, count: Callable[[str | None], int],
                           ) -> None:
        """Step 10 of queue.declare, called by the backend for a queue it is about to
        create, with its own queue count."""
        check_queue_limits(name, vhost, self.vhost_limits.get(vhost),
                           self.config.cluster_queue_limit, count)

    @property
    def vhosts(self) -> set[str]:
        return set(self.topology.vhosts)
