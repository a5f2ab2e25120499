"""Nodes started from config files, on the node-local test backend; one is killed."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pika
import pytest

from tests.broker.broker_support import (
    ctl,
    ctl_json,
    eventually,
    launch,
    plan,
    stop_all,
    wait_ready,
)


def test_config_files_form_a_cluster_and_a_killed_node_shows_down(tmp_path: Path) -> None:
    nodes = plan(3, tmp_path)
    try:
        for b in nodes:
            cfg = tmp_path / f"{b.name.split('@')[0]}.json"
            cfg.write_text(json.dumps({
                "name": b.name, "amqp-port": b.amqp_port, "data-dir": str(b.data_dir),
                "peers": [n.name for n in nodes], "net-ticktime": 2, "backend": "memory"}))
            launch(b, ["--config", str(cfg)])
        for b in nodes:
            wait_ready(b)
        n1, n2, n3 = nodes
        # exchanges and bindings are the cluster's even with node-local queues
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", n1.amqp_port)) as c:
            c.channel().exchange_declare("logs", "fanout")
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", n2.amqp_port)) as c:
            ch = c.channel()
            ch.queue_declare("audit", durable=True)
            ch.queue_bind("audit", "logs")
            ch.basic_publish("logs", "", b"line")
            assert eventually(lambda: ch.basic_get("audit", auto_ack=True)[2]) == b"line"
        assert "logs" in [x["name"] for x in ctl_json(n3.name, "list_exchanges")]

        assert n3.proc is not None
        n3.proc.send_signal(signal.SIGKILL)
        n3.proc.wait(10)
        status = ctl_json(n1.name, "cluster_status")
        assert status["down_nodes"] == [n3.name]
        assert status["running_nodes"] == sorted([n1.name, n2.name])
        assert status["disk_nodes"] == sorted(b.name for b in nodes)
        # two of three metadata members still make a quorum: writes go on
        out = ctl(n2.name, "set_policy", "after-kill", ".*", '{"message-ttl": 1000}')
        assert out.returncode == 0, out.stderr
    finally:
        stop_all(nodes)


def test_bad_config_is_refused_before_starting(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('name = "no-port-here"\n')
    b = plan(1, tmp_path)[0]
    launch(b, ["--config", str(cfg)])
    assert b.proc is not None
    try:
        assert b.proc.wait(30) == 78
        log = Path(b.proc.log_path).read_text()  # type: ignore[attr-defined]
        assert ("config key name: expected a node name name@host:port (port 1 to 65535), "
                "got 'no-port-here'") in log
    finally:
        stop_all([b])


def test_unreadable_gc_thresholds_are_refused_before_starting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARREN_GC_THRESHOLDS", "often")
    b = plan(1, tmp_path)[0]
    launch(b, ["--name", b.name, "--amqp-port", str(b.amqp_port)])
    assert b.proc is not None
    try:
        assert b.proc.wait(30) == 78
        log = Path(b.proc.log_path).read_text()  # type: ignore[attr-defined]
        assert ("warren: WARREN_GC_THRESHOLDS='often': expected three non-negative integers, "
                "such as 5000,10,100") in log
    finally:
        stop_all([b])


def test_unknown_config_keys_are_named(tmp_path: Path) -> None:
    from broker.config import ConfigError, load

    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": "a@127.0.0.1:1", "amqp-port": 1, "colour": "blue"}))
    with pytest.raises(ConfigError, match="config key colour: not a known key"):
        load(cfg)


def test_ra_system_keys_come_from_the_ra_table(tmp_path: Path) -> None:
    from broker.config import load

    cfg = tmp_path / "node.toml"
    cfg.write_text('name = "a@127.0.0.1:1"\n[ra]\nwal_pre_allocate = true\n'
                   'wal_max_size_bytes = 1048576\nwal_sync_method = "sync"\n')
    assert load(cfg).ra == {"wal_pre_allocate": True, "wal_max_size_bytes": 1048576,
                            "wal_sync_method": "sync"}


@pytest.mark.parametrize("ra, message", [
    ({"wal_preallocate": True}, "config key ra.wal_preallocate: not a known key"),
    ({"wal_pre_allocate": "yes"},
     "config key ra.wal_pre_allocate: expected true or false, got 'yes'"),
    ({"wal_max_size_bytes": True},
     "config key ra.wal_max_size_bytes: expected an integer of at least 1, got True"),
    ({"wal_sync_method": "often"},
     "config key ra.wal_sync_method: expected one of datasync, sync, none, got 'often'"),
    ([1], "config key ra: expected a table of Ra system settings, got \\[1\\]"),
])
def test_a_bad_ra_key_is_named(tmp_path: Path, ra: object, message: str) -> None:
    from broker.config import ConfigError, load

    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": "a@127.0.0.1:1", "ra": ra}))
    with pytest.raises(ConfigError, match=message):
        load(cfg)


@pytest.mark.parametrize("k", [0, -3, "100", True, 2.5])
def test_a_bad_state_digest_period_is_named(tmp_path: Path, k: object) -> None:
    from broker.config import ConfigError, load

    cfg = tmp_path / "node.json"
    cfg.write_text(json.dumps({"name": "a@127.0.0.1:1", "state_digest_every": k}))
    with pytest.raises(ConfigError, match="config key state_digest_every: expected an "
                                          "integer of at least 1, or null for the default, "
                                          "got"):
        load(cfg)


def test_the_state_digest_period_is_a_config_key(tmp_path: Path) -> None:
    from broker.config import load

    cfg = tmp_path / "node.toml"
    cfg.write_text('name = "a@127.0.0.1:1"\nstate-digest-every = 100\n')
    assert load(cfg).state_digest_every == 100
    cfg.write_text('name = "a@127.0.0.1:1"\n')
    assert load(cfg).state_digest_every is None


def test_a_node_with_wal_pre_allocate_reserves_its_wal_file(tmp_path: Path) -> None:
    (b,) = plan(1, tmp_path)
    cfg = tmp_path / "n1.toml"
    cfg.write_text(f'name = "{b.name}"\namqp-port = {b.amqp_port}\n'
                   f'data-dir = "{b.data_dir}"\n[ra]\nwal_pre_allocate = true\n'
                   'wal_max_size_bytes = 4194304\n')
    try:
        launch(b, ["--config", str(cfg)])
        wait_ready(b)
        (wal,) = (b.data_dir / "ra" / "wal").glob("*.wal")
        # the metadata store's few entries, in a file as long as its (random) limit
        assert (1 << 21) < wal.stat().st_size <= 1 << 22
    finally:
        stop_all([b])
