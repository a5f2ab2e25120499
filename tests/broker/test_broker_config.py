"""A node's configuration is checked whole when it is loaded: every key, the `amqp`
and `ra` tables' keys included, has one declared type and range, and a file and the
command-line flags are held to the same declaration.

A bad key is one `ConfigError` whose text names the key (with its table), the value
and what the key takes; `warren node start` prints it and exits 78 (see
test_broker_startup_errors.py)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from broker.config import ConfigError, NodeConfig, load
from broker.config_schema import AMQP_KEYS, NODE_KEYS, RA_KEYS, check_ra_keys
from broker.node import ra_system_config
from channel.connection.config import Config
from fifo.machine import SUPPORTED_VERSIONS
from releases import lookup

NAME = "a@127.0.0.1:25672"


def load_json(tmp_path: Path, **keys: Any) -> Any:
    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": NAME, **keys}))
    return load(cfg)


def refused(tmp_path: Path, **keys: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_json(tmp_path, **keys)
    text = str(info.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------ the amqp table


def test_a_mistyped_frame_max_is_named_with_its_value_and_range(tmp_path: Path) -> None:
    assert refused(tmp_path, amqp={"frame_max": "big"}) == (
        "config key amqp.frame_max: expected an integer from 4096 to 4294967295, "
        "or 0 for no limit, got 'big'")


@pytest.mark.parametrize("key, value, expected", [
    # the frame size a client may negotiate is at least 4096 and fits tune's 32 bits
    ("frame_max", 4095, "an integer from 4096 to 4294967295, or 0 for no limit"),
    ("frame_max", 2**32, "an integer from 4096 to 4294967295, or 0 for no limit"),
    ("frame_max", 131072.0, "an integer from 4096 to 4294967295, or 0 for no limit"),
    ("initial_frame_max", 100, "an integer from 4096 to 4294967295, or 0 for no limit"),
    # tune's channel-max and heartbeat are 16-bit fields
    ("channel_max", 65536, "an integer from 0 to 65535 (0: no limit)"),
    ("channel_max", -1, "an integer from 0 to 65535 (0: no limit)"),
    ("heartbeat", 70000, "an integer from 0 to 65535 (seconds; 0: no heartbeats)"),
    ("heartbeat", "60", "an integer from 0 to 65535 (seconds; 0: no heartbeats)"),
    ("heartbeat", True, "an integer from 0 to 65535 (seconds; 0: no heartbeats)"),
    # RabbitMQ's max_message_size validator: above 0, at most 512 MiB
    ("max_message_size", 0, "an integer from 1 to 536870912"),
    ("max_message_size", 536870913, "an integer from 1 to 536870912"),
    ("connection_max", -1, "an integer of at least 0, or 'infinity'"),
    ("connection_max", "unlimited", "an integer of at least 0, or 'infinity'"),
    ("channel_max_per_node", 0, "an integer of at least 1, or 'infinity'"),
    ("cluster_queue_limit", 0, "an integer of at least 1, or 'infinity'"),
    ("consumer_timeout", 0, "an integer of at least 1 (milliseconds), or null for none"),
    ("channel_tick_interval", 0, "an integer of at least 1 (milliseconds)"),
    ("handshake_timeout_ms", -5, "an integer from 0 to 4294967295 (milliseconds)"),
    ("closing_timeout_ms", 1.5, "an integer from 0 to 4294967295 (milliseconds)"),
    ("permit_global_qos", "yes", "true or false"),
    ("permit_global_qos", 1, "true or false"),
    ("cluster_name", "", "a non-empty string"),
    ("server_properties", [1], "a table"),
    ("deprecated_features_permit", {"transient_nonexcl_queues": "yes"},
     "a table of true or false keyed by global_qos, queue_master_locator, "
     "transient_nonexcl_queues"),
    ("deprecated_features_permit", {"classic_mirrored_queues": True},
     "a table of true or false keyed by global_qos, queue_master_locator, "
     "transient_nonexcl_queues"),
    ("credit_flow_default_credit", [200, 400],
     "a pair [initial, more_after] of integers of at least 0, more_after at most initial"),
    ("credit_flow_default_credit", 400,
     "a pair [initial, more_after] of integers of at least 0, more_after at most initial"),
])
def test_each_amqp_key_has_a_type_and_range(tmp_path: Path, key: str, value: Any,
                                            expected: str) -> None:
    assert refused(tmp_path, amqp={key: value}) == (
        f"config key amqp.{key}: expected {expected}, got {value!r}")


def test_an_unknown_amqp_key_is_named_with_the_known_ones(tmp_path: Path) -> None:
    text = refused(tmp_path, amqp={"frame_maximum": 131072})
    assert text.startswith("config key amqp.frame_maximum: not a known key (known: ")
    assert "frame_max, " in text and text.endswith("), got 131072")


def test_the_amqp_key_must_be_a_table(tmp_path: Path) -> None:
    assert refused(tmp_path, amqp=[1]) == (
        "config key amqp: expected a table of AMQP settings, got [1]")


def test_good_amqp_values_are_taken_as_given_or_as_upstream_spells_them(
        tmp_path: Path) -> None:
    amqp = load_json(tmp_path, amqp={
        "frame_max": 0, "channel_max": 0, "heartbeat": 0, "max_message_size": 536870912,
        "connection_max": "infinity", "consumer_timeout": None,
        "credit_flow_default_credit": [400, 200]}).amqp
    assert amqp == {"frame_max": 0, "channel_max": 0, "heartbeat": 0,
                    "max_message_size": 536870912, "connection_max": None,
                    "consumer_timeout": None, "credit_flow_default_credit": (400, 200)}
    assert Config(**amqp).credit_flow_default_credit == (400, 200)


def test_a_node_can_permit_a_deprecated_feature_its_release_denies(tmp_path: Path) -> None:
    amqp = load_json(tmp_path, rabbitmq_version="4.3", amqp={
        "deprecated_features_permit": {"transient_nonexcl_queues": True}}).amqp
    config = Config(**amqp, release=lookup("4.3", SUPPORTED_VERSIONS))
    assert config.permits("transient_nonexcl_queues")
    assert not config.permits("queue_master_locator")


def test_every_amqp_setting_of_a_connection_is_declared_once() -> None:
    # the release is the node's `rabbitmq_version`, not a setting of the amqp table
    assert set(AMQP_KEYS) == {f.name for f in fields(Config)} - {"release"}


# ------------------------------------------------------------------ the ra table


@pytest.mark.parametrize("key, value, expected", [
    ("wal_pre_allocate", "yes", "true or false"),
    ("wal_max_size_bytes", True, "an integer of at least 1"),
    ("wal_max_size_bytes", 0, "an integer of at least 1"),
    ("segment_max_entries", -1, "an integer of at least 1"),
    ("wal_max_entries", 0, "an integer of at least 1"),
    ("snapshot_chunk_size", "1MB", "an integer of at least 1"),
    ("wal_sync_method", "often", "one of datasync, sync, none"),
    ("machine_upgrade_strategy", "some", "one of all, quorum"),
])
def test_each_ra_key_has_a_type_and_range(tmp_path: Path, key: str, value: Any,
                                          expected: str) -> None:
    assert refused(tmp_path, ra={key: value}) == (
        f"config key ra.{key}: expected {expected}, got {value!r}")


def test_an_unknown_ra_key_is_named(tmp_path: Path) -> None:
    text = refused(tmp_path, ra={"wal_preallocate": True})
    assert text.startswith("config key ra.wal_preallocate: not a known key (known: ")
    assert "wal_pre_allocate" in text


def test_the_ra_keys_checked_outside_a_node_config_are_the_same() -> None:
    with pytest.raises(ConfigError, match=r"^config key ra\.wal_sync_method: expected one of"):
        check_ra_keys({"wal_sync_method": "often"})
    assert check_ra_keys({"wal_max_size_bytes": 1 << 20}) == {"wal_max_size_bytes": 1 << 20}
    assert "wal_pre_allocate" in RA_KEYS


def test_a_durable_node_rolls_its_wal_over_every_16384_entries_unless_told_otherwise(
        tmp_path: Path) -> None:
    default = ra_system_config(NodeConfig("n1@127.0.0.1", data_dir=str(tmp_path)))
    assert default["wal_max_entries"] == 16384
    assert default["data_dir"] == str(tmp_path / "ra")
    mine = NodeConfig("n1@127.0.0.1", data_dir=str(tmp_path), ra={"wal_max_entries": 100_000})
    assert ra_system_config(mine)["wal_max_entries"] == 100_000


# ------------------------------------------------------------------ top-level keys


@pytest.mark.parametrize("key, value, expected", [
    ("amqp_port", 70000, "an integer from 0 to 65535 (0: any free port)"),
    ("amqp_port", -1, "an integer from 0 to 65535 (0: any free port)"),
    ("amqp_port", "5672", "an integer from 0 to 65535 (0: any free port)"),
    ("amqp_port", True, "an integer from 0 to 65535 (0: any free port)"),
    ("net_ticktime", -1, "a number above 0 (seconds)"),
    ("net_ticktime", 0, "a number above 0 (seconds)"),
    ("net_ticktime", "60", "a number above 0 (seconds)"),
    ("formation_timeout", False, "a number above 0 (seconds)"),
    ("quorum_cluster_size", 0, "an integer of at least 1"),
    ("state_digest_every", 0, "an integer of at least 1, or null for the default"),
    ("dead_letter_worker_consumer_prefetch", 0, "an integer of at least 1"),
    ("dead_letter_worker_publisher_confirm_timeout", "3m",
     "an integer of at least 1 (milliseconds)"),
    ("backend", "fast", "rabbit, memory or module:factory (quorum: rabbit's former name)"),
    ("amqp_host", "", "a non-empty string"),
    ("data_dir", 7, "a non-empty string, or null for none"),
    ("run_id", None, "a non-empty string"),
    ("peers", ["b@127.0.0.1"], "node names name@host:port (port 1 to 65535), "
     "a list or comma-separated"),
])
def test_each_node_key_has_a_type_and_range(tmp_path: Path, key: str, value: Any,
                                            expected: str) -> None:
    assert refused(tmp_path, **{key: value}) == (
        f"config key {key}: expected {expected}, got {value!r}")


@pytest.mark.parametrize("name", ["no-port-here", "a@127.0.0.1:70000", "a@127.0.0.1:0",
                                  "@127.0.0.1:25672", "a@:25672", "a@127.0.0.1:x"])
def test_a_node_name_needs_a_distribution_port_in_range(tmp_path: Path, name: str) -> None:
    assert refused(tmp_path, name=name) == (
        "config key name: expected a node name name@host:port (port 1 to 65535), "
        f"got {name!r}")


def test_every_node_key_is_declared_once() -> None:
    assert set(NODE_KEYS) == {f.name for f in fields(NodeConfig)}


def test_a_file_spells_keys_with_dashes_or_underscores(tmp_path: Path) -> None:
    assert refused(tmp_path, **{"net-ticktime": -1}) == (
        "config key net_ticktime: expected a number above 0 (seconds), got -1")


def test_an_unknown_node_key_is_named(tmp_path: Path) -> None:
    text = refused(tmp_path, colour="blue")
    assert text.startswith("config key colour: not a known key (known: amqp, amqp_host, ")
    assert text.endswith("), got 'blue'")


def test_a_toml_file_is_held_to_the_same_declaration(tmp_path: Path) -> None:
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'name = "{NAME}"\n[amqp]\nheartbeat = "often"\n')
    with pytest.raises(ConfigError, match=r"^config key amqp\.heartbeat: expected an integer "
                                          r"from 0 to 65535 .*, got 'often'$"):
        load(cfg)


# ------------------------------------------------------------------ flags


def test_flags_are_held_to_the_same_declaration_as_a_file(tmp_path: Path) -> None:
    for flags, text in [
        ({"amqp_port": "70000"}, "config key amqp_port: expected an integer from 0 to 65535 "
                                 "(0: any free port), got '70000'"),
        ({"amqp_port": "big"}, "config key amqp_port: expected an integer from 0 to 65535 "
                               "(0: any free port), got 'big'"),
        ({"net_ticktime": "-1"}, "config key net_ticktime: expected a number above 0 "
                                 "(seconds), got '-1'"),
        ({"peers": "b@127.0.0.1"}, "config key peers: expected node names name@host:port "
                                   "(port 1 to 65535), a list or comma-separated, "
                                   "got 'b@127.0.0.1'"),
    ]:
        with pytest.raises(ConfigError) as info:
            load(None, {"name": NAME, **flags})
        assert str(info.value) == text


def test_flags_win_over_the_file_and_are_read_as_their_keys_types(tmp_path: Path) -> None:
    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": NAME, "amqp_port": 5000, "net_ticktime": 60}))
    got = load(cfg, {"amqp_port": "5001", "net_ticktime": "2.5", "backend": None})
    assert (got.amqp_port, got.net_ticktime, got.backend) == (5001, 2.5, "rabbit")


def test_without_a_file_the_name_is_required() -> None:
    with pytest.raises(ConfigError, match=r"^config key name: expected a node name "
                                          r"name@host:port .*, got nothing$"):
        load(None, {"amqp_port": "5672"})


@pytest.mark.parametrize("given, backend", [
    ("rabbit", "rabbit"), ("quorum", "rabbit"), ("memory", "memory"),
    ("broker.backends:quorum", "broker.backends:quorum")])
def test_quorum_is_the_former_name_of_the_rabbit_backend(tmp_path: Path, given: str,
                                                         backend: str) -> None:
    assert load(None, {"name": NAME, "backend": given}).backend == backend
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'name = "{NAME}"\nbackend = "{given}"\n')
    assert load(cfg).backend == backend


def test_the_rabbit_backend_is_the_default() -> None:
    assert NodeConfig(NAME).backend == "rabbit"


def test_flags_alone_make_the_defaults_config() -> None:
    got = load(None, {"name": NAME, "peers": "b@127.0.0.1:25673,", "amqp_port": "0"})
    assert got.amqp_port == 0 and got.net_ticktime == 60.0 and got.backend == "rabbit"
    assert got.peers == ["b@127.0.0.1:25673", NAME]
