"""Configuration of the AMQP side of a node, and what every connection shares.

Defaults are RabbitMQ's (spec channel.md §13). `BrokerContext` bundles the
node-wide services a reader and its channels use: users, vhosts, the exchange
topology, the queue backend and the alarm hub. The broker assembles one per
node; tests build their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors import Node
from channel.alarm import Alarm
from channel.auth import Users
from channel.backend import QueueBackend
from channel.credit_flow import DEFAULT_CREDIT, validate_credit
from channel.exchange import Topology

__all__ = ["BrokerContext", "Config"]


@dataclass
class Config:
    frame_max: int = 131072
    initial_frame_max: int = 8192
    channel_max: int = 2047
    heartbeat: int = 60
    handshake_timeout_ms: int = 10_000
    max_message_size: int = 16_777_216
    credit_flow_default_credit: tuple[int, int] = DEFAULT_CREDIT
    silent_close_delay_ms: int = 3000
    channel_termination_timeout_ms: int = 3000
    closing_timeout_ms: int = 30_000
    permit_global_qos: bool = True
    """4.0-4.2 default: the deprecated feature `global_qos` is permitted."""
    cluster_name: str = "warren"
    server_properties: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_credit(self.credit_flow_default_credit)


@dataclass
class BrokerContext:
    node: Node
    backend: QueueBackend
    config: Config = field(default_factory=Config)
    users: Users = field(default_factory=Users.default)
    topology: Topology = field(default_factory=Topology)
    alarm: Alarm = field(init=False)

    def __post_init__(self) -> None:
        self.alarm = Alarm(self.node)

    @property
    def vhosts(self) -> set[str]:
        return set(self.topology.vhosts)
