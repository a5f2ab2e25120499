"""A three-node cluster of real `warren node start` processes, driven by pika and `warren ctl`."""

from __future__ import annotations

from pathlib import Path

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    ctl_json,
)


def test_exactly_one_node_forms_the_metadata_cluster(cluster: list[BrokerProc]) -> None:
    ways = sorted(b.ready_line.split()[-1] for b in cluster)
    assert ways == ["formed", "member", "member"]
    ready = Path(cluster[1].data_dir, "ready").read_text()
    assert f'"amqp_port": {cluster[1].amqp_port}' in ready


def test_every_node_reports_all_three_running(cluster: list[BrokerProc]) -> None:
    names = sorted(b.name for b in cluster)
    for b in cluster:
        status = ctl_json(b.name, "cluster_status")
        assert status["node"] == b.name
        assert status["running_nodes"] == names and status["down_nodes"] == []
        assert status["metadata_members"] == names
        assert status["metadata_leader"] in names


def test_policy_set_on_one_node_is_visible_on_all(cluster: list[BrokerProc]) -> None:
    out = ctl(cluster[0].name, "set_policy", "limits", "^pol-", '{"max-length": 5}',
              "--priority", "3", "--apply-to", "queues")
    assert out.returncode == 0, out.stderr
    for b in cluster:
        (p,) = [p for p in ctl_json(b.name, "list_policies") if p["name"] == "limits"]
        assert p == {"vhost": "/", "name": "limits", "pattern": "^pol-", "apply-to": "queues",
                     "definition": {"max-length": 5}, "priority": 3}
    assert ctl(cluster[2].name, "clear_policy", "limits").returncode == 0
    assert all(p["name"] != "limits" for p in ctl_json(cluster[1].name, "list_policies"))


def test_exchange_from_node1_routes_on_node2_into_a_quorum_queue_read_on_node3(
        cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = cluster
    c1, c2, c3 = connect(n1), connect(n2), connect(n3)
    try:
        c1.channel().exchange_declare("orders", "topic", durable=True)
        ch2 = c2.channel()
        ok = ch2.queue_declare("eu-orders", durable=True,
                               arguments={"x-queue-type": "quorum"})
        assert ok.method.queue == "eu-orders"
        ch2.queue_bind("eu-orders", "orders", "eu.#")
        ch2.confirm_delivery()
        ch2.basic_publish("orders", "eu.fr", b"order-1")
        ch2.basic_publish("orders", "us.ny", b"order-2")  # no binding matches
        got = c3.channel().basic_get("eu-orders", auto_ack=True)
        assert got[2] == b"order-1" and got[0].routing_key == "eu.fr"
        assert got[0].message_count == 0
    finally:
        for c in (c1, c2, c3):
            c.close()
    (row,) = [q for q in ctl_json(n3.name, "list_queues") if q["name"] == "eu-orders"]
    assert row["type"] == "quorum" and row["messages"] == 0
    assert sorted(row["members"]) == sorted(b.name for b in cluster)
    assert row["leader"] == n2.name  # client-local: the declaring node leads


def test_quorum_status_and_membership_changes(cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = cluster
    c = connect(n1)
    try:
        c.channel().queue_declare("small", durable=True, arguments={
            "x-queue-type": "quorum", "x-quorum-initial-group-size": 1})
    finally:
        c.close()
    status = ctl_json(n2.name, "quorum_status", "small")
    assert [(r["node"], r["raft_state"]) for r in status] == [(n1.name, "leader")]
    assert ctl(n2.name, "add_member", "small", n3.name).returncode == 0
    status = ctl_json(n1.name, "quorum_status", "small")
    assert sorted(r["node"] for r in status) == sorted([n1.name, n3.name])
    assert ctl(n3.name, "delete_member", "small", n3.name).returncode == 0
    assert [r["node"] for r in ctl_json(n1.name, "quorum_status", "small")] == [n1.name]


def test_cli_errors(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    bad = ctl(n1, "set_policy", "p", ".*", '{"max-length": -1}')
    assert bad.returncode == 65 and "-1 is not a valid maximum length" in bad.stderr
    missing = ctl(n1, "quorum_status", "no-such-queue")
    assert missing.returncode == 65
    assert "queue 'no-such-queue' in vhost '/' does not exist" in missing.stderr
    usage = ctl(n1, "set_policy", "p", ".*", "{not json")
    assert usage.returncode == 64
    gone = ctl("nobody@127.0.0.1:9", "cluster_status", timeout=1)
    assert gone.returncode == 69 and "unreachable" in gone.stderr
