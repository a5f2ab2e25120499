"""A node behaves as one RabbitMQ release: `rabbitmq_version` names the series, and
one table says what that series selects.

The table's values are the releases' own (their `rabbit_fifo:version()`, their
quorum queues' default delivery limit, their deprecated features' phases, what
their `connection.start` says). A series whose quorum-queue machine warren does not
build is refused when the configuration is loaded, naming the series it can model.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from broker.config import ConfigError, NodeConfig, load
from broker.queue_config import machine_config
from channel.connection.config import Config
from channel.queue_types.queue_registry import QueueRecord
from fifo.machine import SUPPORTED_VERSIONS
from releases import (
    CAPABILITIES,
    DEFAULT_SERIES,
    RELEASES,
    UnknownRelease,
    UnmodelledRelease,
    lookup,
    modelled_series,
)

NAME = "a@127.0.0.1:25672"


# ------------------------------------------------------------------ the table


@pytest.mark.parametrize("series, machine", [("3.10", 2), ("4.0", 5), ("4.2", 7), ("4.3", 8)])
def test_each_series_names_the_machine_version_its_release_runs(series: str,
                                                                 machine: int) -> None:
    # 4.0.5 and 4.1.x ship rabbit_fifo 5; 7 arrives with 4.2
    assert RELEASES[series].machine_version == machine


def test_the_default_is_the_newest_series_whose_machine_is_built() -> None:
    assert DEFAULT_SERIES == "4.3"
    assert modelled_series(SUPPORTED_VERSIONS) == ["3.10", "4.0", "4.2", "4.3"]
    assert lookup(DEFAULT_SERIES, SUPPORTED_VERSIONS).machine_version == 8


def test_a_default_delivery_limit_arrives_with_4_0() -> None:
    assert RELEASES["3.10"].default_delivery_limit is None
    assert {RELEASES[s].default_delivery_limit for s in ("4.0", "4.2", "4.3")} == {20}


def test_redelivery_counting_changes_in_4_3() -> None:
    for series in ("4.0", "4.2"):
        r = RELEASES[series]
        assert r.delivery_count_header == "acquired_count"
        assert r.requeue_counts_toward_limit
        assert r.consumer_timeout_enforcer == "channel"
    r = RELEASES["4.3"]
    assert r.delivery_count_header == "delivery_count"
    assert not r.requeue_counts_toward_limit
    assert r.consumer_timeout_enforcer == "queue"


def test_deprecated_features_are_permitted_until_4_3_denies_them() -> None:
    for feature in ("global_qos", "transient_nonexcl_queues", "queue_master_locator"):
        assert RELEASES["3.10"].permits(feature)  # no deprecated-feature mechanism yet
        assert RELEASES["4.0"].permits(feature)
        assert RELEASES["4.2"].permits(feature)
        assert not RELEASES["4.3"].permits(feature)


def test_4_3_denies_the_queue_master_locator_by_default_without_removing_it() -> None:
    # rabbit_queue_location's -rabbit_deprecated_feature at v4.3.x: denied_by_default
    assert RELEASES["4.3"].deprecated_features["queue_master_locator"] == "denied_by_default"
    assert set(RELEASES["4.3"].deprecated_features.values()) == {"denied_by_default"}


@pytest.mark.parametrize(("series", "limit"), [("3.10", None), ("4.0", 20), ("4.2", 20)])
def test_a_queue_config_without_argument_or_policy_takes_the_release_delivery_limit(
        series: str, limit: int | None) -> None:
    record = QueueRecord("/", "q", True, {"x-queue-type": "quorum"}, "%2F_q", ())
    assert machine_config(record, 0, RELEASES[series])["delivery_limit"] == limit
    limited = replace(record, policy={"delivery-limit": 4})
    assert machine_config(limited, 0, RELEASES[series])["delivery_limit"] == 4


def test_3_10_has_no_last_death_headers_and_a_larger_message_ceiling() -> None:
    assert not RELEASES["3.10"].last_death_headers
    assert RELEASES["3.10"].default_max_message_size == 134_217_728
    assert RELEASES["4.2"].last_death_headers
    assert RELEASES["4.2"].default_max_message_size == 16_777_216


def test_each_release_says_what_it_is_as_that_release_does() -> None:
    # 3.10.8 as a running Debian 12 node sends it
    assert RELEASES["3.10"].server.properties() == {
        "capabilities": {name: True for name in CAPABILITIES},
        "product": "RabbitMQ", "version": "3.10.8", "platform": "Erlang/OTP 25.2.3",
        "copyright": "Copyright (c) 2007-2022 VMware, Inc. or its affiliates.",
        "information": "Licensed under the MPL 2.0. Website: https://rabbitmq.com"}
    assert RELEASES["4.0"].server.version == "4.0.5"
    assert RELEASES["4.0"].server.platform == "Erlang/OTP 27.3.4.1"
    assert RELEASES["4.2"].server.version == "4.2.9"
    assert RELEASES["4.2"].server.copyright == (
        "Copyright (c) 2007-2026 Broadcom Inc and/or its subsidiaries")


def test_an_unbuilt_or_unknown_series_is_refused_by_lookup() -> None:
    assert lookup("4.3", SUPPORTED_VERSIONS).machine_version == 8
    assert lookup("3.10", SUPPORTED_VERSIONS).machine_version == 2
    with pytest.raises(UnmodelledRelease, match=r"3\.10 needs rabbit_fifo machine version 2"):
        lookup("3.10", (5, 7))
    with pytest.raises(UnknownRelease):
        lookup("5.0", SUPPORTED_VERSIONS)


# ------------------------------------------------------------------ the config key


def load_json(tmp_path: Path, **keys: object) -> NodeConfig:
    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": NAME, **keys}))
    return load(cfg)


def test_rabbitmq_version_round_trips_through_file_and_flag(tmp_path: Path) -> None:
    assert load_json(tmp_path).rabbitmq_version == "4.3"
    assert load_json(tmp_path, rabbitmq_version="4.0").rabbitmq_version == "4.0"
    assert load_json(tmp_path, rabbitmq_version="3.10").rabbitmq_version == "3.10"
    assert load(None, {"name": NAME, "rabbitmq_version": "4.0"}).rabbitmq_version == "4.0"
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'name = "{NAME}"\nrabbitmq-version = "4.0"\n')
    assert load(cfg, {"rabbitmq_version": "4.2"}).rabbitmq_version == "4.2"  # flags win


@pytest.mark.parametrize("value, expected", [
    ("4.2.9", "a RabbitMQ release this warren models (3.10, 4.0, 4.2, 4.3)"),
    (4.2, "a RabbitMQ release this warren models (3.10, 4.0, 4.2, 4.3), as a string"),
])
def test_a_series_warren_cannot_model_is_one_line(tmp_path: Path, value: object,
                                                  expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_json(tmp_path, rabbitmq_version=value)
    assert str(info.value) == f"config key rabbitmq_version: expected {expected}, got {value!r}"


def test_global_qos_follows_the_release_unless_configured() -> None:
    assert Config(release=RELEASES["4.2"]).permit_global_qos is True
    assert Config(release=RELEASES["4.3"]).permit_global_qos is False
    assert Config(release=RELEASES["4.3"], permit_global_qos=True).permit_global_qos is True
