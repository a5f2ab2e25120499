"""Requeued messages on a quorum queue: where they go and when a channel sees them.

pika against one real `warren node start` process modelling RabbitMQ 4.2 (machine
version 7), whose quorum queues have a delivery limit of 20 unless told otherwise
and count every requeue toward it: a requeued message waits in the queue's
returns, served first, and one requeued more than 20 times is dropped. A
channel's requeue reaches the queue before anything the channel sends after it,
so the next ``basic.get`` on the same channel finds the message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pika
import pytest

from tests.broker.broker_support import BrokerProc, connect, running_cluster

UNLIMITED = {"x-delivery-limit": -1}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    with running_cluster(tmp_path_factory.mktemp("return_order"), count=1,
                         extra=["--rabbitmq-version", "4.2"]) as nodes:
        yield nodes[0]


@pytest.fixture
def queue(node: BrokerProc) -> Iterator[str]:
    name = "q-" + uuid.uuid4().hex[:12]
    yield name
    with closing(connect(node)) as conn:
        conn.channel().queue_delete(name)


def declare(ch: Any, queue: str, arguments: dict[str, Any]) -> None:
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum", **arguments})


def get_body(ch: Any, queue: str) -> bytes | None:
    _method, _props, body = ch.basic_get(queue, auto_ack=True)
    return body


@pytest.mark.parametrize(("arguments", "served"), [
    ({}, [b"via-publish2", b"via-publish1"]),          # as RabbitMQ 4.x
    (UNLIMITED, [b"via-publish1", b"via-publish2"]),   # as RabbitMQ 3.10
])
def test_closing_the_connection_from_a_consume_callback(
        node: BrokerProc, queue: str, arguments: dict[str, Any], served: list[bytes]) -> None:
    """pika's acceptance test "close connection from basic_consume callback" on a
    quorum queue. pika rejects (requeue) the message it had not handed to the
    callback yet before it cancels the consumer and closes the channel, whose
    unacked message the queue returns when the channel is gone."""
    conn = connect(node)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        declare(ch, queue, arguments)
        ch.basic_publish("", queue, b"via-publish1", mandatory=True)
        ch.basic_publish("", queue, b"via-publish2", mandatory=True)
        ch.basic_consume(queue, lambda *_: conn.close(), auto_ack=False)
        ch.start_consuming()
        assert conn.is_closed
    finally:
        if conn.is_open:
            conn.close()
    with closing(connect(node)) as again:
        ch = again.channel()
        assert [get_body(ch, queue), get_body(ch, queue)] == served


@pytest.mark.parametrize("arguments", [{}, UNLIMITED], ids=["delivery-limit", "no-limit"])
def test_a_get_right_after_a_requeue_on_the_same_channel_finds_the_message(
        node: BrokerProc, queue: str, arguments: dict[str, Any]) -> None:
    with closing(connect(node)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        declare(ch, queue, arguments)
        for i in range(50):
            body = f"m{i}".encode()
            ch.basic_publish("", queue, body)  # confirmed: it is in the queue
            method, _props, got = ch.basic_get(queue, auto_ack=False)
            assert got == body
            ch.basic_reject(method.delivery_tag, requeue=True)
            method, props, got = ch.basic_get(queue, auto_ack=False)
            assert got == body, f"round {i}: the queue looked empty after the requeue"
            assert method.redelivered and props.headers["x-delivery-count"] == 1
            ch.basic_ack(method.delivery_tag)


def test_a_message_requeued_more_often_than_the_delivery_limit_is_dropped(
        node: BrokerProc, queue: str) -> None:
    with closing(connect(node)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        declare(ch, queue, {})
        ch.basic_publish("", queue, b"m", pika.BasicProperties(delivery_mode=2))
        deliveries = 0
        while True:
            method, _props, _body = ch.basic_get(queue, auto_ack=False)
            if method is None:
                break
            deliveries += 1
            ch.basic_reject(method.delivery_tag, requeue=True)
        assert deliveries == 21  # the 21st requeue exceeds the limit of 20
