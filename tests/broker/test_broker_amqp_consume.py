"""Consuming from a quorum queue on three real nodes: prefetch, settlement and
redelivery, single active consumer.

The nodes model RabbitMQ 4.2 (machine version 7): `x-delivery-count` carries the
acquired count, so every return adds one, whether by nack, reject or a closed
channel, and the header is absent on a first delivery.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.broker.amqp_support import Amqp, closed_by_broker, headers, pump_until
from tests.broker.broker_support import BrokerProc, eventually, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    """Three nodes modelling 4.2, whose counting these tests show (4.3 counts only
    failed deliveries in `x-delivery-count`)."""
    with running_cluster(tmp_path_factory.mktemp("cluster"),
                         extra=["--rabbitmq-version", "4.2"]) as nodes:
        yield nodes


def fill(amqp: Amqp, queue: str, bodies: list[bytes], node: int = 0) -> None:
    ch = amqp.blocking(node).channel()
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body, pika.BasicProperties(headers={"h": "v"}))


def deliveries(ch: Any, queue: str) -> Iterator[tuple[Any, Any, bytes]]:
    """A blocking consumer's deliveries; fails the test instead of waiting for ever."""
    for method, props, body in ch.consume(queue, inactivity_timeout=10):
        assert method is not None, "no delivery within 10 s"
        yield method, props, body


def bodies(n: int, stem: str = "m") -> list[bytes]:
    return [f"{stem}{i}".encode() for i in range(n)]


# ----------------------------------------------------------------------- prefetch


def test_a_consumer_never_holds_more_unacked_deliveries_than_its_prefetch(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    fill(amqp, queue, bodies(30))
    client = amqp.select(1)
    ch = client.channel()
    ch.qos(5)
    ch.consume(queue)
    client.run_until(lambda: len(ch.deliveries) == 5, "the first five deliveries")
    assert amqp.ready(queue, node=2) == 25  # the queue holds the rest back
    client.run_for(0.3)
    assert len(ch.deliveries) == 5
    ch.ack(ch.deliveries[0].delivery_tag)  # one settled: room for exactly one more
    client.run_until(lambda: len(ch.deliveries) == 6, "one delivery per freed slot")
    while len(ch.deliveries) < 30:
        ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)
        ch.wait_deliveries(len(ch.deliveries) + 1)
    assert max(ch.unsettled_seen) == 5
    assert ch.bodies() == bodies(30)
    assert [d.redelivered for d in ch.deliveries] == [False] * 30


# ----------------------------------------------------------------- settlement


