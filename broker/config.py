"""A node's configuration: command-line flags or a JSON / TOML file, same keys.

Defaults are RabbitMQ's where it has one (AMQP port 5672, `quorum_cluster_size`
3, `net_ticktime` 60). `peers` is the fixed peer list of cluster formation
(`cluster_formation.classic_config.nodes`); the node itself may be in it.
`backend` names the queue backend (`broker.backends`): `rabbit`, RabbitMQ's quorum and
classic queues and the default, so that a node serves the queues real clients
expect (`quorum` is its former name); `memory`, the in-memory test stand-in of
`channel.queue_types.testing`; or any `module:factory` taking the `BrokerNode`.

`load` is the one way in: every key of the file and of the flags is checked
against `broker.config_schema` first, so a `NodeConfig` it returns holds only
values the node can use.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.backends import DEFAULT as BACKEND_DEFAULT
from broker.config_schema import ConfigError, validate
from channel.queue_types.queue_type import NODE_DEFAULT_QUEUE_TYPE
from releases import DEFAULT_SERIES

__all__ = ["ConfigError", "NodeConfig", "load"]


@dataclass
class NodeConfig:
    name: str
    amqp_port: int = 5672
    amqp_host: str = "127.0.0.1"
    data_dir: str | None = None
    peers: list[str] = field(default_factory=list)
    net_ticktime: float = 60.0
    backend: str = BACKEND_DEFAULT
    #: the RabbitMQ release series this node behaves as (`releases.RELEASES`)
    rabbitmq_version: str = DEFAULT_SERIES
    quorum_cluster_size: int = 3
    #: the type of a declare without `x-queue-type` where its vhost names none
    #: (`channel.queue_types.queue_type`)
    default_queue_type: str = NODE_DEFAULT_QUEUE_TYPE
    formation_timeout: float = 60.0
    cookie: str | None = None
    #: directory for recorded history (analysis.recorder); none records nothing
    history_dir: str | None = None
    run_id: str = "run"
    #: K of the recorded history: an `applied` row carries a state digest when its raft
    #: index is a multiple of K (1 in tests, about 100 at scale; the digest reads
    #: the whole queue state). None: `WARREN_STATE_DIGEST_EVERY`, else 1
    state_digest_every: int | None = None
    #: at-least-once dead lettering: the worker's prefetch and its confirm timeout (ms),
    #: after which unconfirmed or unroutable dead letters are published again
    dead_letter_worker_consumer_prefetch: int = 32
    dead_letter_worker_publisher_confirm_timeout: int = 180_000
    #: the management plugin's HTTP API and Prometheus listeners (`management`) on
    #: RabbitMQ's ports; 0: a free port, None (null in a file): not served
    management_port: int | None = 15672
    prometheus_port: int | None = 15692
    management_listener_ip: str = "127.0.0.1"
    #: overrides of channel.connection.config.Config fields (channel_max, frame_max, heartbeat, ...)
    amqp: dict[str, Any] = field(default_factory=dict)
    #: Ra system config keys for the node's durable Ra system (RabbitMQ's ``raft.*``
    #: settings and Ra's application env: ``wal_max_size_bytes``, ``wal_pre_allocate``,
    #: ``wal_sync_method`` ...; `broker.config_schema.RA_KEYS`), Ra's defaults otherwise
    ra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in self.peers:
            self.peers = [*self.peers, self.name]

    @property
    def all_nodes(self) -> list[str]:
        return sorted(self.peers)


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}".replace("\n", " ")) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"cannot read config {path}: expected a table of keys, "
                          f"got {data!r}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def load(path: str | Path | None = None,
         flags: Mapping[str, str | None] | None = None) -> NodeConfig:
    """The configuration of a JSON (`.json`) or TOML file, or none, and the flags
    given (their text; None: not given), which win over the file."""
    data = _read(Path(path)) if path is not None else {}
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    return NodeConfig(**validate(data, given))
