"""A client connected to a node that holds no replica of the quorum queue it uses
(docs/channel.md, "Quorum queues").

The queue is declared with `x-quorum-initial-group-size` 1 or 2 from one node
(client-local placement: it leads there), `warren ctl quorum_status` names its
members, and the client connects to a node outside that list: its enqueues go to
a remote leader and its deliveries come from a remote replica.
"""

from __future__ import annotations

import pytest

from tests.broker.amqp_support import Amqp


@pytest.mark.parametrize("size", [1, 2])
def test_a_client_on_a_node_without_a_replica_publishes_with_confirms_and_consumes(
        amqp: Amqp, queue: str, size: int) -> None:
    amqp.declare(queue, node=1, **{"x-quorum-initial-group-size": size})
    members = sorted(row["node"] for row in amqp.quorum_status(queue))
    assert len(members) == size
    assert amqp.leader(queue) == amqp.name(1)
    [outside, *_] = [i for i in range(3) if amqp.name(i) not in members]

    pub = amqp.blocking(outside).channel()
    pub.confirm_delivery()
    for i in range(20):
        pub.basic_publish("", queue, b"r%d" % i)  # returns once confirmed
    client = amqp.select(outside)
    ch = client.channel()
    ch.qos(5)
    ch.consume(queue)
    # the first deliveries may arrive together with consume-ok: settle whatever came,
    # and wait only when nothing new is there
    acked = 0
    while acked < 20:
        if len(ch.deliveries) == acked:
            ch.wait_deliveries(acked + 1)
        acked = len(ch.deliveries)
        ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)
    assert ch.bodies() == [b"r%d" % i for i in range(20)]
    assert max(ch.unsettled_seen) <= 5
    assert amqp.ready(queue, node=outside) == 0
    # the client's node still holds no replica
    assert sorted(row["node"] for row in amqp.quorum_status(queue)) == members