def test_requeued_deliveries_come_back_flagged_with_a_growing_delivery_count(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    fill(amqp, queue, [b"once"])
    ch = amqp.blocking(0).channel()
    seen = []
    for n, (method, props, body) in enumerate(deliveries(ch, queue)):
        seen.append((body, method.redelivered, headers(props)))
        if n == 0:
            ch.basic_nack(method.delivery_tag, requeue=True)
        elif n == 1:
            ch.basic_reject(method.delivery_tag, requeue=True)
        else:
            ch.basic_ack(method.delivery_tag)
            break
    ch.cancel()
    assert seen == [(b"once", False, {"h": "v"}),
                    (b"once", True, {"h": "v", "x-delivery-count": 1}),
                    (b"once", True, {"h": "v", "x-delivery-count": 2})]
    assert ch.basic_get(queue)[0] is None


def test_requeue_false_drops_a_message_when_no_dead_letter_exchange_is_set(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2)
    fill(amqp, queue, bodies(3))
    ch = amqp.blocking(1).channel()
    first, _p, _b = ch.basic_get(queue)
    second, _p, _b = ch.basic_get(queue)
    ch.basic_reject(first.delivery_tag, requeue=False)
    ch.basic_nack(second.delivery_tag, requeue=False)
    assert ch.basic_get(queue, auto_ack=True)[2] == b"m2"
    assert ch.basic_get(queue)[0] is None


def test_a_multiple_nack_returns_the_deliveries_in_their_original_order(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    fill(amqp, queue, bodies(3))
    client = amqp.select(2)
    ch = client.channel()
    ch.consume(queue)
    client.run_until(lambda: len(ch.deliveries) == 3, "three deliveries")
    ch.nack(ch.deliveries[-1].delivery_tag, multiple=True, requeue=True)
    client.run_until(lambda: len(ch.deliveries) == 6, "three redeliveries")
    ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)
    assert ch.bodies() == bodies(3) * 2
    assert [(d.redelivered, d.headers.get("x-delivery-count")) for d in ch.deliveries] == (
        [(False, None)] * 3 + [(True, 1)] * 3)
    # delivery tags are never reused on a channel
    assert [d.delivery_tag for d in ch.deliveries] == [1, 2, 3, 4, 5, 6]


def test_unacked_deliveries_of_a_closed_channel_go_to_another_consumer_redelivered(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    fill(amqp, queue, bodies(2))
    client = amqp.select(1)
    gone = client.channel()
    gone.consume(queue)
    client.run_until(lambda: len(gone.deliveries) == 2, "two deliveries")
    gone.close()
    ch = amqp.blocking(2).channel()
    got = []
    for method, props, body in deliveries(ch, queue):
        got.append((body, method.redelivered, headers(props).get("x-delivery-count")))
        ch.basic_ack(method.delivery_tag)
        if len(got) == 2:
            break
    ch.cancel()
    assert got == [(b"m0", True, 1), (b"m1", True, 1)]


def test_basic_recover_redelivers_every_unacked_delivery_with_new_tags(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2)
    fill(amqp, queue, bodies(2))
    client = amqp.select(0)
    ch = client.channel()
    ch.consume(queue)
    ch.wait_deliveries(2)
    ch.recover()
    ch.wait_deliveries(4)
    ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)
    assert [(d.body, d.delivery_tag, d.redelivered) for d in ch.deliveries] == [
        (b"m0", 1, False), (b"m1", 2, False), (b"m0", 3, True), (b"m1", 4, True)]


def test_basic_qos_applies_to_consumers_started_after_it(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    fill(amqp, queue, bodies(10))
    client = amqp.select(2)
    ch = client.channel()
    ch.qos(2)
    first = ch.consume(queue)
    ch.wait_deliveries(2)
    ch.qos(5)  # the running consumer keeps its prefetch of 2
    second = ch.consume(queue)
    ch.wait_deliveries(7)
    client.run_for(0.3)
    by_consumer = [d.consumer_tag for d in ch.deliveries]
    assert (by_consumer.count(first), by_consumer.count(second)) == (2, 5)
    assert amqp.ready(queue) == 3


def test_settling_a_tag_twice_closes_the_channel_with_unknown_delivery_tag(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    fill(amqp, queue, bodies(1))
    ch = amqp.blocking(0).channel()
    method, _props, _body = ch.basic_get(queue)
    ch.basic_ack(method.delivery_tag)
    ch.basic_ack(method.delivery_tag)
    # basic.ack has no reply: the next synchronous method sees the close
    assert closed_by_broker(lambda: ch.basic_qos(prefetch_count=1)) == (
        406, f"PRECONDITION_FAILED - unknown delivery tag {method.delivery_tag}")


# -------------------------------------------------------- single active consumer

SAC = {"x-single-active-consumer": True}


def test_a_waiting_consumer_takes_over_in_order_when_the_active_ones_channel_closes(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0, **SAC)
    fill(amqp, queue, bodies(6))
    active_conn = amqp.blocking(1)
    active = active_conn.channel()
    got: list[Any] = []
    active.basic_consume(queue, lambda _c, m, _p, body: got.append((m.delivery_tag, body)))
    pump_until(active_conn, lambda: len(got) == 6, "six deliveries")
    for tag, _body in got[:3]:
        active.basic_ack(tag)
    client = amqp.select(2)
    waiting = client.channel()
    waiting.consume(queue)
    client.run_for(0.3)
    assert waiting.deliveries == []
    # waiting consumers are not counted, and SAC queues refuse basic.get
    assert amqp.ready(queue) == 0
    probe = amqp.blocking(0).channel()
    assert probe.queue_declare(queue, passive=True).method.consumer_count == 1
    assert closed_by_broker(lambda: probe.basic_get(queue)) == (
        405, f"RESOURCE_LOCKED - cannot obtain access to locked queue '{queue}' in vhost '/'."
        " basic.get operations are not supported by quorum queues with single active consumer")

    active.close()  # m3..m5 go back to the queue, and the waiting consumer becomes active
    client.run_until(lambda: len(waiting.deliveries) == 3, "the returned messages")
    fill(amqp, queue, [b"m6"])
    client.run_until(lambda: len(waiting.deliveries) == 4, "a new message")
    assert waiting.bodies() == [b"m3", b"m4", b"m5", b"m6"]
    assert [d.redelivered for d in waiting.deliveries] == [True, True, True, False]


def test_cancelling_the_active_consumer_hands_the_queue_to_the_waiting_one(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2, **SAC)
    client = amqp.select(0)
    first = client.channel()
    tag = first.consume(queue)
    second_conn = amqp.blocking(1)
    second = second_conn.channel()
    fill(amqp, queue, bodies(2))
    client.run_until(lambda: len(first.deliveries) == 2, "deliveries to the active consumer")
    first.ack(first.deliveries[-1].delivery_tag, multiple=True)
    second.basic_qos(prefetch_count=10)
    later: list[bytes] = []
    second.basic_consume(queue, lambda _c, m, _p, body: (later.append(body),
                                                         second.basic_ack(m.delivery_tag)))
    fill(amqp, queue, [b"m2"])
    client.run_until(lambda: len(first.deliveries) == 3, "m2 to the still active consumer")
    first.ack(first.deliveries[-1].delivery_tag)
    first.cancel(tag)
    fill(amqp, queue, [b"m3", b"m4"])
    pump_until(second_conn, lambda: len(later) == 2, "deliveries to the new active consumer")
    assert later == [b"m3", b"m4"]
    assert first.bodies() == bodies(3)


def test_a_consumer_with_an_argument_of_another_queue_type_is_refused(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    ch = amqp.blocking(1).channel()
    with pytest.raises(pex.ChannelClosedByBroker) as info:
        ch.basic_consume(queue, lambda *a: None, arguments={"x-stream-offset": "first"})
    assert (info.value.reply_code, info.value.reply_text) == (
        406, f"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue '{queue}' in "
        "vhost '/' of queue type rabbit_quorum_queue")


def test_no_delivery_follows_cancel_ok_and_undelivered_messages_stay_in_the_queue(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2)
    fill(amqp, queue, bodies(200))
    client = amqp.select(0)
    ch = client.channel()
    tag = ch.consume(queue)  # prefetch 0: up to 2000 in flight
    client.run_until(lambda: ch.deliveries, "a first delivery")
    ch.cancel(tag)
    delivered = len(ch.deliveries)
    client.run_for(0.3)
    assert len(ch.deliveries) == delivered
    ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)  # a cancelled consumer may settle
    ch.sync()
    assert eventually(lambda: amqp.ready(queue, node=1) == 200 - delivered)
    rest = amqp.blocking(1).channel()
    left = [rest.basic_get(queue, auto_ack=True)[2] for _ in range(200 - delivered)]
    assert left == bodies(200)[delivered:]


def test_consumer_count_includes_cancelled_consumers_and_gets_still_holding_messages(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    fill(amqp, queue, bodies(3))
    probe = amqp.blocking(2).channel()

    def consumers() -> int:
        return int(probe.queue_declare(queue, passive=True).method.consumer_count)

    client = amqp.select(1)
    ch = client.channel()
    ch.qos(2)
    tag = ch.consume(queue)
    client.run_until(lambda: len(ch.deliveries) == 2, "two deliveries")
    assert consumers() == 1
    ch.cancel(tag)
    assert consumers() == 1  # cancelled, but it still holds two unacked messages
    getter = amqp.blocking(0).channel()
    method, _props, body = getter.basic_get(queue)
    assert (body, method.message_count) == (b"m2", 0)
    assert consumers() == 2  # plus the one-shot consumer of an unacked basic.get
    ch.ack(ch.deliveries[-1].delivery_tag, multiple=True)
    ch.sync()
    getter.basic_ack(method.delivery_tag)
    assert eventually(lambda: consumers() == 0)


def test_deleting_the_queue_cancels_its_consumers_on_other_nodes(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    client = amqp.select(1)
    ch = client.channel()
    tag = ch.consume(queue)
    deleted = amqp.blocking(2).channel().queue_delete(queue)
    assert deleted.method.message_count == 0
    client.run_until(lambda: ch.cancelled, "a server-sent basic.cancel")
    assert ch.cancelled == [tag]
    assert ch.closed is None and client.conn.is_open
    probe = amqp.blocking(1).channel()
    assert closed_by_broker(lambda: probe.queue_declare(queue, passive=True)) == (
        404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")
