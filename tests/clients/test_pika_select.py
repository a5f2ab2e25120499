"""pika's SelectConnection: callback-style code, one ioloop, on classic queues.

The same patterns as the BlockingConnection module, written the way an
asynchronous pika application is: every step is a callback, the ioloop turns
until the step's answer arrives (`AsyncClient.run_until`, which fails the test
at a deadline instead of hanging).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from tests.broker.amqp_support import AsyncClient
from tests.broker.broker_support import BrokerProc, eventually


@pytest.fixture
def clients(nodes: list[BrokerProc]) -> Iterator[list[AsyncClient]]:
    """One SelectConnection to each node, closed after the test."""
    opened = [AsyncClient(pika.ConnectionParameters("127.0.0.1", n.amqp_port,
                                                    connection_attempts=1)) for n in nodes]
    yield opened
    for client in opened:
        client.close()


class Chan:
    """A SelectConnection channel whose synchronous methods return their reply frame."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.closed: Any = None
        box: list[Any] = []
        client.conn.channel(on_open_callback=box.append)
        client.run_until(lambda: box, "channel.open-ok")
        self.ch = box[0]
        self.ch.add_on_close_callback(lambda _ch, reason: setattr(self, "closed", reason))

    def call(self, start: Callable[[Callable[[Any], None]], Any], what: str) -> Any:
        replies: list[Any] = []
        start(replies.append)
        self.client.run_until(lambda: replies or self.closed is not None, what)
        if not replies:
            raise AssertionError(f"channel closed instead of {what}: {self.closed}")
        return replies[0].method

    def declare(self, queue: str = "", **kwargs: Any) -> str:
        ok = self.call(lambda done: self.ch.queue_declare(queue, callback=done, **kwargs),
                       "queue.declare-ok")
        return str(ok.queue)

    def passive(self, queue: str) -> Any:
        """A passive declare: its declare-ok, or the channel's close reason."""
        try:
            return self.call(lambda done: self.ch.queue_declare(
                queue, passive=True, callback=done), "queue.declare-ok")
        except AssertionError:
            return self.closed

    def get(self, queue: str, auto_ack: bool = False) -> tuple[Any, bytes] | None:
        """basic.get: (method, body), or None for get-empty."""
        got: list[Any] = []
        empty: list[Any] = []
        self.ch.add_callback(empty.append, [pika.spec.Basic.GetEmpty], one_shot=True)
        self.ch.basic_get(queue, lambda _ch, m, _p, b: got.append((m, b)), auto_ack=auto_ack)
        self.client.run_until(lambda: got or empty, "basic.get-ok / get-empty")
        return got[0] if got else None


def test_rpc_over_an_exclusive_server_named_reply_queue(
        clients: list[AsyncClient], name: str) -> None:
    server = Chan(clients[0])
    server.declare(name)

    def on_request(ch: Any, method: Any, props: Any, body: bytes) -> None:
        ch.basic_publish("", props.reply_to, body[::-1],
                         pika.BasicProperties(correlation_id=props.correlation_id))
        ch.basic_ack(method.delivery_tag)
    server.call(lambda done: server.ch.basic_consume(name, on_request, callback=done),
                "basic.consume-ok")

    client = Chan(clients[1])
    reply_queue = client.declare("", exclusive=True)
    assert reply_queue.startswith("amq.gen-")
    replies: list[tuple[str, bytes]] = []
    client.call(lambda done: client.ch.basic_consume(
        reply_queue, lambda _c, _m, p, b: replies.append((p.correlation_id, b)),
        auto_ack=True, callback=done), "basic.consume-ok")
    corr = str(uuid.uuid4())
    client.ch.basic_publish("", name, b"abc", pika.BasicProperties(reply_to=reply_queue,
                                                                   correlation_id=corr))

    def turn_both() -> bool:
        clients[0].run_for(0.02)
        return bool(replies)
    clients[1].run_until(turn_both, "rpc reply")
    assert replies == [(corr, b"cba")]
    server.call(lambda done: server.ch.queue_delete(name, callback=done), "queue.delete-ok")


