"""Publishing to a quorum queue on three real nodes: publisher confirms and overflow.

Publishers connect to a node other than the queue's leader, so every enqueue and
every `applied` crosses the cluster.
"""

from __future__ import annotations

import pika
import pika.exceptions as pex
import pytest

from tests.broker.amqp_support import Amqp, AsyncChannel, Confirm, get_eventually, headers


def covered(confirms: list[Confirm]) -> list[int]:
    """Every sequence number the frames settle, in frame order, `multiple` expanded.

    A `multiple` frame settles everything up to its tag not settled before."""
    seen: list[int] = []
    for c in confirms:
        if c.multiple:
            low = max(seen, default=0)
            seen.extend(range(low + 1, c.tag + 1))
        else:
            seen.append(c.tag)
    return seen


def test_each_blocking_publish_returns_once_the_queue_confirmed_it(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    ch = amqp.blocking(1).channel()
    ch.confirm_delivery()
    for i in range(30):
        ch.basic_publish("", queue, b"m%d" % i)  # raises NackError on a nack
    assert amqp.ready(queue, node=2) == 30
    got = [ch.basic_get(queue, auto_ack=True)[2] for _ in range(30)]
    assert got == [b"m%d" % i for i in range(30)]


def test_a_burst_is_confirmed_exactly_once_per_publish_with_multiple_acks(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    client = amqp.select(2)
    ch = client.channel()
    ch.confirm_select()
    for i in range(300):
        ch.publish(queue, b"b%d" % i)
    client.run_until(lambda: len(ch.confirmed()) == 300, "confirms for all 300 publishes")
    assert {c.kind for c in ch.confirms} == {"ack"}
    assert sorted(covered(ch.confirms)) == list(range(1, 301))  # each one exactly once
    # applied replies arrive in batches, so acks are coalesced
    assert any(c.multiple for c in ch.confirms)
    # never a tag at or below one an earlier multiple ack already covered
    for earlier, later in zip(ch.confirms, ch.confirms[1:], strict=False):
        if earlier.multiple:
            assert later.tag > earlier.tag
    assert amqp.ready(queue, node=1) == 300


def publish_one(ch: AsyncChannel, queue: str, body: bytes) -> str:
    """Publish and wait for this publish's confirm: "ack" or "nack"."""
    seqno = len(ch.confirmed()) + 1
    ch.publish(queue, body)
    ch.client.run_until(lambda: seqno in ch.confirmed(), f"the confirm of {body!r}")
    return ch.confirmed()[seqno]


def test_reject_publish_nacks_past_the_limit_and_acks_again_once_drained(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0, **{"x-max-length": 1, "x-overflow": "reject-publish"})
    client = amqp.select(1)
    pub = client.channel()
    pub.confirm_select()
    # the limit is evaluated after an enqueue is applied: the second still gets in
    assert [publish_one(pub, queue, b"p%d" % i) for i in range(4)] == [
        "ack", "ack", "nack", "nack"]
    ch = amqp.blocking(2).channel()
    assert [ch.basic_get(queue, auto_ack=True)[2] for _ in range(3)] == [b"p0", b"p1", None]
    # the publisher's own passive declare is answered by the leader after it told this
    # channel's enqueuer that the queue accepts again
    assert pub.declare(queue, {"x-max-length": 1, "x-overflow": "reject-publish"}
                       ).method.message_count == 0
    assert publish_one(pub, queue, b"again") == "ack"
    assert ch.basic_get(queue, auto_ack=True)[2] == b"again"


def test_a_blocking_publisher_sees_a_nack_as_nack_error(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1, **{"x-max-length": 0, "x-overflow": "reject-publish"})
    ch = amqp.blocking(0).channel()
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"fits")  # over the limit only once applied
    try:
        ch.basic_publish("", queue, b"refused")
        outcome = "ack"
    except pex.NackError:
        outcome = "nack"
    assert outcome == "nack"
    assert amqp.ready(queue) == 1


@pytest.mark.parametrize("overflow", ["drop-head", "reject-publish-dlx"])
def test_drop_head_keeps_the_newest_and_dead_letters_the_dropped_as_maxlen(
        amqp: Amqp, queue: str, overflow: str) -> None:
    # a quorum queue treats reject-publish-dlx as drop-head
    dlq = f"{queue}-dlq"
    amqp.declare(dlq, node=2)
    amqp.declare(queue, node=0, **{"x-max-length": 2, "x-overflow": overflow,
                                   "x-dead-letter-exchange": "",
                                   "x-dead-letter-routing-key": dlq})
    ch = amqp.blocking(1).channel()
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", queue, b"d%d" % i)  # every publish is acked
    assert [ch.basic_get(queue, auto_ack=True)[2] for _ in range(3)] == [b"d3", b"d4", None]
    dead = []
    for _ in range(3):
        _method, props, body = get_eventually(ch, dlq, f"dead letter #{len(dead) + 1}")
        [death] = headers(props)["x-death"]
        dead.append((body, death["reason"], death["queue"], death["count"]))
    assert dead == [(b"d%d" % i, "maxlen", queue, 1) for i in range(3)]


def test_unroutable_confirmed_publishes_are_acked_and_mandatory_ones_returned_first(
        amqp: Amqp, queue: str) -> None:
    client = amqp.select(0)
    ch = client.channel()
    ch.confirm_select()
    returned: list[tuple[int, str, bytes, list[int]]] = []
    ch.ch.add_on_return_callback(lambda _c, m, _p, body: returned.append(
        (m.reply_code, m.reply_text, body, sorted(ch.confirmed()))))
    ch.publish(queue, b"nowhere")  # the default exchange, but no such queue
    ch.ch.basic_publish("", queue, b"bounced", pika.BasicProperties(), mandatory=True)
    client.run_until(lambda: len(ch.confirmed()) == 2, "both confirms")
    assert ch.confirmed() == {1: "ack", 2: "ack"}
    # the return comes before the confirm of its own publish
    assert returned == [(312, "NO_ROUTE", b"bounced", [1])]


def test_bursts_into_a_full_queue_get_one_ack_or_nack_per_publish_matching_what_stayed(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1, **{"x-max-length": 10, "x-overflow": "reject-publish"})
    client = amqp.select(0)
    ch = client.channel()
    ch.confirm_select()
    # the limit is soft: enqueues already on their way when the queue goes over it
    # are accepted, so how much of the first burst gets in is not fixed
    for i in range(15):
        ch.publish(queue, b"%d" % i)
    client.run_until(lambda: len(ch.confirmed()) == 15, "a confirm for the first burst")
    first = ch.confirmed()
    assert list(first.values()).count("ack") > 10
    # ... but once it is over, this channel's enqueuer knows: all of the second are nacked
    for i in range(15, 30):
        ch.publish(queue, b"%d" % i)
    client.run_until(lambda: len(ch.confirmed()) == 30, "a confirm for the second burst")
    assert [ch.confirmed()[seq] for seq in range(16, 31)] == ["nack"] * 15
    assert sorted(covered(ch.confirms)) == list(range(1, 31))  # each one exactly once
    for earlier, later in zip(ch.confirms, ch.confirms[1:], strict=False):
        if earlier.multiple:
            assert later.tag > earlier.tag
    # exactly the acked publishes are in the queue, in publish order
    acked = [seq for seq, kind in sorted(first.items()) if kind == "ack"]
    stayed = amqp.blocking(2).channel()
    bodies = [stayed.basic_get(queue, auto_ack=True)[2] for _ in range(len(acked) + 1)]
    assert bodies == [*(b"%d" % (seq - 1) for seq in acked), None]
