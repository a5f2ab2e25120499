"""pika against warren's listener on 127.0.0.1: the AMQP 0-9-1 surface end to end."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.channel.conftest import Broker, client, in_hub, params
from tests.waiting import hub_wait_until


def test_wrong_password_is_refused_with_403(broker: Broker) -> None:
    def connect() -> BaseException:
        creds = pika.PlainCredentials("guest", "wrong")
        with pytest.raises(pex.ProbableAuthenticationError) as info:
            pika.BlockingConnection(params(broker, credentials=creds))
        return info.value
    error = client(connect)
    # pika reports the broker's connection.close inside its own error text
    assert error.args[0] == (
        "ConnectionClosedByBroker: (403) 'ACCESS_REFUSED - Login was refused using "
        "authentication mechanism PLAIN. For details see the broker logfile.'")


def test_unknown_vhost_is_530(broker: Broker) -> None:
    def connect() -> BaseException:
        with pytest.raises(pex.ProbableAccessDeniedError) as info:
            pika.BlockingConnection(params(broker, virtual_host="nope"))
        return info.value
    error = client(connect)
    assert error.args[0] == ("ConnectionClosedByBroker: (530) \"NOT_ALLOWED - access to vhost "
                             "'nope' refused for user 'guest'\"")


def test_publish_with_confirms_routes_and_returns_unroutable_mandatory(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    def work() -> tuple[int, Any]:
        ch = conn.channel()
        ch.exchange_declare("orders", "topic")
        ch.queue_declare("eu", durable=True)
        ch.queue_bind("eu", "orders", "order.eu.*")
        ch.confirm_delivery()
        ch.basic_publish("orders", "order.eu.new", b"m1",
                         pika.BasicProperties(headers={"n": 1}), mandatory=True)
        with pytest.raises(pex.UnroutableError) as info:
            ch.basic_publish("orders", "order.us.new", b"m2", mandatory=True)
        ch.basic_publish("orders", "order.us.new", b"m3")  # unroutable, not mandatory: acked
        count = ch.queue_declare("eu", passive=True).method.message_count
        return count, info.value.messages[0]
    count, returned = client(work)
    assert count == 1
    assert returned.method.reply_code == 312 and returned.method.reply_text == "NO_ROUTE"
    assert (returned.method.exchange, returned.method.routing_key) == ("orders", "order.us.new")
    assert returned.body == b"m2"
    q = broker.backend.queue("/", "eu")
    assert q is not None
    assert q.ready[0].message.content.properties().headers == {"n": 1}


def test_each_publish_keeps_its_own_properties_and_a_repeat_is_decoded_once(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    def work() -> None:
        ch = conn.channel()
        ch.exchange_declare("paint", "headers")
        for colour in ("red", "blue"):
            ch.queue_declare(colour, durable=True)
            ch.queue_bind(colour, "paint", arguments={"colour": colour})
        ch.confirm_delivery()
        for colour in ("red", "red", "blue", "red"):
            ch.basic_publish("paint", "", colour.encode(),
                             pika.BasicProperties(delivery_mode=2, headers={"colour": colour}))
    client(work)
    red, blue = broker.backend.queue("/", "red"), broker.backend.queue("/", "blue")
    assert red is not None and blue is not None
    assert [r.message.content.body for r in red.ready] == [b"red"] * 3
    assert [r.message.content.body for r in blue.ready] == [b"blue"]
    props = [r.message.decoded_properties() for r in red.ready]
    assert [p.headers for p in props] == [{"colour": "red"}] * 3
    assert blue.ready[0].message.decoded_properties().headers == {"colour": "blue"}
    # the same raw properties twice in a row: decoded once, shared read-only
    assert props[0] is props[1]
    assert props[2] is not props[1]


def test_consume_with_manual_ack_redelivers_what_was_not_acked(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    def work() -> list[tuple[bytes, bool]]:
        ch = conn.channel()
        ch.queue_declare("work", durable=True)
        for i in range(3):
            ch.basic_publish("", "work", f"m{i}".encode())
        ch.basic_qos(prefetch_count=10)
        seen: list[tuple[bytes, bool]] = []
        for method, _props, body in ch.consume("work", inactivity_timeout=5):
            assert method is not None
            seen.append((body, method.redelivered))
            if body == b"m1" and not method.redelivered:
                ch.basic_nack(method.delivery_tag, requeue=True)
            else:
                ch.basic_ack(method.delivery_tag)
            if len(seen) == 4:
                break
        ch.cancel()
        return seen
    seen = client(work)
    assert seen == [(b"m0", False), (b"m1", False), (b"m2", False), (b"m1", True)]
    q = broker.backend.queue("/", "work")
    assert q is not None and not q.ready and not q.checked_out


def test_basic_get_and_ack_of_unknown_tag_closes_only_that_channel(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    def work() -> tuple[Any, Any, int]:
        ch = conn.channel()
        ch.queue_declare("g", durable=True)
        ch.basic_publish("", "g", b"one")
        empty_or_msg = ch.basic_get("g")
        bad = conn.channel()
        bad.basic_ack(99)
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            bad.queue_declare("g", passive=True)
        count = ch.queue_declare("g", passive=True).method.message_count
        return empty_or_msg, info.value, count
    got, closed, count = client(work)
    assert got[0].message_count == 0 and got[2] == b"one"
    assert (closed.reply_code, closed.reply_text) == (
        406, "PRECONDITION_FAILED - unknown delivery tag 99")
    assert conn.is_open
    assert count == 0


def test_soft_errors_from_declares(conn: pika.BlockingConnection) -> None:
    def work() -> list[tuple[int, str]]:
        out = []
        for action in (
            lambda ch: ch.exchange_declare("missing", passive=True),
            lambda ch: ch.exchange_declare("amq.direct", "fanout", durable=True),
            lambda ch: ch.queue_bind("nope", "amq.direct", "k"),
            lambda ch: ch.basic_publish("no-such-exchange", "k", b"x") or ch.basic_qos(),
        ):
            ch = conn.channel()
            with pytest.raises(pex.ChannelClosedByBroker) as info:
                action(ch)
            out.append((info.value.reply_code, info.value.reply_text))
        return out
    assert client(work) == [
        (404, "NOT_FOUND - no exchange 'missing' in vhost '/'"),
        (406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'amq.direct' in "
              "vhost '/': received 'fanout' but current is 'direct'"),
        (404, "NOT_FOUND - no queue 'nope' in vhost '/'"),
        (404, "NOT_FOUND - no exchange 'no-such-exchange' in vhost '/'"),
    ]


def test_quorum_type_is_not_pretended_by_the_memory_backend(
        conn: pika.BlockingConnection) -> None:
    def work() -> tuple[int, str]:
        ch = conn.channel()
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            ch.queue_declare("qq", durable=True, arguments={"x-queue-type": "quorum"})
        return info.value.reply_code, info.value.reply_text
    code, text = client(work)
    assert code == 406 and "unsupported queue type 'quorum'" in text


def test_transactions_commit_and_rollback(broker: Broker, conn: pika.BlockingConnection) -> None:
    def work() -> tuple[int, int]:
        ch = conn.channel()
        ch.queue_declare("tx", durable=True)
        ch.tx_select()
        ch.basic_publish("", "tx", b"a")
        ch.tx_rollback()
        before = ch.queue_declare("tx", passive=True).method.message_count
        ch.basic_publish("", "tx", b"b")
        ch.tx_commit()
        after = ch.queue_declare("tx", passive=True).method.message_count
        return before, after
    assert client(work) == (0, 1)


def test_hard_error_closes_the_connection(conn: pika.BlockingConnection) -> None:
    def work() -> tuple[int, str]:
        ch = conn.channel()
        with pytest.raises(pex.ConnectionClosedByBroker) as info:
            ch.basic_qos(prefetch_size=5)
        return info.value.reply_code, info.value.reply_text
    assert client(work) == (540, "NOT_IMPLEMENTED - prefetch_size!=0 (5)")


def test_channel_crash_closes_the_connection_with_541(broker: Broker,
                                                      conn: pika.BlockingConnection) -> None:
    client(conn.channel)
    reader = broker.only_reader()
    (ch,) = reader.channels.values()
    broker.node.send(ch.pid, ("crash",))

    def wait_close() -> tuple[int, str]:
        with pytest.raises(pex.ConnectionClosedByBroker) as info:
            conn.process_data_events(time_limit=5)
            conn.process_data_events(time_limit=5)
        return info.value.reply_code, info.value.reply_text
    assert client(wait_close) == (541, "INTERNAL_ERROR")


@pytest.mark.parametrize(("asked", "negotiated"), [(None, 60), (7, 7), (0, 0)])
def test_heartbeat_negotiation(broker: Broker, asked: int | None, negotiated: int) -> None:
    c = client(lambda: pika.BlockingConnection(params(broker, heartbeat=asked)))
    try:
        assert broker.only_reader().heartbeat == negotiated
        assert (broker.only_reader().wire.frame_max, broker.only_reader().channel_max) == (
            131072, 2047)
    finally:
        client(c.close)


def test_alarm_blocks_a_publishing_connection_and_pika_is_told(broker: Broker) -> None:
    events: list[Any] = []

    def work() -> list[Any]:
        c = pika.BlockingConnection(params(broker))
        c.add_on_connection_blocked_callback(lambda _c, m: events.append(m.method.reason))
        c.add_on_connection_unblocked_callback(lambda _c, m: events.append("unblocked"))
        ch = c.channel()
        ch.queue_declare("alarmed", durable=True)
        in_hub(lambda: broker.ctx.alarm.set_alarm("memory"))
        ch.basic_publish("", "alarmed", b"held back")
        while not events:
            c.process_data_events(time_limit=0.05)
        reader_state = in_hub(lambda: broker.only_reader().state)
        queued = in_hub(lambda: len(broker.backend.queues[("/", "alarmed")].ready))
        in_hub(lambda: broker.ctx.alarm.clear_alarm("memory"))
        while len(events) < 2:
            c.process_data_events(time_limit=0.05)
        count = ch.queue_declare("alarmed", passive=True).method.message_count
        c.close()
        return [reader_state, queued, count]
    assert client(work) == ["blocked", 0, 1]
    assert events == ["low on memory", "unblocked"]


def test_alarm_before_any_publish_only_reports_blocking(broker: Broker,
                                                         conn: pika.BlockingConnection) -> None:
    client(lambda: conn.channel().queue_declare("c", durable=True))
    broker.ctx.alarm.set_alarm("disk")
    hub_wait_until(lambda: broker.only_reader().info()["state"] == "blocking", "blocking")
    broker.ctx.alarm.clear_alarm("disk")
    hub_wait_until(lambda: broker.only_reader().info()["state"] == "running", "running again")


def test_credit_flow_stops_socket_reads_until_the_queue_grants_again(
        broker: Broker, conn: pika.BlockingConnection) -> None:
    def setup() -> Any:
        ch = conn.channel()
        ch.queue_declare("slow", durable=True)
        return ch
    ch = client(setup)
    broker.backend.hold("/", "slow")

    def publish() -> None:
        for i in range(500):
            ch.basic_publish("", "slow", str(i).encode())
    client(publish)
    reader = broker.only_reader()
    hub_wait_until(lambda: reader.state == "blocked", "reader blocked by credit")
    requests = reader.recv_requests
    assert reader.publishes_dispatched == 400  # exactly the initial credit
    assert reader.credit.blocked()
    assert reader.info()["state"] == "flow"
    assert reader.credit_blocked_time.since_ms is not None  # a blocked stretch is open
    broker.backend.release("/", "slow")
    hub_wait_until(lambda: reader.publishes_dispatched == 500, "all publishes dispatched")
    assert reader.recv_requests > requests
    assert not reader.credit.blocked()
    assert reader.credit_blocked_time.since_ms is None  # and closed, its time added up
    assert len(broker.backend.queues[("/", "slow")].ready) == 500
