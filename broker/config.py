"""A node's configuration: command-line flags or a JSON / TOML file, same keys.

Defaults are RabbitMQ's where it has one (AMQP port 5672, `quorum_cluster_size`
3, `net_ticktime` 60). `peers` is the fixed peer list of cluster formation
(`cluster_formation.classic_config.nodes`); the node itself may be in it.
`backend` names the queue backend: `memory` (the in-memory test backend of
`channel.testing`), `quorum`, or any `module:factory` taking the `BrokerNode`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "NodeConfig", "load"]


class ConfigError(ValueError):
    pass


@dataclass
class NodeConfig:
    name: str
    amqp_port: int = 5672
    amqp_host: str = "127.0.0.1"
    data_dir: str | None = None
    peers: list[str] = field(default_factory=list)
    net_ticktime: float = 60.0
    backend: str = "memory"
    quorum_cluster_size: int = 3
    formation_timeout: float = 60.0
    cookie: str | None = None
    #: directory for recorded history (analysis.recorder); none records nothing
    history_dir: str | None = None
    run_id: str = "run"
    #: K of the recorded history: an `applied` row carries a state digest when its raft
    #: index is a multiple of K (spec: 1 in tests, about 100 at scale; the digest reads
    #: the whole queue state). None: `WARREN_STATE_DIGEST_EVERY`, else 1
    state_digest_every: int | None = None
    #: at-least-once dead lettering: the worker's prefetch and its confirm timeout (ms),
    #: after which unconfirmed or unroutable dead letters are published again
    dead_letter_worker_consumer_prefetch: int = 32
    dead_letter_worker_publisher_confirm_timeout: int = 180_000
    #: overrides of channel.config.Config fields (channel_max, frame_max, heartbeat, ...)
    amqp: dict[str, Any] = field(default_factory=dict)
    #: Ra system config keys for the node's durable Ra system (RabbitMQ's ``raft.*``
    #: settings and Ra's application env: ``wal_max_size_bytes``, ``wal_pre_allocate``,
    #: ``wal_sync_method`` ...; `ra.system.SETTABLE_KEYS`), Ra's defaults otherwise
    ra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "@" not in self.name or ":" not in self.name.split("@", 1)[1]:
            raise ConfigError(f"node name must be name@host:port, got {self.name!r}")
        for peer in self.peers:
            if "@" not in peer or ":" not in peer.split("@", 1)[1]:
                raise ConfigError(f"peer must be name@host:port, got {peer!r}")
        if self.name not in self.peers:
            self.peers = [*self.peers, self.name]
        from fifo.replica_trace import valid_digest_every
        from ra.system import check_settable

        k = self.state_digest_every
        if k is not None and not valid_digest_every(k):
            raise ConfigError(f"state_digest_every must be an integer of at least 1, got {k!r}")

        if not isinstance(self.ra, dict):
            raise ConfigError(f"ra must be a table of Ra system keys, got {self.ra!r}")
        try:
            check_settable(self.ra)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def all_nodes(self) -> list[str]:
        return sorted(self.peers)


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> NodeConfig:
    """Read a JSON (`.json`) or TOML file; `overrides` (flags given) win."""
    p = Path(path)
    try:
        text = p.read_text()
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from exc
    data = {k.replace("-", "_"): v for k, v in data.items()}
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    known = {f.name for f in fields(NodeConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(unknown)}")
    if isinstance(data.get("peers"), str):
        data["peers"] = [s for s in data["peers"].split(",") if s]
    try:
        return NodeConfig(**data)
    except TypeError as exc:
        raise ConfigError(str(exc)) from exc
