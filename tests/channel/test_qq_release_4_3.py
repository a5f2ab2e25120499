"""What the channel and queue declaration do for a RabbitMQ 4.3 quorum queue
(machine 8), next to 4.2 (machine 7):

- the queue arguments 4.3 adds reach the machine's config:
  `x-consumer-disconnected-timeout` and the `x-delayed-retry-*` settings (the
  policy keys of the same names too); 4.2 passes neither;
- a 4.3 consumer is told its timeout when it subscribes (its own
  `x-consumer-timeout`, else the queue's, else the node's) and the queue times it
  out: a client that understands `basic.cancel` gets one and keeps its channel, any
  other client's channel is closed with 406 and the timeout given as -1;
- up to 4.2 the channel times consumers out itself and the queue is told nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from actors import Node
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.queue_types.consumer_timeout import UNSET_TIMEOUT_MS, consumer_timeout
from channel.queue_types.quorum.qq_cluster import fifo_config
from channel.queue_types.quorum.qq_registry import LocalRegistry
from channel.queue_types.quorum.qq_release_config import delayed_retry, release_machine_config
from channel.queue_types.quorum.quorum_queue import QuorumBackend
from ra import api
from releases import RELEASES
from tests.channel.conftest import client
from tests.channel.test_channel_consumer_timeout import closed_with

QQ = {"x-queue-type": "quorum"}
TEXT = ("PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. "
        "Timeout value used: {} ms. This timeout value can be configured, see consumers "
        "doc guide to learn more")


# ---------------------------------------------------------------- config keys


def test_4_2_passes_no_4_3_keys_to_the_machine() -> None:
    args = {"x-consumer-disconnected-timeout": 5, "x-delayed-retry-type": "all",
            "x-delayed-retry-min": 10}
    assert release_machine_config(args, {}, RELEASES["4.2"]) == {}
    config = fifo_config("/", "q", args, 0, RELEASES["4.2"])
    assert "consumer_disconnected_timeout" not in config and "delayed_retry" not in config


def test_4_3_passes_the_disconnected_timeout_and_delayed_retry() -> None:
    r43 = RELEASES["4.3"]
    assert release_machine_config({}, {}, r43) == {"consumer_disconnected_timeout": 60_000,
                                                   "delayed_retry": "disabled"}
    args = {"x-consumer-disconnected-timeout": 5000, "x-delayed-retry-type": "failed",
            "x-delayed-retry-min": 100, "x-delayed-retry-max": 2000}
    assert release_machine_config(args, {}, r43) == {
        "consumer_disconnected_timeout": 5000, "delayed_retry": ("failed", 100, 2000)}
    # the smaller of argument and policy; the policy's type wins over the argument's
    policy = {"consumer-disconnected-timeout": 3000, "delayed-retry-type": "all",
              "delayed-retry-max": 500}
    assert release_machine_config(args, policy, r43) == {
        "consumer_disconnected_timeout": 3000, "delayed_retry": ("all", 100, 500)}


@pytest.mark.parametrize(("args", "expected"), [
    ({"x-delayed-retry-type": "returned", "x-delayed-retry-min": 100}, ("returned", 100, 100)),
    ({"x-delayed-retry-type": "all"}, "disabled"),  # no min
    ({"x-delayed-retry-type": "all", "x-delayed-retry-min": 0}, "disabled"),
    ({"x-delayed-retry-type": "disabled", "x-delayed-retry-min": 100}, "disabled"),
    ({"x-delayed-retry-type": "sometimes", "x-delayed-retry-min": 100}, "disabled"),
    ({"x-delayed-retry-min": 100}, "disabled"),
])
def test_delayed_retry_is_on_only_with_a_type_and_a_positive_minimum(
        args: dict[str, Any], expected: Any) -> None:
    assert delayed_retry(args, {}) == expected


def test_a_4_3_consumers_timeout_is_its_own_else_the_queues_else_the_nodes() -> None:
    assert consumer_timeout({"x-consumer-timeout": 50}, {"x-consumer-timeout": 70},
                            {"consumer-timeout": 60}, 1000) == 50
    assert consumer_timeout({}, {"x-consumer-timeout": 70}, {"consumer-timeout": 60},
                            1000) == 60
    assert consumer_timeout({}, {}, {}, 1000) == 1000
    assert consumer_timeout({}, {}, {}, None) == UNSET_TIMEOUT_MS


# ------------------------------------------------------------ a node with pika


def _start(node: Node, series: str) -> tuple[Listener, LocalRegistry]:
    release = RELEASES[series]
    registry = LocalRegistry([node.name], release=release)
    backend = QuorumBackend(node, registry, default_queue_type="classic")
    ctx = BrokerContext(node, backend, config=Config(
        silent_close_delay_ms=20, closing_timeout_ms=2000, consumer_timeout=300,
        channel_tick_interval=20, release=release))
    backend.on_deleted = ctx.topology.remove_queue
    return Listener(ctx, "127.0.0.1", 0).start(), registry


@pytest.fixture(params=["4.2", "4.3"])
def series(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def quorum_node(lone_node: Node, series: str) -> Iterator[tuple[Node, Listener, LocalRegistry]]:
    listener, registry = _start(lone_node, series)
    yield lone_node, listener, registry
    listener.stop()
    with lone_node.attached():
        for record in registry.list():
            registry.delete(record.vhost, record.name)


def _machine_state(node: Node, registry: LocalRegistry, queue: str) -> Any:
    record = registry.lookup("/", queue)
    assert record is not None
    with node.attached():
        result = api.local_query(record.servers[0], lambda s: s, 5000)
    assert result[0] == "ok"
    return result[1][1]


def _connect(listener: Listener, **kwargs: Any) -> pika.BlockingConnection:
    return client(lambda: pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", listener.port, connection_attempts=1, **kwargs)))


def test_the_4_3_arguments_reach_the_machine_of_a_4_3_queue(
        quorum_node: tuple[Node, Listener, LocalRegistry], series: str) -> None:
    node, listener, registry = quorum_node
    conn = _connect(listener)
    args = {**QQ, "x-consumer-disconnected-timeout": 5000, "x-delayed-retry-type": "all",
            "x-delayed-retry-min": 100, "x-delayed-retry-max": 1000}
    client(lambda: conn.channel().queue_declare("args", durable=True, arguments=args))
    client(conn.close)
    cfg = _machine_state(node, registry, "args").cfg
    if series == "4.3":
        assert (cfg.consumer_disconnected_timeout, cfg.delayed_retry) == (
            5000, ("all", 100, 1000))
    else:  # machine 7 has neither
        assert (cfg.consumer_disconnected_timeout, cfg.delayed_retry) == (None, None)


def _consume_one_unacked(conn: pika.BlockingConnection, queue: str,
                         consumer_args: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """Publish one message and consume it without acking; the tags the broker cancels."""
    cancelled: list[str] = []

    def run() -> Any:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True, arguments=QQ)
        ch.basic_publish("", queue, b"m")
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        got = threading.Event()
        ch.basic_consume(queue, lambda *_a: got.set(), consumer_tag="slow",
                         arguments=consumer_args)
        while not got.is_set():
            conn.process_data_events(time_limit=0.05)
        return ch
    return client(run), cancelled


def test_the_consumer_is_told_its_timeout_only_in_4_3(
        quorum_node: tuple[Node, Listener, LocalRegistry], series: str) -> None:
    node, listener, registry = quorum_node
    conn = _connect(listener)
    _consume_one_unacked(conn, "told", {"x-consumer-timeout": 60_000})
    (consumer,) = _machine_state(node, registry, "told").consumers.values()
    assert consumer.cfg.meta.get("timeout") == (60_000 if series == "4.3" else None)
    client(conn.close)


def test_a_consumer_past_its_timeout_is_cancelled_by_a_4_3_queue_and_keeps_its_channel(
        quorum_node: tuple[Node, Listener, LocalRegistry], series: str) -> None:
    _node, listener, _registry = quorum_node
    conn = _connect(listener)
    ch, cancelled = _consume_one_unacked(conn, "slow-q")
    reason = closed_with(conn, ch, 2.0)  # returns early only if the channel closes
    if series == "4.2":  # the channel's own tick: 406 naming the node's timeout
        assert isinstance(reason, pex.ChannelClosedByBroker)
        assert (reason.reply_code, reason.reply_text) == (406, TEXT.format(300))
        assert cancelled == []
    else:  # the queue released the message and the client was sent basic.cancel
        assert reason is None and ch.is_open
        assert cancelled == ["slow"]
    ch2 = client(conn.channel)
    method, _props, body = client(lambda: ch2.basic_get("slow-q", auto_ack=True))
    assert body == b"m" and method.redelivered
    client(conn.close)


def test_a_4_3_client_without_cancel_notify_loses_its_channel(lone_node: Node) -> None:
    listener, registry = _start(lone_node, "4.3")
    try:
        caps = {"publisher_confirms": True, "basic.nack": True,
                "consumer_cancel_notify": False}
        conn = _connect(listener, client_properties={"capabilities": caps})
        ch, cancelled = _consume_one_unacked(conn, "old-client")
        reason = closed_with(conn, ch, 2.0)
        assert isinstance(reason, pex.ChannelClosedByBroker)
        assert (reason.reply_code, reason.reply_text) == (406, TEXT.format(-1))
        assert cancelled == []
        client(conn.close)
    finally:
        listener.stop()
        with lone_node.attached():
            registry.delete("/", "old-client")


def test_a_message_got_and_held_past_the_queues_timeout_closes_the_channel(
        quorum_node: tuple[Node, Listener, LocalRegistry], series: str) -> None:
    """basic.get has no consumer to cancel: 4.3's queue releases the message and the
    channel closes with the timeout given as -1; 4.2's channel closes on its tick."""
    _node, listener, _registry = quorum_node
    conn = _connect(listener)

    def get_without_ack() -> Any:
        ch = conn.channel()
        ch.queue_declare("got", durable=True, arguments={**QQ, "x-consumer-timeout": 200})
        ch.confirm_delivery()
        ch.basic_publish("", "got", b"m")  # confirmed: the queue holds it
        method, _props, _body = ch.basic_get("got")
        assert method is not None
        return ch
    ch = client(get_without_ack)
    reason = closed_with(conn, ch, 2.0)
    assert isinstance(reason, pex.ChannelClosedByBroker)
    assert (reason.reply_code, reason.reply_text) == (
        406, TEXT.format(-1 if series == "4.3" else 200))
    ch2 = client(conn.channel)
    method, _props, body = client(lambda: ch2.basic_get("got", auto_ack=True))
    assert body == b"m" and method.redelivered
    client(conn.close)
