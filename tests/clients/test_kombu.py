"""kombu over py-amqp (the transport Celery uses), on classic queues.

Producers, consumers and `kombu.Queue` declarations as a Celery-style
application writes them: a server-named exclusive reply queue for RPC, fanout
broadcast to auto-delete queues, `max_priority`, `message_ttl` with a
dead-letter exchange, `Queue.get` with ack / reject / requeue, and exclusive
queues going with their connection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import amqp.exceptions
import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from tests.broker.broker_support import BrokerProc, eventually
from tests.clients.conftest import url


@pytest.fixture
def conns(nodes: list[BrokerProc]) -> Iterator[list[Connection]]:
    """One kombu connection to each node, closed after the test."""
    opened = [Connection(url(n), connect_timeout=5) for n in nodes]
    for conn in opened:
        conn.connect()
    yield opened
    for conn in opened:
        conn.release()


def drain_until(conn: Connection, done: Any) -> None:
    """Let `conn`'s consumers receive until `done()` holds (bounded)."""
    def step() -> bool:
        try:
            conn.drain_events(timeout=0.05)
        except TimeoutError:
            pass
        return bool(done())
    assert eventually(step, timeout=15)


def passive_error(conn: Connection, name: str) -> int | None:
    """The reply code a passive declare of `name` fails with, or None."""
    try:
        with conn.channel() as ch:
            ch.queue_declare(name, passive=True)
    except amqp.exceptions.AMQPError as exc:
        return int(exc.code)
    return None


def test_rpc_over_an_exclusive_server_named_reply_queue(
        conns: list[Connection], name: str) -> None:
    server_conn, client_conn = conns
    requests = Queue(name, auto_delete=True)
    replies: list[tuple[str, Any]] = []

    def serve(body: Any, message: Any) -> None:
        Producer(server_conn.default_channel).publish(
            {"result": body["n"] + 1}, routing_key=message.properties["reply_to"],
            correlation_id=message.properties["correlation_id"], serializer="json")
        message.ack()

    # a consumer declares (and binds to its channel) a copy of each queue given
    with Consumer(server_conn, [requests], callbacks=[serve]), \
            Consumer(client_conn, [Queue("", exclusive=True, auto_delete=True)], no_ack=True,
                     callbacks=[lambda body, msg: replies.append(
                         (msg.properties["correlation_id"], body))]) as reply_consumer:
        reply_queue = reply_consumer.queues[0]
        assert reply_queue.name.startswith("amq.gen-")
        corr = str(uuid.uuid4())
        Producer(client_conn.default_channel).publish(
            {"n": 41}, routing_key=name, reply_to=reply_queue.name, correlation_id=corr,
            serializer="json")

        def answered() -> bool:
            for conn in conns:
                try:
                    conn.drain_events(timeout=0.05)
                except TimeoutError:
                    pass
            return bool(replies)
        assert eventually(answered, timeout=15)
    assert replies == [(corr, {"result": 42})]


def test_fanout_to_auto_delete_server_named_queues(conns: list[Connection], name: str) -> None:
    exchange = Exchange(name, "fanout", auto_delete=True)
    got: list[list[Any]] = [[], []]
    queues = [Queue("", exchange, exclusive=False, auto_delete=True, durable=False)
              for _ in conns]
    consumers = [Consumer(conn, [queue], no_ack=True, callbacks=[
        lambda body, _msg, box=box: box.append(body)])
        for conn, queue, box in zip(conns, queues, got, strict=True)]
    for consumer in consumers:
        consumer.consume()
    Producer(conns[0].default_channel, exchange=exchange).publish(
        {"event": "deploy"}, serializer="json")
    for conn, box in zip(conns, got, strict=True):
        drain_until(conn, lambda box=box: box)
    assert got == [[{"event": "deploy"}], [{"event": "deploy"}]]
    names = [c.queues[0].name for c in consumers]
    assert all(n.startswith("amq.gen-") for n in names)
    for consumer in consumers:
        consumer.cancel()
    for queue_name in names:
        assert eventually(lambda q=queue_name: passive_error(conns[0], q) == 404)


def test_a_priority_queue_serves_the_highest_priority_first(
        conns: list[Connection], name: str) -> None:
    queue = Queue(name, max_priority=10, auto_delete=False, durable=False)
    with conns[0].Producer() as producer:
        for priority in (3, 10, 7):
            producer.publish(f"p{priority}", routing_key=name, priority=priority,
                             declare=[queue])
    bound = queue(conns[1].default_channel)
    bodies = [bound.get(no_ack=True).payload for _ in range(3)]
    assert bodies == ["p10", "p7", "p3"]
    bound.delete()


def test_expired_messages_are_dead_lettered(conns: list[Connection], name: str) -> None:
    dlx = Exchange(f"{name}.dlx", "direct", durable=False)
    dead = Queue(f"{name}.dead", dlx, routing_key="expired-work", durable=False)
    work = Queue(name, message_ttl=0.05, durable=False, queue_arguments={
        "x-dead-letter-exchange": dlx.name, "x-dead-letter-routing-key": "expired-work"})
    channel = conns[0].default_channel
    dead(channel).declare()
    with conns[0].Producer() as producer:
        producer.publish("stale", routing_key=name, declare=[work])
    bound = dead(conns[1].default_channel)
    message = eventually(lambda: bound.get(no_ack=True))
    assert message is not None and message.payload == "stale"
    death = message.headers["x-death"][0]
    assert (death["reason"], death["queue"], death["routing-keys"]) == (
        "expired", name, [name])
    work(channel).delete()
    bound.delete()
    dlx(channel).delete()


def test_get_ack_reject_and_requeue(conns: list[Connection], name: str) -> None:
    queue = Queue(name, durable=False)(conns[0].default_channel)
    queue.declare()
    with conns[0].Producer() as producer:
        for body in ("first", "second"):
            producer.publish(body, routing_key=name)
    message = queue.get()
    assert (message.payload, message.delivery_info["redelivered"]) == ("first", False)
    message.requeue()
    message = queue.get()
    assert (message.payload, message.delivery_info["redelivered"]) == ("first", True)
    message.ack()
    message = queue.get()
    assert message.payload == "second"
    message.reject()
    assert queue.get() is None
    queue.delete()


def test_an_exclusive_queue_is_locked_to_its_connection_and_goes_with_it(
        conns: list[Connection], nodes: list[BrokerProc]) -> None:
    owner = Connection(url(nodes[1]), connect_timeout=5)
    queue = Queue("", exclusive=True)(owner.default_channel)
    queue.declare()
    assert eventually(lambda: passive_error(conns[0], queue.name) == 405)
    owner.release()
    assert eventually(lambda: passive_error(conns[0], queue.name) == 404)
