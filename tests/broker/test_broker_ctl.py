"""`warren ctl` against a real three-node cluster: users and permissions, queue
membership (grow, shrink, rebalance), connections and channels, and the memory
watermark's effect on publishers."""

from __future__ import annotations

from typing import Any

import pika.exceptions as pex
import pytest

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    ctl_json,
    eventually,
)

QQ = {"x-queue-type": "quorum"}


def ok(node: str, *args: str) -> str:
    out = ctl(node, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def members(node: str, queue: str) -> list[str]:
    (row,) = [r for r in ctl_json(node, "list_queues") if r["name"] == queue]
    return sorted(row["members"])


def test_users_and_permissions_made_on_one_node_hold_on_another(
        cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = (b.name for b in cluster)
    ok(n1, "add_user", "alice", "secret")
    ok(n2, "set_user_tags", "alice", "monitoring")
    ok(n3, "set_permissions", "alice", "^alice-", ".*", ".*")
    assert {"user": "alice", "tags": ["monitoring"]} in ctl_json(n2, "list_users")
    assert {"user": "alice", "configure": "^alice-", "write": ".*", "read": ".*"} in \
        ctl_json(n1, "list_permissions")
    conn = connect(cluster[1], "alice", "secret")
    try:
        ch = conn.channel()
        ch.queue_declare("alice-q", durable=True, arguments=QQ)
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            conn.channel().queue_declare("bob-q", durable=True, arguments=QQ)
        assert (info.value.reply_code, info.value.reply_text) == (
            403, "ACCESS_REFUSED - configure access to queue 'bob-q' in vhost '/' refused "
                 "for user 'alice'")
    finally:
        conn.close()
    ok(n1, "clear_permissions", "alice")
    with pytest.raises(pex.ProbableAccessDeniedError):
        connect(cluster[2], "alice", "secret")
    ok(n2, "delete_user", "alice")
    assert "alice" not in [u["user"] for u in ctl_json(n3, "list_users")]


def test_user_command_errors(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    again = ctl(n1, "add_user", "guest", "x")
    assert again.returncode == 65 and 'User "guest" already exists' in again.stderr
    nobody = ctl(n1, "set_permissions", "nobody", ".*", ".*", ".*")
    assert nobody.returncode == 65 and 'User "nobody" does not exist' in nobody.stderr
    vhost = ctl(n1, "--vhost", "nope", "set_permissions", "guest", ".*", ".*", ".*")
    assert (vhost.returncode, vhost.stderr) == (69, "Error:\nVirtual host nope does not exist\n")
    regexp = ctl(n1, "set_permissions", "guest", "(", ".*", ".*")
    assert regexp.returncode == 65 and "invalid regular expression" in regexp.stderr


NO_VHOST = "Virtual host 'nosuch' does not exist"
NO_VHOST_CASES = [
    # listings of queues and exchanges are empty; the other listings refuse
    (("list_queues",), 0, None),
    (("list_exchanges",), 0, None),
    (("list_policies",), 65, NO_VHOST),
    (("list_permissions",), 65, NO_VHOST),
    (("list_topic_permissions",), 65, NO_VHOST),
    (("list_vhost_limits",), 65, NO_VHOST),
    (("set_vhost_limits", '{"max-queues": 1}'), 65, NO_VHOST),
    (("set_policy", "p1", "^a", '{"max-length": 1}'), 65, NO_VHOST),
    # what is cleared is a parameter, which does not exist either
    (("clear_policy", "p1"), 69, "Parameter does not exist"),
    (("clear_vhost_limits",), 69, "Parameter does not exist"),
    (("set_permissions", "guest", ".*", ".*", ".*"), 69, "Virtual host nosuch does not exist"),
    (("set_topic_permissions", "guest", "amq.topic", ".*", ".*"), 69,
     "Virtual host nosuch does not exist"),
    # clearing what is not there is not an error
    (("clear_permissions", "guest"), 0, None),
    (("clear_topic_permissions", "guest"), 0, None),
]


@pytest.mark.parametrize(("args", "code", "message"), NO_VHOST_CASES,
                         ids=[args[0] for args, _code, _message in NO_VHOST_CASES])
def test_a_vhost_that_does_not_exist_is_answered_as_rabbitmqctl_does(
        cluster: list[BrokerProc], args: tuple[str, ...], code: int, message: str | None,
) -> None:
    out = ctl(cluster[0].name, "--vhost", "nosuch", *args)
    assert out.returncode == code, out.stderr
    assert out.stderr == ("" if message is None else f"Error:\n{message}\n")
    if args[0].startswith("list_"):
        assert out.stdout == ""


def test_grow_adds_a_member_on_a_node_and_shrink_removes_it(cluster: list[BrokerProc]) -> None:
    n1, n2, _n3 = (b.name for b in cluster)
    conn = connect(cluster[0])
    try:
        conn.channel().queue_declare("small", durable=True, arguments={
            **QQ, "x-quorum-initial-group-size": 1})
    finally:
        conn.close()
    assert members(n1, "small") == [n1]
    grown = ctl_json(n2, "grow", n2)
    assert {"vhost": "/", "name": "small", "size": 2, "result": "ok"} in grown
    assert members(n1, "small") == sorted([n1, n2])
    shrunk = ctl_json(n1, "shrink", n2)
    assert {"vhost": "/", "name": "small", "size": 1, "result": "ok"} in shrunk
    assert members(n2, "small") == [n1]


def test_shrink_keeps_the_last_member(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    conn = connect(cluster[0])
    try:
        conn.channel().queue_declare("single", durable=True, arguments={
            **QQ, "x-quorum-initial-group-size": 1})
    finally:
        conn.close()
    rows = [r for r in ctl_json(n1, "shrink", n1) if r["name"] == "single"]
    assert rows == [{"vhost": "/", "name": "single", "size": 1,
                     "result": "cannot remove the last member of queue 'single'"}]


def test_rebalance_spreads_leaders_over_the_members(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    conn = connect(cluster[0])
    try:
        ch = conn.channel()
        for i in range(6):
            ch.queue_declare(f"rb-{i}", durable=True, arguments={
                **QQ, "x-queue-leader-locator": "client-local"})
    finally:
        conn.close()

    def rb_leaders() -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in ctl_json(n1, "list_queues"):
            if r["name"].startswith("rb-"):
                counts[r["leader"]] = counts.get(r["leader"], 0) + 1
        return counts
    assert rb_leaders() == {n1: 6}
    ctl_json(n1, "rebalance")
    # every node now leads about as many queues as the others (all queues counted)
    leaders = {row["node"]: row["leaders"] for row in ctl_json(n1, "rebalance")}
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert eventually(lambda: len(rb_leaders()) > 1)


def test_list_connections_and_channels(cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    conn = connect(cluster[0])
    try:
        conn.channel()
        conn.channel()
        (row,) = ctl_json(n1, "list_connections")
        assert (row["user"], row["vhost"], row["state"], row["channels"]) == (
            "guest", "/", "running", 2)
        channels = ctl_json(n1, "list_channels")
        assert sorted(c["number"] for c in channels) == [1, 2]
        assert {c["state"] for c in channels} == {"running"}
        assert {c["connection"] for c in channels} == {row["pid"]}
    finally:
        conn.close()
    assert eventually(lambda: ctl_json(n1, "list_connections") == []) is True


def test_memory_watermark_zero_blocks_publishers_not_consumers(
        cluster: list[BrokerProc]) -> None:
    n1 = cluster[0].name
    events: list[Any] = []
    publisher = connect(cluster[0])
    consumer = connect(cluster[0])
    try:
        publisher.add_on_connection_blocked_callback(
            lambda _c, m: events.append(m.method.reason))
        publisher.add_on_connection_unblocked_callback(lambda _c, _m: events.append("unblocked"))
        pch = publisher.channel()
        pch.queue_declare("alarmed", durable=True, arguments=QQ)
        cch = consumer.channel()
        ok(n1, "set_vm_memory_high_watermark", "0")
        assert eventually(lambda: ctl_json(n1, "cluster_status")["alarms"])
        pch.basic_publish("", "alarmed", b"during")
        assert eventually(lambda: publisher.process_data_events(0.2) or events) == [
            "low on memory"]
        states = {r["pid"]: r["state"] for r in ctl_json(n1, "list_connections")}
        assert sorted(states.values()) == ["blocked", "blocking"]
        # a connection that does not publish still works
        assert cch.queue_declare("alarmed", passive=True).method.consumer_count == 0
        ok(n1, "set_vm_memory_high_watermark", "0.6")
        assert eventually(lambda: publisher.process_data_events(0.2) or len(events) == 2)
        assert events == ["low on memory", "unblocked"]
        body = eventually(lambda: cch.basic_get("alarmed", auto_ack=True)[2])
        assert body == b"during"
    finally:
        ctl(n1, "set_vm_memory_high_watermark", "0.6")
        for c in (publisher, consumer):
            if c.is_open:
                c.close()
