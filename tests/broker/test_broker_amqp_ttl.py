"""Message TTL on a quorum queue of three real nodes: `x-message-ttl`, the per-message
`expiration` property, and the dead letters of expired messages
(messages expire at the head of the queue, as in `rabbit_fifo`).

Expiry is observed, never timed: a test waits (bounded) for the leader to report
the expired messages gone, then checks that no consumer is ever given them.
"""

from __future__ import annotations

import pika

from tests.broker.amqp_support import Amqp, closed_by_broker, get_eventually, headers
from tests.broker.broker_support import eventually


def publish(amqp: Amqp, queue: str, items: list[tuple[bytes, str | None]], node: int) -> None:
    ch = amqp.blocking(node).channel()
    ch.confirm_delivery()
    for body, expiration in items:
        ch.basic_publish("", queue, body, pika.BasicProperties(expiration=expiration))


def test_messages_older_than_the_queue_ttl_are_never_delivered(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0, **{"x-message-ttl": 1000})
    publish(amqp, queue, [(b"stale-1", None), (b"stale-2", None)], node=1)
    assert eventually(lambda: amqp.ready(queue) == 0), "expired messages still ready"
    publish(amqp, queue, [(b"fresh", None)], node=1)
    ch = amqp.blocking(2).channel()
    method, _props, body = ch.basic_get(queue, auto_ack=True)
    assert (body, method.message_count) == (b"fresh", 0)


def test_a_per_message_expiration_drops_only_that_message(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    publish(amqp, queue, [(b"short", "200"), (b"keep", None), (b"long", "600000")], node=2)
    assert eventually(lambda: amqp.ready(queue) == 2), "the short-lived message is still ready"
    ch = amqp.blocking(0).channel()
    got = [ch.basic_get(queue, auto_ack=True)[2] for _ in range(3)]
    assert got == [b"keep", b"long", None]


def test_the_smaller_of_queue_ttl_and_expiration_wins(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2, **{"x-message-ttl": 600_000})
    publish(amqp, queue, [(b"short", "100"), (b"queue-ttl", None)], node=0)
    assert eventually(lambda: amqp.ready(queue) == 1)
    ch = amqp.blocking(1).channel()
    assert ch.basic_get(queue, auto_ack=True)[2] == b"queue-ttl"


def test_expired_messages_are_dead_lettered_with_reason_expired(amqp: Amqp, queue: str) -> None:
    dlq = f"{queue}-dlq"
    amqp.declare(dlq, node=1)
    amqp.declare(queue, node=0, **{"x-message-ttl": 200, "x-dead-letter-exchange": "",
                                   "x-dead-letter-routing-key": dlq})
    publish(amqp, queue, [(b"by-queue-ttl", None), (b"by-expiration", "100")], node=2)
    ch = amqp.blocking(2).channel()
    dead = []
    for _ in range(2):
        method, props, body = get_eventually(ch, dlq, "an expired message")
        [death] = headers(props)["x-death"]
        dead.append((body, method.routing_key, props.expiration, death["reason"],
                     death["queue"], death.get("original-expiration")))
    assert dead == [(b"by-queue-ttl", dlq, None, "expired", queue, None),
                    (b"by-expiration", dlq, None, "expired", queue, "100")]
    assert ch.basic_get(queue)[0] is None


def test_an_invalid_expiration_closes_the_channel(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0)
    ch = amqp.blocking(1).channel()
    ch.basic_publish("", queue, b"x", pika.BasicProperties(expiration="-5"))
    assert closed_by_broker(lambda: ch.queue_declare(queue, passive=True)) == (
        406, "PRECONDITION_FAILED - invalid expiration '-5': {value_negative,-5}")
    assert amqp.ready(queue) == 0


def test_a_message_that_expired_while_the_consumer_was_busy_is_skipped(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=1)
    client = amqp.select(0)
    ch = client.channel()
    ch.qos(1)
    ch.consume(queue)
    publish(amqp, queue, [(b"held", None), (b"too-late", "100")], node=2)
    client.run_until(lambda: len(ch.deliveries) == 1, "the first delivery")
    assert eventually(lambda: amqp.ready(queue) == 0), "the waiting message did not expire"
    publish(amqp, queue, [(b"next", None)], node=2)
    ch.ack(ch.deliveries[0].delivery_tag)
    client.run_until(lambda: len(ch.deliveries) == 2, "the next delivery")
    client.run_for(0.2)
    assert ch.bodies() == [b"held", b"next"]
