"""Each AMQP connection is RabbitMQ's supervision tree.

connection_sup (one_for_all, 0) holds the helper supervisor and the reader; the
helper supervisor holds the channel supervisors' supervisor, the queue
collector and the heartbeat processes; each channel has a channel_sup
(one_for_all, 0) with its writer, limiter and channel. Nothing is restarted:
failures end the channel (and its helpers) or the whole connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

import actors
from supervision import supervisor
from tests.channel.conftest import Broker, client, params
from tests.waiting import hub_wait_until


@pytest.fixture
def conn(broker: Broker) -> Iterator[pika.BlockingConnection]:
    c = client(lambda: pika.BlockingConnection(params(broker, heartbeat=10)))
    yield c
    if c.is_open:
        client(c.close)


def children(broker: Broker, sup: Any) -> list[tuple[Any, Any]]:
    """``(id, pid)`` of a supervisor's children, last started first."""
    with broker.node.attached():
        return [(id_, pid) for id_, pid, _type, _mods in supervisor.which_children(sup)]


def alive(broker: Broker, pid: Any) -> bool:
    with broker.node.attached():
        return actors.is_process_alive(pid)


def channel_tree(broker: Broker, reader: Any, number: int) -> dict[str, Any]:
    """The channel_sup of channel `number` and its children by id."""
    pid = reader.channels[number].pid
    for _none, chsup in children(broker, reader.channel_sup_sup):
        kids = dict(children(broker, chsup))
        if kids.get("channel") == pid:
            return {"channel_sup": chsup, **kids}
    raise AssertionError(f"channel {number} is not under channel_sup_sup")


def wait_closed_by_broker(conn: pika.BlockingConnection) -> tuple[int, str]:
    def wait() -> tuple[int, str]:
        with pytest.raises(pex.ConnectionClosedByBroker) as info:
            for _ in range(20):
                conn.process_data_events(time_limit=1)
        return info.value.reply_code, info.value.reply_text
    return client(wait)


def test_a_connection_is_the_tree_of_rabbit_connection_sup(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    reader = broker.only_reader()
    assert children(broker, reader.sup) == [("reader", reader.me),
                                            ("helper_sup", reader.helper_sup)]
    assert [i for i, _ in children(broker, reader.helper_sup)] == [
        "channel_sup_sup", "heartbeat_receiver", "heartbeat_sender", "collector"]
    assert len(children(broker, reader.channel_sup_sup)) == 1
    tree = channel_tree(broker, reader, 1)
    assert [i for i, _ in children(broker, tree["channel_sup"])] == [
        "channel", "limiter", "writer"]


def test_without_heartbeat_there_are_no_heartbeat_processes(broker: Broker) -> None:
    c = client(lambda: pika.BlockingConnection(params(broker, heartbeat=0)))
    try:
        reader = broker.only_reader()
        assert [i for i, _ in children(broker, reader.helper_sup)] == [
            "channel_sup_sup", "collector"]
    finally:
        client(c.close)


def test_channel_close_takes_its_writer_and_limiter_and_nothing_else(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    ch1 = client(conn.channel)
    ch2 = client(conn.channel)
    reader = broker.only_reader()
    first = channel_tree(broker, reader, ch1.channel_number)
    client(ch1.close)
    hub_wait_until(lambda: not any(alive(broker, first[k]) for k in
                                   ("channel_sup", "channel", "writer", "limiter")),
                   "the first channel's supervisor and children stopped")
    assert len(children(broker, reader.channel_sup_sup)) == 1
    client(lambda: ch2.queue_declare("still-works", durable=True))
    assert alive(broker, reader.sup) and alive(broker, reader.me)


def test_a_crashing_channel_closes_its_connection_with_541_and_no_other(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    victim = broker.only_reader()
    tree = channel_tree(broker, victim, 1)
    other = client(lambda: pika.BlockingConnection(params(broker)))
    try:
        other_ch = client(other.channel)
        broker.node.send(tree["channel"], ("crash",))
        assert wait_closed_by_broker(conn) == (541, "INTERNAL_ERROR")
        hub_wait_until(lambda: not any(alive(broker, tree[k]) for k in
                                       ("channel_sup", "writer", "limiter")),
                       "the crashed channel's supervisor, writer and limiter stopped")
        hub_wait_until(lambda: not alive(broker, victim.sup), "the connection's tree stopped")
        client(lambda: other_ch.queue_declare("unaffected", durable=True))
        assert len(broker.listener.readers) == 1
    finally:
        client(other.close)


def test_a_dying_writer_stops_its_channel_and_the_reader_closes_with_541(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    tree = channel_tree(broker, broker.only_reader(), 1)
    with broker.node.attached():
        actors.exit(tree["writer"], "kill")
    assert wait_closed_by_broker(conn) == (541, "INTERNAL_ERROR")
    assert not alive(broker, tree["channel"]) and not alive(broker, tree["limiter"])


def test_client_close_stops_the_whole_connection_tree(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    reader = broker.only_reader()
    tree = channel_tree(broker, reader, 1)
    client(conn.close)
    pids = [reader.sup, reader.helper_sup, reader.channel_sup_sup, reader.collector,
            *tree.values()]
    hub_wait_until(lambda: not any(alive(broker, p) for p in pids), "every process stopped")


def test_stopping_the_listener_closes_every_connection_with_320(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    broker.listener.stop()
    assert wait_closed_by_broker(conn) == (
        320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")


def test_a_killed_reader_ends_the_connection_and_its_exclusive_queues(broker: Broker) -> None:
    conn = client(lambda: pika.BlockingConnection(params(broker)))
    ch = client(conn.channel)
    client(lambda: ch.queue_declare("mine", exclusive=True))
    reader = broker.only_reader()
    assert broker.backend.queue("/", "mine") is not None
    with broker.node.attached():
        actors.exit(reader.me, "kill")
    hub_wait_until(lambda: not alive(broker, reader.sup), "connection_sup stopped")
    hub_wait_until(lambda: broker.backend.queue("/", "mine") is None,
                   "the collector deleted the exclusive queue")

    def lost() -> None:
        with pytest.raises(pex.StreamLostError):
            for _ in range(20):
                conn.process_data_events(time_limit=1)
    client(lost)
