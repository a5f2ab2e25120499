"""credit_flow from a channel to a classic queue process: a queue that cannot keep up
blocks the channels publishing to it (400 publishes ahead), and through them their
readers, until it catches up; `list_channels` and `list_connections` say `flow`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gevent.event
import pika
import pytest

import actors
from actors import Node
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.queue_types.classic.classic_queue import ClassicBackend
from classic import effects as e
from classic.queue_sup import start_queue_sup
from tests.channel.conftest import Broker, client, params
from tests.waiting import hub_wait_until


@pytest.fixture
def gate() -> gevent.event.Event:
    """While cleared, the queue process stops at its next persistent message."""
    event = gevent.event.Event()
    event.set()
    return event


@pytest.fixture
def broker(node: Node, config: Config, gate: gevent.event.Event) -> Iterator[Broker]:
    with node.attached():
        result = start_queue_sup()
        assert result[0] == "ok", result
        actors.unlink(result[1])

    def slow_store_write(messages: tuple[e.Delivery, ...]) -> tuple[int, ...]:
        gate.wait()
        return tuple(m.msg_id for m in messages)

    backend = ClassicBackend(node)
    backend.env = replace(backend.env, store_write=slow_store_write)
    ctx = BrokerContext(node, backend, config=config)  # type: ignore[arg-type]
    backend.on_deleted = ctx.topology.remove_queue
    listener = Listener(ctx, "127.0.0.1", 0).start()
    yield Broker(node, ctx, listener, backend)  # type: ignore[arg-type]
    gate.set()
    listener.stop()


def _channel_state(node: Node, reader: Any) -> Any:
    (ch,) = reader.channels.values()
    with node.attached():
        tag = actors.make_ref()
        actors.send(ch.pid, ("info", actors.self(), tag))
        reply = actors.receive(5000, match=lambda m: isinstance(m, tuple) and m[0] == tag)
    assert reply is not actors.TIMEOUT
    return reply[1]["state"]


def test_a_slow_classic_queue_blocks_its_publishers_channel_and_reader(
        broker: Broker, gate: gevent.event.Event) -> None:
    conn = client(lambda: pika.BlockingConnection(params(broker)))

    def setup() -> Any:
        ch = conn.channel()
        ch.queue_declare("slow", durable=True)
        return ch
    ch = client(setup)
    gate.clear()

    def publish() -> None:
        for i in range(1000):
            ch.basic_publish("", "slow", str(i).encode(), pika.BasicProperties(delivery_mode=2))
    client(publish)
    reader = broker.only_reader()
    hub_wait_until(lambda: reader.state == "blocked", "reader blocked by credit")
    # the channel stops after 400 publishes to the queue; it had granted the reader 400
    # more by then, so the reader stops after 800
    assert reader.publishes_dispatched == 800
    assert reader.info()["state"] == "flow"
    assert _channel_state(broker.node, reader) == "flow"

    gate.set()
    hub_wait_until(lambda: reader.publishes_dispatched == 1000, "all publishes dispatched")
    backend: ClassicBackend = broker.backend  # type: ignore[assignment]

    def ready() -> int:
        with broker.node.attached():
            from actors import gen_server
            record = backend.lookup("/", "slow")
            assert record is not None
            return int(gen_server.call(record.pid, ("info",))["messages_ready"])
    hub_wait_until(lambda: ready() == 1000, "every message enqueued")
    client(conn.close)


def test_a_channel_blocked_by_a_queue_that_dies_is_released(
        broker: Broker, gate: gevent.event.Event) -> None:
    conn = client(lambda: pika.BlockingConnection(params(broker)))

    def setup() -> Any:
        ch = conn.channel()
        ch.queue_declare("doomed", durable=True)
        return ch
    ch = client(setup)
    gate.clear()

    def publish() -> None:
        for i in range(1000):
            ch.basic_publish("", "doomed", str(i).encode(),
                             pika.BasicProperties(delivery_mode=2))
    client(publish)
    reader = broker.only_reader()
    hub_wait_until(lambda: reader.state == "blocked", "reader blocked by credit")
    backend: ClassicBackend = broker.backend  # type: ignore[assignment]
    record = backend.lookup("/", "doomed")
    assert record is not None
    with broker.node.attached():
        actors.exit(record.pid, "kill")
    hub_wait_until(lambda: reader.publishes_dispatched == 1000, "all publishes dispatched")
    client(conn.close)
