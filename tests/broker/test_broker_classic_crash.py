"""A classic queue whose process crashes is restarted on its node at once, keeping its
record and bindings, as RabbitMQ restarts it: a durable one comes back from its
message store with every confirmed persistent message, in order and flagged
redelivered, a non-durable one empty. Consumers on the dead process are cancelled."""

from __future__ import annotations

import signal
from pathlib import Path

import pika

from tests.broker.amqp_support import drain_gets
from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    eventually,
    permit_transient_queues,
    plan,
    start_cluster,
    stop_all,
)

PERSISTENT = pika.BasicProperties(delivery_mode=2)


def _crash(node: BrokerProc, queue: str) -> None:
    out = ctl(node.name, "crash_queue", queue)
    assert out.returncode == 0, out.stderr


def test_a_crashed_durable_queue_comes_back_with_its_messages_and_bindings(
        tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        ch.exchange_declare("orders", "direct", durable=True)
        ch.queue_declare("work", durable=True, arguments={"x-queue-type": "classic"})
        ch.queue_bind("work", "orders", "new")
        ch.confirm_delivery()
        for i in range(5):
            ch.basic_publish("orders", "new", f"p{i}".encode(), PERSISTENT)  # confirmed
        consumer = conn.channel()
        cancelled: list[str] = []
        consumer.add_on_cancel_callback(lambda frame: cancelled.append(
            frame.method.consumer_tag))
        consumer.basic_qos(prefetch_count=2)
        consumer.basic_consume("work", lambda *_: None, consumer_tag="c1")
        conn.process_data_events(time_limit=0.2)

        _crash(node, "work")

        def was_cancelled() -> bool:
            conn.process_data_events(time_limit=0.1)
            return cancelled == ["c1"]
        assert eventually(was_cancelled)
        assert ch.queue_declare("work", passive=True).method.message_count == 5
        ch.basic_publish("orders", "new", b"p5", PERSISTENT, mandatory=True)  # still bound
        assert drain_gets(ch, "work") == [(f"p{i}".encode(), True) for i in range(5)] + [
            (b"p5", False)]
        conn.close()
    finally:
        stop_all([node])


def test_a_crashed_durable_queue_keeps_its_files_over_a_node_restart(tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        ch.queue_declare("work", durable=True, arguments={"x-queue-type": "classic"})
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "work", f"p{i}".encode(), PERSISTENT)
        _crash(node, "work")
        ch.queue_declare("work", passive=True)  # a lookup after the crash
        assert node.proc is not None
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(30)

        start_cluster([node])  # same name, port and data dir
        conn = connect(node)
        ch = conn.channel()
        assert drain_gets(ch, "work") == [(f"p{i}".encode(), True) for i in range(3)]
        conn.close()
    finally:
        stop_all([node])


def test_a_crashed_non_durable_queue_comes_back_empty_with_its_bindings(
        tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        start_cluster([node], extra=permit_transient_queues(tmp_path))
        conn = connect(node)
        ch = conn.channel()
        ch.queue_declare("scratch", durable=False)
        ch.queue_bind("scratch", "amq.direct", "k")
        ch.confirm_delivery()
        ch.basic_publish("", "scratch", b"lost", PERSISTENT)
        _crash(node, "scratch")

        assert ch.queue_declare("scratch", passive=True).method.message_count == 0
        ch.basic_publish("amq.direct", "k", b"after", PERSISTENT, mandatory=True)
        assert drain_gets(ch, "scratch") == [(b"after", False)]
        conn.close()
    finally:
        stop_all([node])
