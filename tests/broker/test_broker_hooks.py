"""Fault-injection hooks of `warren ctl`, as the scenario harness's nemesis uses them.

One three-node cluster of real `warren node start` processes serves every
test of the module (each test undoes its fault); the module fixture kills
every node in its `finally`. Waits are bounded polls (`eventually`): no test
asserts how long anything took.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.broker_support import (
    BrokerProc,
    ctl,
    ctl_json,
    eventually,
    running_cluster,
)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("hooks"), 3, backend="memory") as procs:
        yield procs


def _ok(node: str, *args: str) -> None:
    out = ctl(node, *args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _down(observer: str) -> list[str]:
    return list(ctl_json(observer, "cluster_status")["down_nodes"])


def test_partition_on_every_node_cuts_a_node_off_until_healed(
        nodes: list[BrokerProc]) -> None:
    n1, n2, n3 = (b.name for b in nodes)
    try:
        for b in nodes:
            _ok(b.name, "partition", n1, f"{n2},{n3}")
        assert eventually(lambda: _down(n2) == [n1])
        # the operator's client node is in no group: it still reaches the cut-off node
        assert eventually(lambda: sorted(_down(n1)) == sorted([n2, n3]))
    finally:
        for b in nodes:
            _ok(b.name, "heal")
    assert eventually(lambda: _down(n2) == [] and _down(n1) == [])


def test_partition_refuses_a_node_outside_the_cluster(nodes: list[BrokerProc]) -> None:
    out = ctl(nodes[0].name, "partition", "n1", "nobody")
    assert out.returncode == 65
    assert "not a node of the cluster" in out.stderr


def test_partition_groups_may_name_nodes_without_their_address(
        nodes: list[BrokerProc]) -> None:
    n1, n2, n3 = (b.name for b in nodes)
    try:
        for b in nodes:
            _ok(b.name, "partition", "n1,n2", "n3")
        assert eventually(lambda: _down(n1) == [n3])
    finally:
        for b in nodes:
            _ok(b.name, "heal")
    assert eventually(lambda: _down(n1) == [] and _down(n3) == [])


def test_disk_delay_is_applied_to_each_wal_sync_until_cleared(nodes: list[BrokerProc]) -> None:
    n1 = nodes[0].name
    assert ctl_json(n1, "wal_status")["sync_delay_ms"] == 0
    try:
        _ok(n1, "set_disk_delay", "20")
        status = ctl_json(n1, "wal_status")
        assert status["sync_delay_ms"] == 20
        # a metadata write reaches every node's WAL
        _ok(n1, "set_policy", "slow-disk", "^slow", '{"message-ttl": 1000}')
        assert eventually(
            lambda: ctl_json(n1, "wal_status")["delayed_syncs"] > status["delayed_syncs"])
    finally:
        _ok(n1, "set_disk_delay", "0")
    cleared = ctl_json(n1, "wal_status")
    assert cleared["sync_delay_ms"] == 0
    _ok(n1, "clear_policy", "slow-disk")
    after = ctl_json(n1, "wal_status")
    assert after["syncs"] > cleared["syncs"]
    assert after["delayed_syncs"] == cleared["delayed_syncs"]


def test_disk_delay_must_not_be_negative(nodes: list[BrokerProc]) -> None:
    out = ctl(nodes[0].name, "set_disk_delay", "-1")
    assert out.returncode == 64  # a usage error, refused before reaching the node
    assert "must be >= 0" in out.stderr


def test_a_paused_node_looks_down_to_its_peers_and_still_obeys_ctl(
        nodes: list[BrokerProc]) -> None:
    n1, n3 = nodes[0].name, nodes[2].name
    try:
        for b in nodes:
            _ok(b.name, "pause_node", n3)
        assert eventually(lambda: _down(n1) == [n3])
        # the paused node is alive for the operator: its view of the peers is frozen
        assert ctl_json(n3, "wal_status")["node"] == n3
    finally:
        for b in nodes:
            _ok(b.name, "resume_node", n3)
    assert eventually(lambda: _down(n1) == [] and _down(n3) == [])
