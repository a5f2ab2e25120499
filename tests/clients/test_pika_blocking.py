"""pika's BlockingConnection, used as pika's own tutorials use it, on classic queues.

RPC over an exclusive server-named reply queue, fanout to auto-delete
server-named queues, a priority queue, message TTL into a dead-letter queue,
`basic.get` with ack / reject / requeue, and an exclusive queue that goes with
its connection. The second node of the cluster serves the other side of a
pattern where that shows that a classic queue is reached from every node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.broker.broker_support import BrokerProc, eventually


@pytest.fixture
def conns(nodes: list[BrokerProc]) -> Iterator[list[pika.BlockingConnection]]:
    """One connection to each node, closed after the test."""
    opened = [pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", n.amqp_port, connection_attempts=1)) for n in nodes]
    yield opened
    for conn in opened:
        if conn.is_open:
            conn.close()


def pump(conn: pika.BlockingConnection, done: Any, what: str) -> None:
    """Process `conn`'s events until `done()` holds (bounded)."""
    assert eventually(lambda: conn.process_data_events(time_limit=0.05) or done(),
                      timeout=15), f"no {what}"


def passive_error(conn: pika.BlockingConnection, queue: str) -> tuple[int, str] | None:
    """The error a passive declare of `queue` closes a fresh channel with, or None."""
    ch = conn.channel()
    try:
        ch.queue_declare(queue, passive=True)
    except pex.ChannelClosedByBroker as exc:
        return exc.reply_code, exc.reply_text
    ch.close()
    return None


def test_rpc_over_an_exclusive_server_named_reply_queue(
        conns: list[pika.BlockingConnection], name: str) -> None:
    server_conn, client_conn = conns
    server = server_conn.channel()
    server.queue_declare(name)
    server.basic_qos(prefetch_count=1)

    def on_request(ch: Any, method: Any, props: Any, body: bytes) -> None:
        ch.basic_publish("", props.reply_to, body.upper(),
                         pika.BasicProperties(correlation_id=props.correlation_id))
        ch.basic_ack(method.delivery_tag)
    server.basic_consume(name, on_request)

    client = client_conn.channel()
    reply_queue = client.queue_declare("", exclusive=True).method.queue
    assert reply_queue.startswith("amq.gen-")
    replies: list[tuple[str, bytes]] = []
    client.basic_consume(reply_queue, lambda _c, _m, p, b: replies.append((p.correlation_id, b)),
                         auto_ack=True)
    corr = str(uuid.uuid4())
    client.basic_publish("", name, b"ping",
                         pika.BasicProperties(reply_to=reply_queue, correlation_id=corr))
    for _ in range(300):
        server_conn.process_data_events(time_limit=0.02)
        client_conn.process_data_events(time_limit=0.02)
        if replies:
            break
    assert replies == [(corr, b"PING")]
    server.queue_delete(name)


