"""Every configuration key of a node, with its kind and range, declared once.

The role RabbitMQ's `rabbit.schema` plays: the node's own keys, the `amqp` table
(`channel.connection.config.Config`'s fields) and the `ra` table (the Ra system's keys, as
`rabbit.schema` declares `raft.*`). `validate` checks a whole configuration
before anything starts, so a mistyped value stops the node with one line naming
the key instead of failing every connection later.

Ranges are upstream's where it has one: a frame_max a client can negotiate (at
least `FRAME_MIN_SIZE`, at most tune's 32 bits, 0 for no limit), tune's 16-bit
channel-max and heartbeat, `max_message_size` above 0 and at most 512 MiB, Ra's
numeric keys at least 1 (`raft.*`'s `non_zero_positive_integer`), timers within
Erlang's `send_after` limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config_kinds import (
    Backend,
    Bool,
    CreditPair,
    FeaturePermits,
    Int,
    Kind,
    Mismatch,
    NodeName,
    NodeNames,
    Nullable,
    Number,
    OneOf,
    OrInfinity,
    RabbitRelease,
    Table,
    Text,
)
from channel.protocol.assembler import MAX_MSG_SIZE
from channel.protocol.framing import FRAME_MIN_SIZE
from channel.queue_types.queue_type import QUEUE_TYPES
from fifo.machine import SUPPORTED_VERSIONS
from releases import RELEASES

__all__ = ["AMQP_KEYS", "NODE_KEYS", "RA_KEYS", "ConfigError", "Section", "check_ra_keys",
           "validate"]


class ConfigError(ValueError):
    """A configuration that cannot be used; the text is one line for the operator."""


@dataclass(frozen=True)
class Section:
    """A key holding a table of keys of its own (``amqp``, ``ra``)."""

    keys: Mapping[str, Kind]
    expected: str


LONG_MAX = 2**32 - 1  # an AMQP long; also Erlang's longest timer, in ms
SHORT_MAX = 2**16 - 1
MS = "milliseconds"

AMQP_KEYS: dict[str, Kind] = {
    "frame_max": Int(FRAME_MIN_SIZE, LONG_MAX, zero="no limit"),
    "initial_frame_max": Int(FRAME_MIN_SIZE, LONG_MAX, zero="no limit"),
    "channel_max": Int(0, SHORT_MAX, unit="0: no limit"),
    "heartbeat": Int(0, SHORT_MAX, unit="seconds; 0: no heartbeats"),
    "max_message_size": Int(1, MAX_MSG_SIZE),
    "handshake_timeout_ms": Int(0, LONG_MAX, unit=MS),
    "silent_close_delay_ms": Int(0, LONG_MAX, unit=MS),
    "channel_termination_timeout_ms": Int(0, LONG_MAX, unit=MS),
    "closing_timeout_ms": Int(0, LONG_MAX, unit=MS),
    "credit_flow_default_credit": CreditPair(),
    "permit_global_qos": Bool(),
    "cluster_name": Text(),
    "server_properties": Table(),
    "deprecated_features_permit": FeaturePermits(tuple(sorted(
        {feature for release in RELEASES.values() for feature in release.deprecated_features}))),
    "connection_max": OrInfinity(Int(0)),
    "channel_max_per_node": OrInfinity(Int(1)),
    "cluster_queue_limit": OrInfinity(Int(1)),
    "consumer_timeout": Nullable(Int(1, unit=MS), "none"),
    "channel_tick_interval": Int(1, unit=MS),
}

RA_KEYS: dict[str, Kind] = {
    "wal_max_size_bytes": Int(1),
    "wal_max_entries": Int(1),
    "wal_max_batch_size": Int(1),
    "wal_sync_method": OneOf(("datasync", "sync", "none")),
    "wal_compute_checksums": Bool(),
    "wal_pre_allocate": Bool(),
    "segment_max_entries": Int(1),
    "segment_compute_checksums": Bool(),
    "snapshot_chunk_size": Int(1),
    "receive_snapshot_timeout": Int(1),
    "default_max_pipeline_count": Int(1),
    "default_max_append_entries_rpc_batch_size": Int(1),
    "low_priority_commands_flush_size": Int(1),
    "machine_upgrade_strategy": OneOf(("all", "quorum")),
    "min_recovery_checkpoint_interval": Int(0),
}

NODE_KEYS: dict[str, Kind | Section] = {
    "name": NodeName(),
    "amqp_port": Int(0, SHORT_MAX, unit="0: any free port"),
    "amqp_host": Text(),
    "data_dir": Nullable(Text(), "none"),
    "peers": NodeNames(),
    "net_ticktime": Number(0, unit="seconds"),
    "backend": Backend(),
    "rabbitmq_version": RabbitRelease(SUPPORTED_VERSIONS),
    "quorum_cluster_size": Int(1),
    "default_queue_type": OneOf(QUEUE_TYPES),
    "formation_timeout": Number(0, unit="seconds"),
    "cookie": Nullable(Text(), "the default"),
    "history_dir": Nullable(Text(), "none"),
    "run_id": Text(),
    "state_digest_every": Nullable(Int(1), "the default"),
    "dead_letter_worker_consumer_prefetch": Int(1),
    "dead_letter_worker_publisher_confirm_timeout": Int(1, unit=MS),
    "management_port": Nullable(Int(0, SHORT_MAX, unit="0: any free port"), "none"),
    "prometheus_port": Nullable(Int(0, SHORT_MAX, unit="0: any free port"), "none"),
    "management_listener_ip": Text(),
    "amqp": Section(AMQP_KEYS, "a table of AMQP settings"),
    "ra": Section(RA_KEYS, "a table of Ra system settings"),
}

REQUIRED = ("name",)


def _refuse(path: str, expected: str, shown: str) -> ConfigError:
    return ConfigError(f"config key {path}: expected {expected}, got {shown}")


def _check(path: str, kind: Kind | Section, value: Any) -> Any:
    if isinstance(kind, Section):
        if not isinstance(value, dict):
            raise _refuse(path, kind.expected, repr(value))
        return _check_table(value, kind.keys, f"{path}.")
    try:
        return kind.check(value)
    except Mismatch as exc:
        raise _refuse(path, str(exc), repr(value)) from None


def _check_table(data: Mapping[str, Any], keys: Mapping[str, Kind | Section],
                 prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        kind = keys.get(key)
        if kind is None:
            raise ConfigError(f"config key {prefix}{key}: not a known key "
                              f"(known: {', '.join(sorted(keys))}), got {value!r}")
        out[key] = _check(f"{prefix}{key}", kind, value)
    return out


def validate(data: Mapping[str, Any], flags: Mapping[str, str] | None = None,
             ) -> dict[str, Any]:
    """The node's keys from a file (`data`, values as the file typed them) and from
    the command line (`flags`, text), checked and normalised; flags win."""
    out = _check_table(data, NODE_KEYS)
    for key, text in (flags or {}).items():
        kind = NODE_KEYS.get(key)
        if kind is None or isinstance(kind, Section):
            raise ConfigError(f"config key {key}: cannot be given as a flag, got {text!r}")
        try:
            out[key] = kind.check(kind.parse(text))
        except Mismatch as exc:
            raise _refuse(key, str(exc), repr(text)) from None
    for key in REQUIRED:
        if key not in out:
            kind = NODE_KEYS[key]
            assert not isinstance(kind, Section)
            raise _refuse(key, kind.expected, "nothing")
    return out


def check_ra_keys(keys: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ra`` table alone (what a node's ``ra`` key holds), checked as a node
    checks it; for tools that start Ra systems with such keys."""
    return _check("ra", NODE_KEYS["ra"], dict(keys))
