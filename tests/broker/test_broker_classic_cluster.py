"""Classic queues in a cluster: every node's channels find a queue declared on any node.

A classic queue runs on its home node, but its record is the cluster's: a
channel on another node declares it (ok, 405, 406 as RabbitMQ answers),
publishes to it, gets and consumes from it over the node links. When the home
node goes down, its transient and exclusive queues are gone, consumers on other
nodes are cancelled, and a durable queue is waited for as RabbitMQ 4.x waits
(then 404 "... due to timeout") until its node returns or it is deleted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.broker.amqp_support import (
    AsyncChannel,
    AsyncClient,
    closed_by_broker,
    get_eventually,
    pump_until,
)
from tests.broker.broker_support import BrokerProc, connect, ctl, eventually, running_cluster

CLASSIC = {"x-queue-type": "classic"}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("classic_cluster"), count=2) as started:
        yield started


@pytest.fixture
def conns() -> Iterator[list[pika.BlockingConnection]]:
    opened: list[pika.BlockingConnection] = []
    yield opened
    for c in opened:
        if c.is_open:
            c.close()


def open_conn(node: BrokerProc, conns: list[pika.BlockingConnection]) -> Any:
    c = connect(node)
    conns.append(c)
    return c


def passive(conn: Any, name: str) -> Any:
    """A passive declare on a fresh channel: its declare-ok, or (code, text) of the
    channel's closing. Each node reads its own copy of the metadata store, which
    follows the cluster's within moments, so a change made through one node is
    awaited on another (`eventually`)."""
    ch = conn.channel()
    try:
        return ch.queue_declare(name, passive=True).method
    except pex.ChannelClosedByBroker as exc:
        return (exc.reply_code, exc.reply_text)


def test_a_queue_declared_on_one_node_is_the_same_queue_on_another(
        nodes: list[BrokerProc], conns: list[Any]) -> None:
    a, b = nodes
    on_a = open_conn(a, conns).channel()
    on_a.queue_declare("shared", durable=True, arguments=CLASSIC)
    on_a.basic_publish("", "shared", b"from a")

    conn_b = open_conn(b, conns)
    found = eventually(lambda: not isinstance(passive(conn_b, "shared"), tuple)
                       and passive(conn_b, "shared"))
    assert found.message_count == 1
    on_b = conn_b.channel()
    # a redeclare from B finds A's queue: no second queue of that name
    ok = on_b.queue_declare("shared", durable=True, arguments=CLASSIC)
    assert ok.method.message_count == 1
    on_b.basic_publish("", "shared", b"from b")
    assert get_eventually(on_b, "shared", "first")[2] == b"from a"
    assert get_eventually(on_b, "shared", "second")[2] == b"from b"

    assert closed_by_broker(lambda: on_b.queue_declare("shared", durable=False,
                                                       arguments=CLASSIC)) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'shared' in "
             "vhost '/': received 'false' but current is 'true'")
    open_conn(a, conns).channel().queue_delete("shared")


def test_a_consumer_on_another_node_gets_and_acks_the_queues_messages(
        nodes: list[BrokerProc], conns: list[Any]) -> None:
    a, b = nodes
    on_a = open_conn(a, conns).channel()
    on_a.queue_declare("work", durable=True, arguments=CLASSIC)
    conn_b = open_conn(b, conns)
    assert eventually(lambda: not isinstance(passive(conn_b, "work"), tuple))
    on_b = conn_b.channel()
    got: list[bytes] = []

    def handle(ch: Any, method: Any, _props: Any, body: bytes) -> None:
        got.append(body)
        ch.basic_ack(method.delivery_tag)
    on_b.basic_consume("work", handle)
    for i in range(3):
        on_a.basic_publish("", "work", f"m{i}".encode())
    pump_until(conn_b, lambda: len(got) == 3, "deliveries on node B")
    assert got == [b"m0", b"m1", b"m2"]
    assert eventually(lambda: on_a.queue_declare("work", passive=True).method.message_count
                      == 0 and on_a.queue_declare("work", passive=True).method.consumer_count
                      == 1)
    on_b.close()
    assert eventually(lambda: on_a.queue_declare("work", passive=True).method.consumer_count
                      == 0)
    on_a.queue_delete("work")


def test_another_nodes_connection_is_locked_out_of_an_exclusive_queue(
        nodes: list[BrokerProc], conns: list[Any]) -> None:
    a, b = nodes
    owner = open_conn(a, conns)
    owner.channel().queue_declare("mine", exclusive=True)
    locked = ("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in "
              "vhost '/'. It could be originally declared on another connection or the "
              "exclusive property value does not match that of the original declaration.")
    other = open_conn(b, conns)
    assert eventually(lambda: passive(other, "mine") != (
        404, "NOT_FOUND - no queue 'mine' in vhost '/'"))
    assert closed_by_broker(lambda: other.channel().queue_declare("mine", exclusive=True)) == (
        405, locked)
    assert closed_by_broker(lambda: other.channel().queue_declare("mine", passive=True)) == (
        405, locked)
    owner.close()
    assert eventually(lambda: passive(other, "mine") == (
        404, "NOT_FOUND - no queue 'mine' in vhost '/'"))


def test_bindings_made_on_one_node_route_publishes_from_another(
        nodes: list[BrokerProc], conns: list[Any]) -> None:
    a, b = nodes
    on_b = open_conn(b, conns).channel()
    name = on_b.queue_declare("", exclusive=True).method.queue
    on_b.queue_bind(name, "amq.fanout")
    # a queue declared after the binding: once node A sees it, A's copy has the binding
    on_b.queue_declare("after-bind", durable=True, arguments=CLASSIC)
    conn_a = open_conn(a, conns)
    assert eventually(lambda: not isinstance(passive(conn_a, "after-bind"), tuple))
    conn_a.channel().basic_publish("amq.fanout", "", b"fanned")
    assert get_eventually(on_b, name, "fanout copy")[2] == b"fanned"
    on_b.queue_delete("after-bind")


def _refused_on_own_connection(node: BrokerProc, fn: Any, out: dict[str, Any],
                               key: str) -> None:
    """`closed_by_broker(fn(channel))` on a fresh connection, for a worker thread."""
    conn = connect(node)
    try:
        out[key] = closed_by_broker(lambda: fn(conn.channel()))
    except BaseException as exc:  # reported by the test, not lost in the thread
        out[key] = exc
    finally:
        if conn.is_open:
            conn.close()


def test_when_the_home_node_goes_down_transient_queues_go_and_durable_ones_time_out(
        tmp_path: Path) -> None:
    """As RabbitMQ 4.x answers (the nodes model 4.2): a consumer on another node is
    cancelled at once, its earlier deliveries may still be acked; a publish routed to
    the queue is nacked; declare and get are tried again while the node stays down,
    then 404 "... due to timeout"; delete removes the record at once."""
    with running_cluster(tmp_path, count=3, extra=["--rabbitmq-version", "4.2"]) as (a, b, c):
        home = connect(c)
        ch = home.channel()
        ch.queue_declare("keep", durable=True, arguments=CLASSIC)
        ch.queue_declare("lose", durable=False, arguments=CLASSIC)
        ch.queue_declare("owned", exclusive=True)
        for i in range(3):
            ch.basic_publish("", "keep", f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
        watcher = connect(a)
        try:
            assert eventually(lambda: all(
                not isinstance(passive(watcher, name), tuple) for name in ("keep", "lose")))
            assert eventually(lambda: passive(watcher, "owned")[0] == 405)
            consuming = watcher.channel()
            consuming.basic_qos(prefetch_count=2)
            cancelled: list[str] = []
            consuming.add_on_cancel_callback(
                lambda m: cancelled.append(m.method.consumer_tag))
            got: list[int] = []
            consuming.basic_consume("keep", lambda _ch, m, _p, _b: got.append(m.delivery_tag),
                                    consumer_tag="far")
            pump_until(watcher, lambda: len(got) == 2, "two deliveries from node C")
            publishing = watcher.channel()
            publishing.confirm_delivery()

            assert c.proc is not None
            c.proc.send_signal(signal.SIGKILL)
            c.proc.wait(10)

            pump_until(watcher, lambda: cancelled == ["far"], "basic.cancel of the consumer",
                       timeout=30)
            consuming.basic_ack(got[0])  # its queue is gone: harmless, the channel stays
            with pytest.raises(pex.NackError):
                publishing.basic_publish("", "keep", b"after", mandatory=True)
            assert consuming.is_open and publishing.is_open

            def gone(name: str) -> bool:
                return closed_by_broker(lambda: watcher.channel().queue_declare(
                    name, passive=True)) == (404, f"NOT_FOUND - no queue '{name}' in vhost '/'")
            assert eventually(lambda: gone("lose") and gone("owned"), timeout=30)

            # each operation waits out the retries on a connection of its own
            answers: dict[str, Any] = {}
            workers = [threading.Thread(target=_refused_on_own_connection, args=(
                a, fn, answers, key)) for key, fn in (
                ("passive", lambda ch: ch.queue_declare("keep", passive=True)),
                ("active", lambda ch: ch.queue_declare("keep", durable=True,
                                                        arguments=CLASSIC)),
                ("get", lambda ch: ch.basic_get("keep")))]
            for w in workers:
                w.start()
            for w in workers:
                w.join(180)
            timed_out = (404, "NOT_FOUND - failed to perform operation on queue 'keep' in "
                              "vhost '/' due to timeout")
            assert answers == {"passive": timed_out, "active": timed_out, "get": timed_out}

            assert closed_by_broker(lambda: watcher.channel().queue_delete(
                "keep", if_empty=True)) == (
                406, "PRECONDITION_FAILED - queue 'keep' in vhost '/' not empty")
            # deleting it removes the record; the name is free again
            watcher.channel().queue_delete("keep")
            assert gone("keep")
            assert watcher.channel().queue_declare("keep", durable=True,
                                                   arguments=CLASSIC) is not None
        finally:
            watcher.close()


def test_a_310_node_answers_at_once_for_a_durable_queue_whose_home_node_is_down(
        tmp_path: Path) -> None:
    """RabbitMQ 3.10 drops such a queue from its live table: its consumers are
    cancelled, declare and get are 404 "home node ... is down or inaccessible" at
    once, and a publish routes nowhere (confirmed)."""
    with running_cluster(tmp_path, count=3, extra=["--rabbitmq-version", "3.10"]) as (a, _b, c):
        home = connect(c)
        home.channel().queue_declare("keep", durable=True, arguments=CLASSIC)
        watcher = connect(a)
        try:
            assert eventually(lambda: not isinstance(passive(watcher, "keep"), tuple))
            consuming = watcher.channel()
            cancelled: list[str] = []
            consuming.add_on_cancel_callback(
                lambda m: cancelled.append(m.method.consumer_tag))
            consuming.basic_consume("keep", lambda *_: None, consumer_tag="far")
            publisher = AsyncClient(pika.ConnectionParameters(
                "127.0.0.1", a.amqp_port, connection_attempts=1))
            publishing = publisher.channel()
            publishing.confirm_select()
            assert c.proc is not None
            c.proc.send_signal(signal.SIGKILL)
            c.proc.wait(10)

            pump_until(watcher, lambda: cancelled == ["far"], "basic.cancel of the consumer",
                       timeout=30)
            down = (404, f"NOT_FOUND - home node '{c.name}' of durable queue 'keep' in "
                         "vhost '/' is down or inaccessible")
            assert closed_by_broker(lambda: watcher.channel().queue_declare(
                "keep", passive=True)) == down
            assert closed_by_broker(lambda: watcher.channel().basic_get("keep")) == down
            publishing.publish("keep", b"after")
            publisher.run_until(lambda: publishing.confirmed() == {1: "ack"},
                                "the confirm of a publish routed nowhere")
            publisher.close()
            watcher.channel().queue_delete("keep")
            assert closed_by_broker(lambda: watcher.channel().queue_declare(
                "keep", passive=True)) == (404, "NOT_FOUND - no queue 'keep' in vhost '/'")
        finally:
            watcher.close()

class _VhostClient(AsyncClient):
    """A client on one vhost that notes which consumers were cancelled when its
    connection was closed (the server's frames are handled in their order)."""

    def __init__(self, node: BrokerProc, vhost: str) -> None:
        self.cancelled_at_close: list[str] | None = None
        self.watched: AsyncChannel | None = None
        super().__init__(pika.ConnectionParameters("127.0.0.1", node.amqp_port,
                                                   virtual_host=vhost, connection_attempts=1))

    def _lost(self, conn: Any, reason: BaseException) -> None:
        if self.watched is not None:
            self.cancelled_at_close = sorted(self.watched.cancelled)
        super()._lost(conn, reason)


def _closed_with(client: _VhostClient) -> tuple[int, str]:
    client.run_until(lambda: client.closed is not None, "closing of the connection")
    assert isinstance(client.closed, pex.ConnectionClosedByBroker)
    return client.closed.reply_code, client.closed.reply_text


def _on_vhost(node: BrokerProc, vhost: str) -> _VhostClient | None:
    """A client on `vhost` once `node`'s copy of the metadata has its permissions."""
    try:
        return _VhostClient(node, vhost)
    except pex.AMQPConnectionError:
        return None


def _declare_and_consume(ch: AsyncChannel, name: str, kind: str) -> None:
    def declare(done: Any) -> Any:
        return ch.ch.queue_declare(name, durable=True, arguments={"x-queue-type": kind},
                                   callback=done)

    def consume(done: Any) -> Any:
        return ch.ch.basic_consume(name, lambda *_: None, consumer_tag=f"on-{kind}",
                                   callback=done)
    ch._call(declare, "queue.declare-ok")
    ch._call(consume, "basic.consume-ok")


def test_delete_vhost_cancels_its_consumers_and_closes_its_connections_on_every_node(
        nodes: list[BrokerProc], conns: list[Any]) -> None:
    a, b = nodes
    for args in (("add_vhost", "gone"), ("--vhost", "gone", "set_permissions", "guest",
                                         ".*", ".*", ".*")):
        out = ctl(a.name, *args)
        assert out.returncode == 0, out.stderr
    on_a = _VhostClient(a, "gone")
    on_b = eventually(lambda: _on_vhost(b, "gone"))
    try:
        ch = on_a.watched = on_a.channel()
        for name, kind in (("gone-cq", "classic"), ("gone-qq", "quorum")):
            _declare_and_consume(ch, name, kind)
        bystander = open_conn(b, conns)  # on vhost '/': stays open

        out = ctl(a.name, "delete_vhost", "gone")
        assert out.returncode == 0, out.stderr

        forced = (320, "CONNECTION_FORCED - vhost 'gone' is deleted")
        assert _closed_with(on_a) == forced
        assert on_a.cancelled_at_close == ["on-classic", "on-quorum"]
        assert _closed_with(on_b) == forced
        assert bystander.is_open
        bystander.channel().queue_declare("", exclusive=True)
    finally:
        on_a.close()
        on_b.close()
