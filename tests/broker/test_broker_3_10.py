"""Three warren nodes with `rabbitmq_version: "3.10"`, seen through pika.

Each expectation is what a real RabbitMQ 3.10.8 answered to the same steps
(`tests/differential` runs them against both): a quorum queue declared without a
limit has none, so a message requeued 25 times is delivered a 26th time; a
requeued message goes to the back of the queue with `x-delivery-count` one higher;
`basic.get` always carries `x-delivery-count` while a consumer's first delivery
carries none; and a classic queue redeclared as a quorum queue is refused for a
type argument it does not have.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.broker.amqp_support import QQ, Amqp
from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl_json,
    eventually,
    plan,
    running_cluster,
    start_cluster,
    stop_all,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("cluster310"),
                         extra=["--rabbitmq-version", "3.10"]) as nodes:
        yield nodes


def header(props: Any) -> Any:
    return (props.headers or {}).get("x-delivery-count")


def test_the_broker_says_it_is_3_10_8(amqp: Amqp) -> None:
    conn = amqp.blocking(1)
    props = conn._impl.server_properties
    assert (props["product"], props["version"], props["platform"]) == (
        "RabbitMQ", "3.10.8", "Erlang/OTP 25.2.3")


def test_a_message_requeued_25_times_is_still_delivered(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue)
    ch = amqp.blocking(0).channel()
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"poison")
    ch.basic_qos(prefetch_count=1)
    seen: list[tuple[bool, Any]] = []

    def on_message(c: Any, method: Any, props: Any, _body: bytes) -> None:
        seen.append((bool(method.redelivered), header(props)))
        if len(seen) <= 25:
            c.basic_nack(method.delivery_tag, requeue=True)
        else:
            c.basic_ack(method.delivery_tag)
            c.stop_consuming()

    ch.basic_consume(queue, on_message)
    ch.connection.call_later(60, ch.stop_consuming)
    ch.start_consuming()
    assert seen == [(False, None), *((True, n) for n in range(1, 26))]
    assert ch.queue_declare(queue, passive=True).method.message_count == 0


def test_a_requeued_message_goes_to_the_back_counted(amqp: Amqp, queue: str) -> None:
    amqp.declare(queue)
    ch = amqp.blocking(1).channel()
    ch.confirm_delivery()
    for body in (b"a", b"b", b"c"):
        ch.basic_publish("", queue, body)
    got = []
    for _ in range(4):
        method, props, body = ch.basic_get(queue)
        got.append((body, method.redelivered, header(props)))
        ch.basic_nack(method.delivery_tag, requeue=True)
    assert got == [(b"a", False, 0), (b"b", False, 0), (b"c", False, 0), (b"a", True, 1)]


def test_a_classic_queue_redeclared_as_quorum(amqp: Amqp, queue: str) -> None:
    conn = amqp.blocking(0)
    conn.channel().queue_declare(queue, durable=True)
    amqp.queues.append(queue)
    conn.channel().queue_declare(queue, durable=True)  # the same again is fine
    with pytest.raises(pex.ChannelClosedByBroker) as info:
        conn.channel().queue_declare(queue, durable=True, arguments=QQ)
    assert (info.value.reply_code, info.value.reply_text) == (
        406, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '{queue}' "
             "in vhost '/': received the value 'quorum' of type 'longstr' but current is none")



def test_an_unknown_exchange_type_closes_the_connection(amqp: Amqp) -> None:
    conn = amqp.blocking(0)
    with pytest.raises(pex.ConnectionClosedByBroker) as info:
        conn.channel().exchange_declare("x-3-10-sideways", "sideways")
    assert (info.value.reply_code, info.value.reply_text) == (
        503, "COMMAND_INVALID - unknown exchange type 'sideways'")


def test_a_dead_letter_routed_by_the_queues_key_loses_its_cc_header(amqp: Amqp,
                                                                   queue: str) -> None:
    target = f"{queue}-dead"
    amqp.declare(target)
    dead_letter: dict[str, Any] = {"x-dead-letter-exchange": "",
                                   "x-dead-letter-routing-key": target}
    amqp.declare(queue, **dead_letter)
    ch = amqp.blocking(0).channel()
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"r1", pika.BasicProperties(headers={"CC": ["elsewhere"],
                                                                     "app": "probe"}))
    method, _props, _body = ch.basic_get(queue)
    ch.basic_reject(method.delivery_tag, requeue=False)

    def dead() -> Any:
        return ch.basic_get(target, auto_ack=True)

    got = eventually(lambda: (lambda r: r if r[0] is not None else None)(dead()))
    headers = got[1].headers
    assert "CC" not in headers and headers["app"] == "probe"
    assert headers["x-death"][0]["routing-keys"] == [queue, "elsewhere"]


def test_a_drained_queue_snapshots_its_state_and_comes_back_from_it(tmp_path: Path) -> None:
    """An emptied 3.10 queue hands Ra its state as a release cursor: every member
    snapshots, and after a restart of the whole cluster the queue recovers from that
    snapshot with what was published since."""
    nodes = plan(3, tmp_path)
    flags = ["--rabbitmq-version", "3.10"]
    try:
        start_cluster(nodes, extra=flags)
        conn = connect(nodes[0])
        ch = conn.channel()
        ch.queue_declare("drained", durable=True, arguments=QQ)
        # Ra snapshots only past 4096 entries since the last snapshot
        for n in range(4500):
            ch.basic_publish("", "drained", b"m%d" % n)
        got: list[bytes] = []

        def on_message(c: Any, _method: Any, _props: Any, body: bytes) -> None:
            got.append(body)
            if len(got) == 4500:
                c.stop_consuming()

        tag = ch.basic_consume("drained", on_message, auto_ack=True)
        ch.connection.call_later(120, ch.stop_consuming)
        ch.start_consuming()
        ch.basic_cancel(tag)
        assert got == [b"m%d" % n for n in range(4500)]
        ch.confirm_delivery()
        for n in range(3):
            ch.basic_publish("", "drained", b"after%d" % n)
        conn.close()

        def snapshotted() -> bool:
            rows = ctl_json(nodes[0].name, "quorum_status", "drained")
            return len(rows) == 3 and all((r["snapshot_index"] or 0) > 4500 for r in rows)

        assert eventually(snapshotted)
        stop_all(nodes)
        start_cluster(nodes, extra=flags)
        conn = connect(nodes[1])
        ch = conn.channel()
        got = eventually(lambda: ch.queue_declare("drained", passive=True).method
                         .message_count == 3)
        assert got
        assert [ch.basic_get("drained", auto_ack=True)[2] for _ in range(3)] == [
            b"after0", b"after1", b"after2"]
        conn.close()
    finally:
        stop_all(nodes)