def test_fanout_to_auto_delete_server_named_queues(
        clients: list[AsyncClient], name: str) -> None:
    pub = Chan(clients[0])
    pub.call(lambda done: pub.ch.exchange_declare(name, "fanout", callback=done),
             "exchange.declare-ok")
    got: dict[str, list[bytes]] = {}
    subs = []
    for client in clients:
        sub = Chan(client)
        queue = sub.declare("", auto_delete=True)
        sub.call(lambda done, q=queue, s=sub: s.ch.queue_bind(  # type: ignore[misc]
            q, name, callback=done), "queue.bind-ok")
        got[queue] = []
        ok = sub.call(lambda done, q=queue, s=sub: s.ch.basic_consume(  # type: ignore[misc]
            q, lambda _c, _m, _p, b, q2=q: got[q2].append(b), auto_ack=True, callback=done),
            "basic.consume-ok")
        subs.append((sub, queue, ok.consumer_tag))
    pub.ch.basic_publish(name, "", b"news")
    for sub, queue, _tag in subs:
        sub.client.run_until(lambda q=queue: got[q], "fanout copy")  # type: ignore[misc]
    assert list(got.values()) == [[b"news"], [b"news"]]
    for sub, queue, tag in subs:
        sub.call(lambda done, s=sub, t=tag: s.ch.basic_cancel(  # type: ignore[misc]
            t, callback=done), "basic.cancel-ok")
        # the other node's copy of the metadata follows within moments
        assert eventually(lambda q=queue: getattr(Chan(clients[0]).passive(q), "reply_text",
                                                  None)
                          == f"NOT_FOUND - no queue '{q}' in vhost '/'")


def test_a_priority_queue_serves_the_highest_priority_first(
        clients: list[AsyncClient], name: str) -> None:
    ch = Chan(clients[0])
    ch.declare(name, arguments={"x-max-priority": 5})
    for priority in (2, 5, 9, 1):  # 9 is above the maximum: served as 5, after the 5
        ch.ch.basic_publish("", name, f"p{priority}".encode(),
                            pika.BasicProperties(priority=priority))
    got: list[bytes] = []
    ch.call(lambda done: ch.ch.basic_consume(
        name, lambda _c, _m, _p, b: got.append(b), auto_ack=True, callback=done),
        "basic.consume-ok")
    clients[0].run_until(lambda: len(got) == 4, "four deliveries")
    assert got == [b"p5", b"p9", b"p2", b"p1"]


def test_expired_messages_are_dead_lettered(clients: list[AsyncClient], name: str) -> None:
    ch = Chan(clients[1])
    ch.call(lambda done: ch.ch.exchange_declare(f"{name}.dlx", "direct", callback=done),
            "exchange.declare-ok")
    ch.declare(f"{name}.dead")
    ch.call(lambda done: ch.ch.queue_bind(f"{name}.dead", f"{name}.dlx", "late",
                                          callback=done), "queue.bind-ok")
    ch.declare(name, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": f"{name}.dlx",
                                "x-dead-letter-routing-key": "late"})
    ch.ch.basic_publish("", name, b"too slow")
    dead: list[tuple[Any, bytes]] = []
    ch.call(lambda done: ch.ch.basic_consume(
        f"{name}.dead", lambda _c, _m, p, b: dead.append((p, b)), auto_ack=True,
        callback=done), "basic.consume-ok")
    clients[1].run_until(lambda: dead, "dead letter")
    props, body = dead[0]
    assert body == b"too slow"
    death = props.headers["x-death"][0]
    assert (death["reason"], death["queue"], death["routing-keys"]) == (
        "expired", name, [name])


def test_get_ack_reject_and_requeue(clients: list[AsyncClient], name: str) -> None:
    ch = Chan(clients[0])
    ch.declare(name)
    for body in (b"a", b"b"):
        ch.ch.basic_publish("", name, body)
    got = ch.get(name)
    assert got is not None and (got[1], got[0].redelivered) == (b"a", False)
    ch.ch.basic_reject(got[0].delivery_tag, requeue=True)
    got = ch.get(name)
    assert got is not None and (got[1], got[0].redelivered) == (b"a", True)
    ch.ch.basic_ack(got[0].delivery_tag)
    got = ch.get(name)
    assert got is not None and got[1] == b"b"
    ch.ch.basic_reject(got[0].delivery_tag, requeue=False)
    assert ch.get(name) is None
    assert ch.passive(name).message_count == 0


def test_an_exclusive_queue_goes_with_its_connection(
        clients: list[AsyncClient], nodes: list[BrokerProc]) -> None:
    owner = AsyncClient(pika.ConnectionParameters("127.0.0.1", nodes[1].amqp_port,
                                                  connection_attempts=1))
    queue = Chan(owner).declare("", exclusive=True)

    def answer() -> int | None:
        return getattr(Chan(clients[0]).passive(queue), "reply_code", None)
    # the other node learns of the queue from the metadata store within moments
    assert eventually(lambda: answer() == 405)
    owner.close()
    assert eventually(lambda: answer() == 404)
