"""The consumer timeout of RabbitMQ 4.0–4.2: the channel's tick
closes a channel whose oldest unacked delivery waited longer than the timeout, with
406 PRECONDITION_FAILED; the queue's `x-consumer-timeout` (or policy) wins over the
node's `consumer_timeout`; a consumer that acks in time is never disturbed."""

from __future__ import annotations

import time
from typing import Any

import gevent
import pika
import pika.exceptions as pex
import pytest

from channel.connection.config import Config
from channel.queue_types.consumer_timeout import queue_timeout, timed_out
from releases import RELEASES
from tests.channel.conftest import Broker, client

TEXT = ("PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. "
        "Timeout value used: {} ms. This timeout value can be configured, see consumers "
        "doc guide to learn more")


def test_the_queue_value_is_the_smaller_of_argument_and_policy_else_the_nodes() -> None:
    assert queue_timeout({}, {}, 1_800_000) == 1_800_000
    assert queue_timeout({"x-consumer-timeout": 5000}, {}, 1_800_000) == 5000
    assert queue_timeout({"x-consumer-timeout": 5000}, {"consumer-timeout": 3000}, None) == 3000
    assert queue_timeout({}, {"consumer-timeout": 7000}, None) == 7000
    assert queue_timeout({}, {}, None) is None


def test_only_a_delivery_older_than_the_timeout_times_out() -> None:
    assert timed_out(1, None, 10_000, 100) is None  # nothing unacked
    assert timed_out(1, 9_900, 10_000, 100) is None  # exactly the timeout: not yet
    assert timed_out(1, 9_000, 10_000, None) is None  # turned off
    error = timed_out(3, 9_899, 10_000, 100)
    assert error is not None and (error.code, error.method) == (406, (0, 0))
    assert error.explanation.startswith("delivery acknowledgement on channel 3 timed out. "
                                        "Timeout value used: 100 ms.")


@pytest.fixture
def config() -> Config:
    """A 4.2 node: from 4.3 the queue, not the channel's tick, enforces the timeout."""
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                  consumer_timeout=400, channel_tick_interval=50, release=RELEASES["4.2"])


def consume_without_ack(conn: pika.BlockingConnection, queue: str,
                        arguments: dict[str, Any] | None = None) -> Any:
    def run() -> Any:
        ch = conn.channel()
        ch.queue_declare(queue, arguments=arguments, durable=True)
        ch.basic_publish("", queue, b"m")
        ch.basic_consume(queue, lambda *a: None)
        return ch
    return client(run)


def closed_with(conn: pika.BlockingConnection, ch: Any, seconds: float) -> Any:
    """The reason the broker gave for closing `ch`, waiting up to `seconds`."""
    reasons: list[Any] = []

    def run() -> Any:
        # the blocking adapter only marks a consuming channel closed: ask its impl why
        ch._impl.add_on_close_callback(lambda _ch, reason: reasons.append(reason))
        deadline = time.monotonic() + seconds
        while ch.is_open and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        return reasons[0] if reasons else None
    return client(run)


def test_an_unacked_delivery_past_the_node_timeout_closes_the_channel(
    broker: Broker, conn: pika.BlockingConnection,
) -> None:
    ch = consume_without_ack(conn, "ct1")
    exc = closed_with(conn, ch, 2.0)
    assert isinstance(exc, pex.ChannelClosedByBroker)
    assert (exc.reply_code, exc.reply_text) == (406, TEXT.format(400))
    assert conn.is_open  # a channel error: the connection stays
    # the message went back to the queue with the channel
    ch2 = client(conn.channel)
    method, _props, body = client(lambda: ch2.basic_get("ct1", auto_ack=True))
    assert body == b"m" and method.redelivered


def test_the_queue_argument_shortens_the_timeout(
    broker: Broker, conn: pika.BlockingConnection,
) -> None:
    ch = consume_without_ack(conn, "ct2", {"x-consumer-timeout": 100})
    exc = closed_with(conn, ch, 2.0)
    assert isinstance(exc, pex.ChannelClosedByBroker)
    assert exc.reply_text == TEXT.format(100)


def test_a_consumer_that_acks_in_time_keeps_its_channel(
    broker: Broker, conn: pika.BlockingConnection,
) -> None:
    def run() -> int:
        ch = conn.channel()
        ch.queue_declare("ct3", durable=True)
        acked = 0
        for _ in range(8):  # 8 x 100 ms: twice the timeout in all
            ch.basic_publish("", "ct3", b"m")
            method, _props, _body = ch.basic_get("ct3")
            gevent.sleep(0)
            conn.process_data_events(time_limit=0.1)
            ch.basic_ack(method.delivery_tag)
            acked += 1
        conn.process_data_events(time_limit=0.2)
        assert ch.is_open
        return acked
    assert client(run) == 8
