"""A durable classic queue on a node with a data dir survives a SIGKILL or a stop of
the node: its confirmed persistent messages come back in order, flagged redelivered
(as RabbitMQ flags them after an unclean stop), while transient messages and
non-durable queues are gone."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.broker.amqp_support import drain_gets
from tests.broker.broker_support import (
    BrokerProc,
    connect,
    launch,
    permit_transient_queues,
    plan,
    start_cluster,
    stop_all,
    wait_ready,
)


def _kill(b: BrokerProc, how: signal.Signals = signal.SIGKILL) -> None:
    assert b.proc is not None
    b.proc.send_signal(how)
    b.proc.wait(30)


def _restart(b: BrokerProc, cluster: list[BrokerProc]) -> None:
    """Start a killed member again with its old name, port, data dir and peers."""
    launch(b, ["--name", b.name, "--amqp-port", str(b.amqp_port), "--peers",
               ",".join(n.name for n in cluster), "--net-ticktime", "2",
               "--data-dir", str(b.data_dir), "--backend", "quorum"])
    wait_ready(b)


def _one_persistent_message(ch: Any, queue: str, body: bytes) -> None:
    """Declare `queue` a durable classic queue and publish `body` to it persistent,
    confirmed, so that the node has it on disk."""
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "classic"})
    ch.confirm_delivery()
    ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "stop"])
def test_confirmed_persistent_messages_survive_a_node_restart(tmp_path: Path,
                                                               how: signal.Signals) -> None:
    (node,) = plan(1, tmp_path)
    permit = permit_transient_queues(tmp_path)
    try:
        start_cluster([node], extra=permit)
        conn = connect(node)
        ch = conn.channel()
        ch.queue_declare("work", durable=True, arguments={"x-queue-type": "classic"})
        ch.queue_declare("scratch", durable=False)
        ch.confirm_delivery()
        persistent = pika.BasicProperties(delivery_mode=2)
        for i in range(10):
            ch.basic_publish("", "work", f"p{i}".encode(), persistent)  # returns on confirm
            ch.basic_publish("", "work", f"t{i}".encode())  # transient
        ch.basic_publish("", "scratch", b"s", persistent)
        # one message taken and acked before the kill, one delivered and never acked
        method, _props, body = ch.basic_get("work")
        assert body == b"p0"
        ch.basic_ack(method.delivery_tag)
        method, _props, body = ch.basic_get("work")
        assert body == b"t0"
        ch.basic_publish("", "work", b"p10", persistent)
        _kill(node, how)  # right after that confirm

        start_cluster([node], extra=permit)  # same name, port and data dir
        conn = connect(node)
        ch = conn.channel()
        assert drain_gets(ch, "work") == [(f"p{i}".encode(), True) for i in range(1, 11)]
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare("scratch", passive=True)
        assert err.value.reply_code == 404
        conn.close()
    finally:
        stop_all([node])


def test_a_deleted_durable_queue_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        _one_persistent_message(ch, "gone", b"x")
        ch.queue_delete("gone")
        ch.queue_declare("kept", durable=True, arguments={"x-queue-type": "classic"})
        _kill(node)

        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        assert ch.queue_declare("kept", passive=True).method.message_count == 0
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare("gone", passive=True)
        assert err.value.reply_code == 404
        conn.close()
    finally:
        stop_all([node])


def test_a_recovered_durable_queue_keeps_its_bindings(tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        ch.exchange_declare("orders", "direct", durable=True)
        ch.queue_declare("billing", durable=True, arguments={"x-queue-type": "classic"})
        ch.queue_bind("billing", "orders", "new")
        _kill(node)

        start_cluster([node])
        conn = connect(node)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("orders", "new", b"o1", pika.BasicProperties(delivery_mode=2),
                         mandatory=True)  # raises UnroutableError if the binding is gone
        assert drain_gets(ch, "billing") == [(b"o1", False)]
        conn.close()
    finally:
        stop_all([node])


def test_a_durable_queue_deleted_while_its_node_was_down_does_not_come_back(
        tmp_path: Path) -> None:
    nodes = plan(3, tmp_path)  # the metadata store keeps its majority without `home`
    home, other, _third = nodes
    try:
        start_cluster(nodes)
        conn = connect(home)
        ch = conn.channel()
        _one_persistent_message(ch, "orphan", b"x")
        _kill(home)

        conn = connect(other)
        conn.channel().queue_delete("orphan")
        _restart(home, nodes)
        conn = connect(home)
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare("orphan", passive=True)
        assert err.value.reply_code == 404
        assert not list((home.data_dir / "msg_stores" / "vhosts").iterdir())
        conn.close()
    finally:
        stop_all(nodes)


def test_an_operation_waiting_for_a_durable_queues_home_node_succeeds_once_it_is_back(
        tmp_path: Path) -> None:
    """RabbitMQ 4.x tries an operation on a queue whose home node is down again for
    about a minute: if the node restarts meanwhile, the operation waits until the
    queue is recovered there and then answers as usual."""
    nodes = plan(3, tmp_path)
    home, other, _third = nodes
    try:
        start_cluster(nodes)
        conn = connect(home)
        ch = conn.channel()
        _one_persistent_message(ch, "awaited", b"kept")
        _kill(home)

        answer: list[Any] = []

        def passive_declare() -> None:
            c = connect(other)
            try:
                answer.append(c.channel().queue_declare("awaited", passive=True).method)
            except BaseException as exc:  # reported by the test, not lost in the thread
                answer.append(exc)
            finally:
                if c.is_open:
                    c.close()
        waiting = threading.Thread(target=passive_declare)
        waiting.start()
        _restart(home, nodes)
        waiting.join(120)
        assert len(answer) == 1
        assert not isinstance(answer[0], BaseException), answer[0]
        assert answer[0].message_count == 1
    finally:
        stop_all(nodes)
