"""Classic queues on a real node: the patterns ordinary client code uses, with pika.

A node started as `warren` is started (the default `rabbit` backend, default queue type
`classic`) runs every declare without `x-queue-type` as a classic queue
process: exclusive, auto-delete, non-durable, server-named and plain durable
queues alike, and `x-queue-type: classic` declares too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from tests.broker.amqp_support import closed_by_broker, pump_until
from tests.broker.broker_support import BrokerProc, connect, eventually, running_cluster


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    """A node that permits transient non-exclusive queues, as an operator whose clients
    declare them does on 4.3 (which denies them by default)."""
    base = tmp_path_factory.mktemp("classic")
    cfg = base / "node.json"
    cfg.write_text(json.dumps({"amqp": {
        "deprecated_features_permit": {"transient_nonexcl_queues": True}}}))
    with running_cluster(base / "nodes", count=1, extra=["--config", str(cfg)]) as nodes:
        yield nodes[0]


@pytest.fixture
def conns(node: BrokerProc) -> Iterator[list[pika.BlockingConnection]]:
    opened: list[pika.BlockingConnection] = []
    yield opened
    for c in opened:
        if c.is_open:
            c.close()


def open_conn(node: BrokerProc, conns: list[pika.BlockingConnection]) -> Any:
    c = connect(node)
    conns.append(c)
    return c


def missing(conn: Any, queue: str) -> bool:
    ch = conn.channel()
    return closed_by_broker(lambda: ch.queue_declare(queue, passive=True)) == (
        404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")


def test_rpc_over_an_exclusive_server_named_reply_queue(node: BrokerProc,
                                                        conns: list[Any]) -> None:
    server = open_conn(node, conns).channel()
    server.queue_declare("rpc_requests", arguments={"x-queue-type": "classic"})

    def serve(ch: Any, method: Any, props: Any, body: bytes) -> None:
        ch.basic_publish("", props.reply_to, body.upper(),
                         pika.BasicProperties(correlation_id=props.correlation_id))
        ch.basic_ack(method.delivery_tag)
    server.basic_consume("rpc_requests", serve)

    client_conn = open_conn(node, conns)
    ch = client_conn.channel()
    reply_to = ch.queue_declare("", exclusive=True).method.queue
    assert reply_to.startswith("amq.gen-")
    replies: list[tuple[str, bytes]] = []
    ch.basic_consume(reply_to, lambda _c, _m, p, b: replies.append((p.correlation_id, b)),
                     auto_ack=True)
    corr = str(uuid.uuid4())
    ch.basic_publish("", "rpc_requests", b"ping",
                     pika.BasicProperties(reply_to=reply_to, correlation_id=corr))
    for _ in range(200):
        server.connection.process_data_events(time_limit=0.05)
        client_conn.process_data_events(time_limit=0.05)
        if replies:
            break
    assert replies == [(corr, b"PING")]
    server.queue_delete("rpc_requests")


def test_an_auto_delete_queue_goes_when_its_last_consumer_cancels(
        node: BrokerProc, conns: list[Any]) -> None:
    conn = open_conn(node, conns)
    ch = conn.channel()
    ch.queue_declare("classic_ad", auto_delete=True)
    first = ch.basic_consume("classic_ad", lambda *a: None)
    second = ch.basic_consume("classic_ad", lambda *a: None)
    ch.basic_cancel(first)
    assert ch.queue_declare("classic_ad", passive=True).method.consumer_count == 1
    ch.basic_cancel(second)
    assert missing(conn, "classic_ad")


def test_an_exclusive_queue_goes_when_its_connection_closes(
        node: BrokerProc, conns: list[Any]) -> None:
    owner = open_conn(node, conns)
    owner.channel().queue_declare("classic_excl", exclusive=True)
    other = open_conn(node, conns)
    ch = other.channel()
    assert closed_by_broker(lambda: ch.queue_declare("classic_excl", passive=True)) == (
        405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue "
        "'classic_excl' in vhost '/'. It could be originally declared on another "
        "connection or the exclusive property value does not match that of the original "
        "declaration.")
    owner.close()
    assert missing(other, "classic_excl")


def test_reject_with_requeue_returns_a_message_to_its_place_redelivered(
        node: BrokerProc, conns: list[Any]) -> None:
    ch = open_conn(node, conns).channel()
    ch.confirm_delivery()
    ch.queue_declare("classic_requeue", durable=False)
    for body in (b"1", b"2", b"3"):
        ch.basic_publish("", "classic_requeue", body)
    first = ch.basic_get("classic_requeue")
    ch.basic_reject(first[0].delivery_tag, requeue=True)
    got = []
    for _ in range(3):
        method, _props, body = ch.basic_get("classic_requeue", auto_ack=True)
        got.append((body, method.redelivered))
    assert got == [(b"1", True), (b"2", False), (b"3", False)]
    ch.queue_delete("classic_requeue")


def test_x_message_ttl_expires_messages_nobody_consumed(
        node: BrokerProc, conns: list[Any]) -> None:
    conn = open_conn(node, conns)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("classic_ttl", arguments={"x-queue-type": "classic",
                                               "x-message-ttl": 300})
    ch.basic_publish("", "classic_ttl", b"stale")
    assert eventually(lambda: ch.queue_declare(
        "classic_ttl", passive=True).method.message_count == 0), "the message did not expire"
    ch.basic_publish("", "classic_ttl", b"fresh")
    ch2 = conn.channel()
    got: list[bytes] = []
    ch2.basic_consume("classic_ttl", lambda _c, _m, _p, b: got.append(b), auto_ack=True)
    pump_until(conn, lambda: got, "the fresh message")
    assert got == [b"fresh"]
    ch.queue_delete("classic_ttl")


def test_a_durable_declare_without_a_type_is_a_classic_queue(
        node: BrokerProc, conns: list[Any]) -> None:
    ch = open_conn(node, conns).channel()
    ch.queue_declare("classic_default", durable=True)
    assert ch.queue_declare("classic_default", durable=True, arguments={
        "x-queue-type": "classic"}).method.queue == "classic_default"
    assert closed_by_broker(lambda: ch.queue_declare(
        "classic_default", durable=True, arguments={"x-queue-type": "quorum"})) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
        "'classic_default' in vhost '/': received 'quorum' but current is 'classic'")
    open_conn(node, conns).channel().queue_delete("classic_default")


def test_a_classic_queue_redeclared_as_another_type_is_inequivalent(
        node: BrokerProc, conns: list[Any]) -> None:
    conn = open_conn(node, conns)
    conn.channel().queue_declare("classic_retype", durable=True,
                                 arguments={"x-queue-type": "classic"})
    ch = conn.channel()
    assert ch.queue_declare("classic_retype", durable=True, arguments={
        "x-queue-type": "classic"}).method.queue == "classic_retype"
    inequivalent = (406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
                    "'classic_retype' in vhost '/': received 'quorum' but current is 'classic'")
    fresh = conn.channel()
    assert closed_by_broker(lambda: fresh.queue_declare(
        "classic_retype", durable=True, arguments={"x-queue-type": "quorum"})) == inequivalent
    # without a type the node's default (classic) is filled in and compared: equivalent
    assert conn.channel().queue_declare("classic_retype", durable=True).method.queue == (
        "classic_retype")
    conn.channel().queue_delete("classic_retype")


def test_a_classic_queue_dead_letters_into_a_quorum_queue(node: BrokerProc,
                                                          conns: list[Any]) -> None:
    ch = open_conn(node, conns).channel()
    ch.confirm_delivery()
    ch.queue_declare("classic_dlq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_declare("classic_dl_src", arguments={"x-dead-letter-exchange": "",
                                                  "x-dead-letter-routing-key": "classic_dlq"})
    ch.basic_publish("", "classic_dl_src", b"bad")
    method = ch.basic_get("classic_dl_src")[0]
    ch.basic_nack(method.delivery_tag, requeue=False)
    def dead_letter() -> Any:
        method, props, body = ch.basic_get("classic_dlq", auto_ack=True)
        return None if method is None else (props, body)
    got = eventually(dead_letter)
    assert got is not None, "no dead letter in the quorum queue"
    props, body = got
    assert body == b"bad"
    assert [(d["queue"], d["reason"]) for d in props.headers["x-death"]] == [
        ("classic_dl_src", "rejected")]
    ch.queue_delete("classic_dl_src")
    ch.queue_delete("classic_dlq")


def test_a_quorum_queue_dead_letters_into_a_classic_queue(node: BrokerProc,
                                                          conns: list[Any]) -> None:
    ch = open_conn(node, conns).channel()
    ch.confirm_delivery()
    ch.queue_declare("classic_qq_dlq", arguments={"x-queue-type": "classic"})
    ch.queue_declare("classic_qq_src", durable=True, arguments={
        "x-queue-type": "quorum", "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "classic_qq_dlq"})
    ch.basic_publish("", "classic_qq_src", b"bad")
    method = eventually(lambda: ch.basic_get("classic_qq_src")[0])
    assert method is not None
    ch.basic_nack(method.delivery_tag, requeue=False)

    def dead_letter() -> Any:
        got, props, body = ch.basic_get("classic_qq_dlq", auto_ack=True)
        return None if got is None else (props, body)
    got = eventually(dead_letter)
    assert got is not None, "no dead letter in the classic queue"
    props, body = got
    assert body == b"bad"
    assert [(d["queue"], d["reason"]) for d in props.headers["x-death"]] == [
        ("classic_qq_src", "rejected")]
    ch.queue_delete("classic_qq_src")
    ch.queue_delete("classic_qq_dlq")