def test_fanout_to_auto_delete_server_named_queues(
        conns: list[pika.BlockingConnection], name: str) -> None:
    publisher = conns[0].channel()
    publisher.exchange_declare(name, "fanout")
    got: dict[str, list[bytes]] = {}
    subscribers = []
    for conn in conns:
        ch = conn.channel()
        queue = ch.queue_declare("", auto_delete=True).method.queue
        ch.queue_bind(queue, name)
        got[queue] = []
        tag = ch.basic_consume(queue, lambda _c, _m, _p, b, q=queue: got[q].append(b),
                               auto_ack=True)
        subscribers.append((conn, ch, queue, tag))
    publisher.basic_publish(name, "", b"news")
    for conn, _ch, queue, _tag in subscribers:
        pump(conn, lambda q=queue: got[q], "fanout copy")
    assert list(got.values()) == [[b"news"], [b"news"]]
    # an auto-delete queue goes when its last consumer leaves
    for _conn, ch, queue, tag in subscribers:
        ch.basic_cancel(tag)
        assert eventually(lambda q=queue: passive_error(conns[0], q) is not None)
        assert passive_error(conns[0], queue) == (
            404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")
    publisher.exchange_delete(name)


def test_a_priority_queue_serves_the_highest_priority_first(
        conns: list[pika.BlockingConnection], name: str) -> None:
    ch = conns[0].channel()
    ch.queue_declare(name, arguments={"x-max-priority": 10})
    for priority in (1, 9, 5, 0):
        ch.basic_publish("", name, f"p{priority}".encode(),
                         pika.BasicProperties(priority=priority))
    other = conns[1].channel()
    bodies = [other.basic_get(name, auto_ack=True)[2] for _ in range(4)]
    assert bodies == [b"p9", b"p5", b"p1", b"p0"]
    ch.queue_delete(name)


def test_expired_messages_are_dead_lettered_with_x_death(
        conns: list[pika.BlockingConnection], name: str) -> None:
    ch = conns[0].channel()
    ch.exchange_declare(f"{name}.dlx", "fanout")
    ch.queue_declare(f"{name}.dead")
    ch.queue_bind(f"{name}.dead", f"{name}.dlx")
    ch.queue_declare(name, arguments={"x-message-ttl": 100,
                                      "x-dead-letter-exchange": f"{name}.dlx"})
    ch.basic_publish("", name, b"by queue ttl")
    ch.basic_publish("", name, b"by expiration", pika.BasicProperties(expiration="50"))

    got: list[tuple[Any, bytes]] = []

    def collect() -> bool:
        method, props, body = ch.basic_get(f"{name}.dead", auto_ack=True)
        if method is not None:
            got.append((props, body))
        return len(got) == 2
    assert eventually(collect), got
    assert [body for _props, body in got] == [b"by queue ttl", b"by expiration"]
    death = got[0][0].headers["x-death"][0]
    assert (death["reason"], death["queue"], death["exchange"], death["count"]) == (
        "expired", name, "", 1)
    assert got[0][0].headers["x-first-death-reason"] == "expired"
    assert got[1][0].expiration is None  # the per-message TTL is removed, as RabbitMQ does
    for queue in (name, f"{name}.dead"):
        ch.queue_delete(queue)
    ch.exchange_delete(f"{name}.dlx")


def test_get_ack_reject_and_requeue(conns: list[pika.BlockingConnection], name: str) -> None:
    ch = conns[1].channel()
    ch.queue_declare(name)
    for body in (b"one", b"two", b"three"):
        ch.basic_publish("", name, body)

    method, _props, body = ch.basic_get(name)
    assert (body, method.redelivered, method.message_count) == (b"one", False, 2)
    ch.basic_reject(method.delivery_tag, requeue=True)
    method, _props, body = ch.basic_get(name)
    assert (body, method.redelivered) == (b"one", True)  # back at its place, at the head
    ch.basic_ack(method.delivery_tag)

    method, _props, body = ch.basic_get(name)
    assert body == b"two"
    ch.basic_reject(method.delivery_tag, requeue=False)  # dropped: no dead-letter exchange
    method, _props, body = ch.basic_get(name)
    assert body == b"three"
    ch.basic_nack(method.delivery_tag, requeue=True)
    assert ch.queue_declare(name, passive=True).method.message_count == 1
    method, _props, body = ch.basic_get(name, auto_ack=True)
    assert (body, method.redelivered, method.message_count) == (b"three", True, 0)
    assert ch.basic_get(name) == (None, None, None)
    ch.queue_delete(name)


def test_an_exclusive_queue_is_locked_to_its_connection_and_goes_with_it(
        conns: list[pika.BlockingConnection], nodes: list[BrokerProc]) -> None:
    owner = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", nodes[0].amqp_port, connection_attempts=1))
    queue = owner.channel().queue_declare("", exclusive=True).method.queue
    for conn in conns:
        code, text = eventually(lambda c=conn: passive_error(c, queue))
        assert (code, text) == (405, "RESOURCE_LOCKED - cannot obtain exclusive access to "
                                     f"locked queue '{queue}' in vhost '/'. It could be "
                                     "originally declared on another connection or the "
                                     "exclusive property value does not match that of the "
                                     "original declaration.")
    owner.close()
    for conn in conns:
        assert eventually(lambda c=conn: passive_error(c, queue) == (
            404, f"NOT_FOUND - no queue '{queue}' in vhost '/'"))
