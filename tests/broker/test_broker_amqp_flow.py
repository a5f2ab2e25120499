"""Flow control seen by pika on three real nodes: the quorum-queue soft limit withholds
a channel's credit, and a memory alarm blocks publishing connections only
(docs/channel.md, "Credit flow and blocking").

This module's nodes run with a 20 s net tick time: the soft-limit test holds the
queue's leader paused for a few seconds, which must not look like a node going
down (that would elect a new leader and release the pending commands early).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker.amqp_support import Amqp, pump_until
from tests.broker.broker_support import BrokerProc, eventually, running_cluster

#: RabbitMQ's default `vm_memory_high_watermark`, what the nodes start with
DEFAULT_WATERMARK = "0.6"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("amqp-flow"), net_ticktime=20) as nodes:
        yield nodes


def only_channel(amqp: Amqp, node: int) -> dict[str, Any] | None:
    """The one AMQP channel open on `node` (None while there are more or fewer)."""
    rows = amqp.ctl_json(node, "list_channels")
    return rows[0] if len(rows) == 1 else None


def connection_states(amqp: Amqp, node: int) -> list[str]:
    return sorted(row["state"] for row in amqp.ctl_json(node, "list_connections"))


def test_more_than_32_pending_enqueues_withhold_the_channels_credit_until_applied(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    leader = amqp.leader(queue)
    conn = amqp.blocking(0)
    ch = conn.channel()
    ch.basic_publish("", queue, b"first")  # registers the enqueuer; applied at once
    assert eventually(lambda: (only_channel(amqp, 0) or {}).get("pending_raft_commands") == 0)
    try:
        for i in range(3):
            amqp.ctl_ok(i, "pause_node", leader)  # nothing the leader sends arrives
        for i in range(600):
            ch.basic_publish("", queue, b"%d" % i)
        # the 33rd pending enqueue blocked the channel: it keeps dispatching but grants
        # no credit back, so the reader stops after its initial 400 (one went to "first")
        assert eventually(
            lambda: (only_channel(amqp, 0) or {}).get("pending_raft_commands") == 399)
        assert connection_states(amqp, 0) == ["flow"]
    finally:
        for i in range(3):
            amqp.ctl_ok(i, "resume_node", leader)
    assert eventually(lambda: (only_channel(amqp, 0) or {}).get("pending_raft_commands") == 0
                      and amqp.ready(queue, node=2) == 601, timeout=30)
    assert connection_states(amqp, 0) == ["running"]
    got = [ch.basic_get(queue, auto_ack=True)[2] for _ in range(3)]
    assert got == [b"first", b"0", b"1"]


def test_a_memory_alarm_blocks_publishers_while_consumers_keep_consuming(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    filler = amqp.blocking(2).channel()
    filler.confirm_delivery()
    for i in range(5):
        filler.basic_publish("", queue, b"m%d" % i)

    publisher = amqp.select(0)
    pub = publisher.channel()
    pub.confirm_select()
    consumer_conn = amqp.blocking(0)
    consumer_blocked: list[Any] = []
    consumer_conn.add_on_connection_blocked_callback(
        lambda _c, frame: consumer_blocked.append(frame))
    consumer = consumer_conn.channel()
    got: list[bytes] = []

    def take(_ch: Any, method: Any, _props: Any, body: bytes) -> None:
        got.append(body)
        consumer.basic_ack(method.delivery_tag)

    try:
        amqp.ctl_ok(0, "set_vm_memory_high_watermark", "0")
        pub.publish(queue, b"late")
        publisher.run_until(lambda: publisher.blocked, "connection.blocked")
        assert publisher.blocked == ["low on memory"]

        consumer.basic_consume(queue, take)
        pump_until(consumer_conn, lambda: len(got) == 5, "deliveries during the alarm")
        assert got == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        # the publisher's socket is not read: "late" is not routed while it is blocked
        assert amqp.ready(queue, node=2) == 0
        assert pub.confirms == []
        assert connection_states(amqp, 0) == ["blocked", "blocking"]
    finally:
        amqp.ctl_ok(0, "set_vm_memory_high_watermark", DEFAULT_WATERMARK)
    publisher.run_until(lambda: publisher.unblocked == 1 and pub.confirmed() == {1: "ack"},
                        "connection.unblocked and the confirm of the held publish")
    pump_until(consumer_conn, lambda: len(got) == 6, "the held publish")
    assert got[-1] == b"late"
    assert consumer_blocked == []  # a connection that never published is never blocked
    assert connection_states(amqp, 0) == ["running", "running"]
