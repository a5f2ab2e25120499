"""basic.consume is refused before consume-ok: permission,
queue lookup, the queue type's consumer arguments, exclusive consumers.

pika's `basic_consume` returns only once consume-ok arrives, so a refusal that
surfaces *in* `basic_consume` proves no consume-ok was written first.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions as pex
import pytest

from channel.errors import AmqpError
from channel.queue_types.consumer_args import check_consume_arguments, consumer_priority
from tests.channel.conftest import Broker, client


def consume_refused(conn: pika.BlockingConnection, queue: str = "q", *, declare: bool = True,
                    **kwargs: Any) -> str:
    def work() -> str:
        ch = conn.channel()
        if declare:
            ch.queue_declare(queue, durable=True)
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            ch.basic_consume(queue, lambda *a: None, **kwargs)
        return f"{info.value.reply_code} {info.value.reply_text}"
    return client(work)


def test_a_missing_queue_is_404_without_consume_ok(conn: pika.BlockingConnection) -> None:
    assert consume_refused(conn, "nowhere", declare=False) == (
        "404 NOT_FOUND - no queue 'nowhere' in vhost '/'")


@pytest.mark.parametrize(("args", "text"), [
    ({"x-priority": "high"},
     "invalid arg 'x-priority' for queue 'q' in vhost '/': \"expected integer, got longstr\""),
    ({"x-consumer-timeout": 1000},
     "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '/' of queue type "
     "rabbit_classic_queue"),
    ({"x-stream-offset": "first"},
     "invalid arg 'x-stream-offset' for queue 'q' in vhost '/' of queue type "
     "rabbit_classic_queue"),
])
def test_classic_queue_consumer_arguments(conn: pika.BlockingConnection,
                                          args: dict[str, Any], text: str) -> None:
    assert consume_refused(conn, arguments=args) == "406 PRECONDITION_FAILED - " + text


def test_arguments_no_queue_type_knows_are_ignored(broker: Broker,
                                                   conn: pika.BlockingConnection) -> None:
    def work() -> str:
        ch = conn.channel()
        ch.queue_declare("q", durable=True)
        return ch.basic_consume("q", lambda *a: None, arguments={
            "x-cancel-on-ha-failover": True, "x-credit": {"credit": 10, "drain": False},
            "x-priority": 5, "whatever": "x"})
    tag = client(work)
    q = broker.backend.queue("/", "q")
    assert q is not None and [t for _ch, t in q.consumers] == [tag]


def test_an_exclusive_consumer_keeps_others_out(conn: pika.BlockingConnection) -> None:
    def work() -> str:
        ch = conn.channel()
        ch.queue_declare("q", durable=True)
        ch.basic_consume("q", lambda *a: None, exclusive=True)
        return "ok"
    client(work)
    assert consume_refused(conn, declare=False) == (
        "403 ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")


def test_an_exclusive_consumer_needs_a_queue_without_consumers(
        conn: pika.BlockingConnection) -> None:
    def work() -> str:
        ch = conn.channel()
        ch.queue_declare("q", durable=True)
        return ch.basic_consume("q", lambda *a: None)
    client(work)
    assert consume_refused(conn, declare=False, exclusive=True) == (
        "403 ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")


@pytest.mark.parametrize(("args", "text"), [
    ({"x-priority": "high"}, "invalid arg 'x-priority' for queue 'q' in vhost '/': "
                             "\"expected integer, got longstr\""),
    ({"x-priority": 1.5}, "invalid arg 'x-priority' for queue 'q' in vhost '/': "
                          "\"expected integer, got double\""),
    ({"x-consumer-timeout": -1}, "invalid arg 'x-consumer-timeout' for queue 'q' in vhost "
                                 "'/': {value_negative,-1}"),
    ({"x-stream-filter": "f"}, "invalid arg 'x-stream-filter' for queue 'q' in vhost '/' of "
                               "queue type rabbit_quorum_queue"),
    # the value validators run before the other-queue-type check
    ({"x-stream-offset": "first", "x-consumer-timeout": -5},
     "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '/': {value_negative,-5}"),
])
def test_quorum_queue_consumer_arguments(args: dict[str, Any], text: str) -> None:
    with pytest.raises(AmqpError) as info:
        check_consume_arguments("q", "/", "quorum", args)
    assert info.value.reply_text == "PRECONDITION_FAILED - " + text


def test_quorum_queue_accepts_priority_and_timeout() -> None:
    args = {"x-priority": -3, "x-consumer-timeout": 0, "x-credit": 1}
    check_consume_arguments("q", "/", "quorum", args)
    assert consumer_priority(args) == -3 and consumer_priority({}) == 0
