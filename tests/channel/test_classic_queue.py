"""Classic queues through the channel: pika against a node whose queues are queue processes.

The node runs its queue supervisor and a `ClassicBackend`; every queue a test
declares is a real `rabbit_amqqueue_process`-style actor reached by pid. What
the client sees (names, codes, texts, redelivery, deletions) is what RabbitMQ
sends for classic queues.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

import actors
from actors import Node, gen_server
from actors.gen_server import GenServer
from actors.pid import Pid
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.errors import AmqpError
from channel.protocol.framing import Content
from channel.queue_types.backend import (
    ConsumerCancelled,
    ConsumeSpec,
    Message,
    Rejected,
    Settled,
    Unblock,
)
from channel.queue_types.classic.classic_dead_letter import ClassicDeadLetter
from channel.queue_types.classic.classic_directory import ClassicRecord, LocalDirectory
from channel.queue_types.classic.classic_queue import ClassicBackend
from classic import effects as e
from classic.queue_sup import QUEUE_SUP, start_queue_sup
from releases import RELEASES
from supervision import supervisor
from tests.channel.conftest import Broker, client, ok, params, refused

LOCKED = ("cannot obtain exclusive access to locked queue '{}' in vhost '/'. It could be "
          "originally declared on another connection or the exclusive property value does "
          "not match that of the original declaration.")


@pytest.fixture
def config() -> Config:
    """The queues here are transient classic queues, as RabbitMQ users declared them up
    to 4.2; where a release denies `transient_nonexcl_queues` by default (4.3), a user
    keeping such queues permits the deprecated feature, and so do these tests."""
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                  deprecated_features_permit={"transient_nonexcl_queues": True})


@pytest.fixture
def broker(node: Node, config: Config) -> Iterator[Broker]:
    with node.attached():
        result = start_queue_sup()
        assert result[0] == "ok", result
        actors.unlink(result[1])
    backend = ClassicBackend(node)
    ctx = BrokerContext(node, backend, config=config)
    backend.on_deleted = ctx.topology.remove_queue
    backend.set_dead_letter(ClassicDeadLetter(ctx.topology, backend))
    listener = Listener(ctx, "127.0.0.1", 0).start()
    yield Broker(node, ctx, listener, backend)  # type: ignore[arg-type]
    listener.stop()


def connect(broker: Broker) -> Any:
    return client(lambda: pika.BlockingConnection(params(broker)))


def drain(conn: Any, ch: Any, until: Any) -> None:
    """Let pika read what the broker sent until `until()` holds (bounded)."""
    for _ in range(200):
        if until():
            return
        conn.process_data_events(time_limit=0.05)
    raise AssertionError("the broker never sent it")


def test_a_server_named_exclusive_queue_serves_as_an_rpc_reply_queue(conn: Any) -> None:
    def work() -> Any:
        ch = conn.channel()
        ch.confirm_delivery()
        name = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", name, b"reply", pika.BasicProperties(correlation_id="1"))
        method, props, body = ch.basic_get(name, auto_ack=True)
        return name, props.correlation_id, body, method.redelivered
    name, corr, body, redelivered = client(work)
    assert re.fullmatch(r"amq\.gen-[A-Za-z0-9_-]{22}", name), name
    assert (corr, body, redelivered) == ("1", b"reply", False)


def test_a_client_chosen_amq_name_is_refused(conn: Any) -> None:
    assert refused(conn, lambda ch: ch.queue_declare("amq.mine")) == (
        403, "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'")


def test_another_connection_is_locked_out_of_an_exclusive_queue(broker: Broker,
                                                                 conn: Any) -> None:
    ok(conn, lambda ch: ch.queue_declare("mine", exclusive=True))
    other = connect(broker)
    try:
        text = "RESOURCE_LOCKED - " + LOCKED.format("mine")
        assert refused(other, lambda ch: ch.queue_declare("mine", passive=True)) == (405, text)
        assert refused(other, lambda ch: ch.basic_consume("mine", lambda *a: None)) == (
            405, text)
        assert refused(other, lambda ch: ch.queue_declare("mine")) == (405, text)
    finally:
        client(other.close)


def test_an_exclusive_queue_goes_with_its_connection(broker: Broker) -> None:
    first = connect(broker)
    ok(first, lambda ch: ch.queue_declare("gone", exclusive=True))
    client(first.close)
    other = connect(broker)
    try:
        assert refused(other, lambda ch: ch.queue_declare("gone", passive=True)) == (
            404, "NOT_FOUND - no queue 'gone' in vhost '/'")
    finally:
        client(other.close)


def test_an_inequivalent_redeclare_is_406(conn: Any) -> None:
    ok(conn, lambda ch: ch.queue_declare("q", durable=False, arguments={"x-max-length": 5}))
    assert refused(conn, lambda ch: ch.queue_declare("q", durable=True)) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': "
             "received 'true' but current is 'false'")
    assert refused(conn, lambda ch: ch.queue_declare(
        "q", arguments={"x-max-length": 6})) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost "
             "'/': received '6' but current is '5'")
    assert refused(conn, lambda ch: ch.queue_declare(
        "q", arguments={"x-max-length": 5, "x-queue-type": "quorum"})) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost "
             "'/': received 'quorum' but current is 'classic'")


def test_a_bad_argument_of_a_new_queue_is_406(conn: Any) -> None:
    assert refused(conn, lambda ch: ch.queue_declare(
        "p", arguments={"x-max-priority": 256})) == (
        406, "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'p' in vhost '/': "
             "{max_value_exceeded,256}")
    assert refused(conn, lambda ch: ch.queue_declare(
        "p", arguments={"x-delivery-limit": 3})) == (
        406, "PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'p' in vhost '/' "
             "of queue type rabbit_classic_queue")


def test_a_passive_declare_of_a_missing_queue_is_404(conn: Any) -> None:
    assert refused(conn, lambda ch: ch.queue_declare("nope", passive=True)) == (
        404, "NOT_FOUND - no queue 'nope' in vhost '/'")


def test_a_rejected_message_returns_to_its_place_redelivered(conn: Any) -> None:
    def work() -> list[tuple[bytes, bool]]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("work")
        for body in (b"1", b"2", b"3"):
            ch.basic_publish("", "work", body)
        first = ch.basic_get("work")
        second = ch.basic_get("work")
        ch.basic_reject(first[0].delivery_tag, requeue=True)
        ch.basic_ack(second[0].delivery_tag)
        out = []
        for _ in range(2):
            method, _props, body = ch.basic_get("work", auto_ack=True)
            out.append((body, method.redelivered))
        return out
    assert client(work) == [(b"1", True), (b"3", False)]


def test_a_consumer_gets_messages_in_order_and_acks_them(conn: Any) -> None:
    def work() -> tuple[list[bytes], int]:
        ch = conn.channel()
        ch.queue_declare("c")
        ch.basic_qos(prefetch_count=2)
        for i in range(5):
            ch.basic_publish("", "c", str(i).encode())
        got: list[bytes] = []

        def on_message(chan: Any, method: Any, _props: Any, body: bytes) -> None:
            got.append(body)
            chan.basic_ack(method.delivery_tag)
        ch.basic_consume("c", on_message)
        drain(conn, ch, lambda: len(got) == 5)
        return got, ch.queue_declare("c", passive=True).method.message_count
    assert client(work) == ([b"0", b"1", b"2", b"3", b"4"], 0)


def test_an_auto_delete_queue_goes_when_its_last_consumer_cancels(conn: Any) -> None:
    def work() -> None:
        ch = conn.channel()
        ch.queue_declare("ad", auto_delete=True)
        tag = ch.basic_consume("ad", lambda *a: None)
        ch.basic_cancel(tag)
    client(work)
    assert refused(conn, lambda ch: ch.queue_declare("ad", passive=True)) == (
        404, "NOT_FOUND - no queue 'ad' in vhost '/'")


def test_delete_if_empty_and_if_unused_are_406(conn: Any) -> None:
    def fill(ch: Any) -> None:
        ch.confirm_delivery()
        ch.queue_declare("d")
        ch.basic_publish("", "d", b"x")
    ok(conn, fill)
    assert refused(conn, lambda ch: ch.queue_delete("d", if_empty=True)) == (
        406, "PRECONDITION_FAILED - queue 'd' in vhost '/' not empty")

    def consume_then_delete(ch: Any) -> None:
        ch.basic_consume("d", lambda *a: None)
        other = conn.channel()
        other.queue_delete("d", if_unused=True)
    code, text = refused(conn, lambda ch: consume_then_delete(ch))
    assert (code, text) == (406, "PRECONDITION_FAILED - queue 'd' in vhost '/' in use")


def test_a_consumer_is_cancelled_by_the_server_when_its_queue_is_deleted(conn: Any) -> None:
    def work() -> tuple[list[str], int]:
        ch = conn.channel()
        ch.queue_declare("bye")
        ch.basic_consume("bye", lambda *a: None)
        before = list(ch.consumer_tags)
        other = conn.channel()
        count = other.queue_delete("bye").method.message_count
        drain(conn, ch, lambda: not ch.consumer_tags)
        return before, count
    before, count = client(work)
    assert len(before) == 1 and count == 0


def test_publishes_are_confirmed_and_unroutable_ones_are_not_lost(conn: Any) -> None:
    def work() -> int:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("conf", durable=True)
        for _ in range(3):
            ch.basic_publish("", "conf", b"m", pika.BasicProperties(delivery_mode=2))
        return ch.queue_declare("conf", passive=True).method.message_count
    assert client(work) == 3


def test_a_second_connection_may_publish_to_an_exclusive_queue(broker: Broker,
                                                               conn: Any) -> None:
    name = ok(conn, lambda ch: ch.queue_declare("", exclusive=True).method.queue)
    other = connect(broker)
    try:
        def publish() -> None:
            ch = other.channel()
            ch.confirm_delivery()
            ch.basic_publish("", name, b"hi", mandatory=True)
        client(publish)
    finally:
        client(other.close)
    method = ok(conn, lambda ch: ch.queue_declare(name, passive=True)).method
    assert method.message_count == 1


def test_unacked_messages_return_in_order_when_their_channel_closes(conn: Any) -> None:
    def work() -> list[tuple[bytes, bool]]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("back")
        for body in (b"a", b"b", b"c"):
            ch.basic_publish("", "back", body)
        taker = conn.channel()
        taker.basic_get("back")
        taker.basic_get("back")
        taker.close()
        out = []
        for _ in range(3):
            method, _props, body = ch.basic_get("back", auto_ack=True)
            out.append((body, method.redelivered))
        return out
    assert client(work) == [(b"a", True), (b"b", True), (b"c", False)]


def test_a_message_ttl_of_zero_drops_what_no_consumer_takes_at_once(conn: Any) -> None:
    def work() -> tuple[Any, Any]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("ttl0", arguments={"x-message-ttl": 0})
        ch.queue_declare("plain")
        ch.basic_publish("", "ttl0", b"late")
        ch.basic_publish("", "plain", b"late", pika.BasicProperties(expiration="0"))
        return ch.basic_get("ttl0")[0], ch.basic_get("plain")[0]
    assert client(work) == (None, None)


def test_an_ack_for_a_deleted_queue_never_settles_a_message_of_its_successor(
        conn: Any) -> None:
    def work() -> int:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("re")
        ch.basic_publish("", "re", b"old")
        old = ch.basic_get("re")[0]
        other = conn.channel()
        other.confirm_delivery()
        other.queue_delete("re")
        other.queue_declare("re")
        other.basic_publish("", "re", b"new")
        new = ch.basic_get("re")[0]
        ch.basic_ack(old.delivery_tag)
        ch.basic_reject(new.delivery_tag, requeue=True)
        return other.queue_declare("re", passive=True).method.message_count
    assert client(work) == 1


def test_a_rejected_message_is_dead_lettered_with_its_death_recorded(conn: Any) -> None:
    def work() -> tuple[bytes, dict[str, Any], Any]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dead")
        ch.queue_declare("src", arguments={"x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": "dead"})
        ch.basic_publish("", "src", b"bad", pika.BasicProperties(expiration="60000"))
        method = ch.basic_get("src")[0]
        ch.basic_reject(method.delivery_tag, requeue=False)
        for _ in range(100):
            got = ch.basic_get("dead", auto_ack=True)
            if got[0] is not None:
                return got[2], got[1].headers, got[1].expiration
            time.sleep(0.02)
        raise AssertionError("no dead letter")
    body, headers, expiration = client(work)
    (death,) = headers["x-death"]
    assert (body, expiration) == (b"bad", None)
    assert {k: death[k] for k in ("count", "reason", "queue", "exchange", "routing-keys",
                                  "original-expiration")} == {
        "count": 1, "reason": "rejected", "queue": "src", "exchange": "",
        "routing-keys": ["src"], "original-expiration": "60000"}
    assert (headers["x-first-death-reason"], headers["x-first-death-queue"]) == (
        "rejected", "src")


@pytest.mark.parametrize(("series", "cc"), [("3.10", None), ("4.0", ["elsewhere"])])
def test_a_dead_letter_routed_by_the_queues_key_keeps_cc_as_its_release_does(
        broker: Broker, conn: Any, series: str, cc: list[str] | None) -> None:
    """3.10 drops the `CC` header of a message dead-lettered with the queue's
    `x-dead-letter-routing-key`; 4.x keeps it (the keys it routed by are in `x-death`)."""
    backend: Any = broker.backend
    backend.set_dead_letter(ClassicDeadLetter(broker.ctx.topology, backend,
                                              release=RELEASES[series]))
    backend.last_death_headers = RELEASES[series].last_death_headers

    def work() -> dict[str, Any]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dead")
        ch.queue_declare("src", arguments={"x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": "dead"})
        ch.basic_publish("", "src", b"bad", pika.BasicProperties(
            headers={"CC": ["elsewhere"], "app": "probe"}))
        method = ch.basic_get("src")[0]
        ch.basic_reject(method.delivery_tag, requeue=False)
        for _ in range(100):
            got = ch.basic_get("dead", auto_ack=True)
            if got[0] is not None:
                return dict(got[1].headers)
            time.sleep(0.02)
        raise AssertionError("no dead letter")
    headers = client(work)
    assert headers.get("CC") == cc
    assert ("x-last-death-queue" in headers) == (series != "3.10")
    assert headers["app"] == "probe"
    assert headers["x-death"][0]["routing-keys"] == ["src", "elsewhere"]


def test_an_expired_message_dead_letters_through_its_exchange(conn: Any) -> None:
    def work() -> list[tuple[str, str, int]]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("dlx", "fanout")
        ch.queue_declare("parking")
        ch.queue_bind("parking", "dlx")
        ch.queue_declare("ttl", arguments={"x-message-ttl": 0, "x-dead-letter-exchange": "dlx"})
        ch.basic_publish("", "ttl", b"late")
        for _ in range(100):
            method, props, _body = ch.basic_get("parking")
            if method is not None:
                break
            time.sleep(0.02)
        ch.basic_nack(method.delivery_tag, requeue=False)  # parking has no dead-letter exchange
        return [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]]
    assert client(work) == [("ttl", "expired", 1)]


def test_a_message_dying_again_in_the_same_queue_counts_up(conn: Any) -> None:
    def get(ch: Any, queue: str) -> tuple[Any, Any]:
        for _ in range(100):
            method, props, _body = ch.basic_get(queue)
            if method is not None:
                return method, props
            time.sleep(0.02)
        raise AssertionError(f"nothing in {queue}")

    def work() -> list[tuple[str, str, int]]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("ping", arguments={"x-dead-letter-exchange": "",
                                            "x-dead-letter-routing-key": "pong"})
        ch.queue_declare("pong", arguments={"x-dead-letter-exchange": "",
                                            "x-dead-letter-routing-key": "ping"})
        ch.basic_publish("", "ping", b"ball")
        for queue in ("ping", "pong", "ping"):
            method, _props = get(ch, queue)
            ch.basic_reject(method.delivery_tag, requeue=False)
        _method, props = get(ch, "pong")
        return [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]]
    assert client(work) == [("ping", "rejected", 2), ("pong", "rejected", 1)]


def test_a_priority_queue_delivers_higher_priorities_first(conn: Any) -> None:
    def work() -> list[bytes]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("prio", arguments={"x-max-priority": 5})
        for body, priority in ((b"low", 0), (b"high", 5), (b"mid", 3), (b"none", None)):
            ch.basic_publish("", "prio", body, pika.BasicProperties(priority=priority))
        return [ch.basic_get("prio", auto_ack=True)[2] for _ in range(4)]
    assert client(work) == [b"high", b"mid", b"low", b"none"]


def test_a_full_reject_publish_queue_nacks_the_publish(conn: Any) -> None:
    def work() -> tuple[int, bool]:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("full", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        ch.basic_publish("", "full", b"fits")
        try:
            ch.basic_publish("", "full", b"refused")
        except pex.NackError:
            nacked = True
        else:
            nacked = False
        return ch.queue_declare("full", passive=True).method.message_count, nacked
    assert client(work) == (1, True)


def test_an_exclusive_queue_of_an_owner_already_gone_leaves_no_record(node: Node) -> None:
    with node.attached():
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        backend = ClassicBackend(node)
        owner = actors.spawn(lambda: None)
        ref = actors.monitor(owner)
        assert actors.receive(5000, match=lambda m: m[:2] == ("DOWN", ref)) is not actors.TIMEOUT
        session = backend.session(actors.self(), "/", owner, "guest")
        ok_ = session.declare("orphan", passive=False, durable=False, exclusive=True,
                              auto_delete=False, arguments={})
        assert (ok_.queue, ok_.message_count, ok_.consumer_count) == ("orphan", 0, 0)
        assert not session.exists("orphan")


class _UnwritableOnRemove(LocalDirectory):
    """A queue table that cannot be written when a record goes (no metadata quorum)."""

    def remove(self, vhost: str, name: str, pid: Any) -> bool:
        raise RuntimeError("metadata store unavailable")


def test_a_queue_whose_record_cannot_be_removed_still_deletes_itself(node: Node) -> None:
    """The delete is answered and the process ends normally; the record that names
    the gone process is left for a later lookup to clear."""
    with node.attached():
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        backend = ClassicBackend(node, directory=_UnwritableOnRemove())
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        session.declare("stuck", passive=False, durable=False, exclusive=False,
                        auto_delete=False, arguments={})
        pid = backend.lookup("/", "stuck").pid  # type: ignore[union-attr]
        ref = actors.monitor(pid)
        assert session.delete("stuck", if_unused=False, if_empty=False) == 0
        down = actors.receive(5000, match=lambda m: m[:2] == ("DOWN", ref))
        assert down is not actors.TIMEOUT and down[4] == "normal"


class _SilentQueue(GenServer):
    """A queue process that takes consumers and publishes and never confirms."""

    def init(self, args: Any) -> Any:
        return ("ok", None)

    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        return ("reply", e.ConsumeOk(request.tag), state)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        return ("noreply", state)


def test_a_crashed_queue_process_cancels_the_channels_consumers_and_nacks_its_publishes(
        node: Node) -> None:
    with node.attached():
        actors.process_flag("trap_exit", True)
        backend = ClassicBackend(node)
        _ok, pid = gen_server.start(_SilentQueue, None)
        backend.directory.insert(ClassicRecord("/", "q", pid, True, False, None, {}))
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        session.consume("q", ConsumeSpec("ctag", ack_required=True, prefetch=10))
        session.deliver(["q"], Message("", "q", Content.build(b"m"), ("q",)), 7)
        actors.exit(pid, "kill")
        down = actors.receive(5000, match=lambda m: type(m) is tuple and m[0] == "DOWN")
        assert down is not actors.TIMEOUT
        assert session.handle_event(down) == [Unblock("q"), Rejected("q", (7,)),
                                              ConsumerCancelled("q", "ctag")]


def test_a_queue_whose_process_stays_dead_keeps_its_record_until_deleted(node: Node) -> None:
    """A dead process is no reason to forget a queue (its supervisor may be restarting
    it); a call that keeps finding it dead is 404, and queue.delete removes the record."""
    with node.attached():
        actors.process_flag("trap_exit", True)
        backend = ClassicBackend(node)
        dead = actors.spawn(lambda: None)
        ref = actors.monitor(dead)
        assert actors.receive(5000, match=lambda m: m[:2] == ("DOWN", ref)) is not actors.TIMEOUT
        backend.directory.insert(ClassicRecord("/", "q", dead, True, False, None, {}))
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        with pytest.raises(AmqpError) as err:
            session.declare("q", passive=True, durable=True, exclusive=False,
                            auto_delete=False, arguments={})
        assert (err.value.name, err.value.explanation) == (
            "NOT_FOUND", "failed to perform operation on queue 'q' in vhost '/' due to timeout")
        assert session.exists("q")
        assert session.delete("q", if_unused=False, if_empty=False) == 0
        assert not session.exists("q")


def _queue_on_a_down_node(backend: ClassicBackend, name: str) -> None:
    """A durable queue's record whose process is on a node this one is not connected to."""
    pid = Pid("gone@127.0.0.1:1", 7, 1)
    backend.directory.insert(ClassicRecord("/", name, pid, True, False, None,
                                           {"x-queue-type": "classic"}))


def _refusal(fn: Any) -> tuple[str, str]:
    with pytest.raises(AmqpError) as err:
        fn()
    return err.value.name, err.value.explanation


def test_a_durable_queue_on_a_down_node_is_absent_at_once_as_310_answers(node: Node) -> None:
    """3.10 drops such a queue from its live table: every operation but delete is
    404 "home node ... is down", and publishes do not route to it."""
    with node.attached():
        backend = ClassicBackend(node, home_down_retries=0)
        _queue_on_a_down_node(backend, "q")
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        down = ("NOT_FOUND", "home node 'gone@127.0.0.1:1' of durable queue 'q' in vhost '/' "
                             "is down or inaccessible")
        assert _refusal(lambda: session.declare(
            "q", passive=True, durable=True, exclusive=False, auto_delete=False,
            arguments={})) == down
        assert _refusal(lambda: session.get("q", ack_required=True, delivery_tag=1)) == down
        assert _refusal(lambda: session.check_access("q")) == down
        message = Message("", "q", Content.build(b"m"), ("q",))
        assert not session.routable("q")
        assert session.deliver(["q"], message, 3) == [Settled("q", (3,))]
        assert session.deliver(["q"], message, None) == []
        assert _refusal(lambda: session.delete("q", if_unused=False, if_empty=True)) == (
            "PRECONDITION_FAILED", "queue 'q' in vhost '/' not empty")
        assert session.delete("q", if_unused=False, if_empty=False) == 0
        assert not session.exists("q")


@pytest.mark.parametrize(("retries", "outcome"), [(0, "returned"), (2000, "nacked")])
def test_a_mandatory_publish_to_a_queue_whose_home_node_is_down(
        broker: Broker, conn: Any, retries: int, outcome: str) -> None:
    """3.10 does not route to a durable queue whose home node is down, so a mandatory
    publish routed only there comes back (312 NO_ROUTE) and is then confirmed; 4.x
    routes to it and nacks the publish."""
    backend: Any = broker.backend
    backend.home_down_retries = retries
    _queue_on_a_down_node(backend, "far")

    def work() -> tuple[str, list[int]]:
        ch = conn.channel()
        ch.confirm_delivery()
        try:
            ch.basic_publish("", "far", b"m", mandatory=True)
            return "acked", []
        except pex.UnroutableError as err:  # returned, then acked
            return "returned", [m.method.reply_code for m in err.messages]
        except pex.NackError as err:
            return "nacked", [m.method.reply_code for m in err.messages
                              if hasattr(m.method, "reply_code")]
    result, codes = client(work)
    assert result == outcome
    assert codes == ([312] if outcome == "returned" else [])


def test_a_durable_queue_on_a_down_node_is_retried_then_times_out_as_4x_answers(
        node: Node) -> None:
    """4.x keeps such a queue's record live: an operation is tried again until the
    retries run out, then 404 "... due to timeout"; a binding reads only the record,
    a publish routes to it and is nacked, and delete removes it at once."""
    with node.attached():
        backend = ClassicBackend(node, home_down_retries=3)
        _queue_on_a_down_node(backend, "q")
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        timeout = ("NOT_FOUND", "failed to perform operation on queue 'q' in vhost '/' "
                                "due to timeout")
        assert _refusal(lambda: session.declare(
            "q", passive=True, durable=True, exclusive=False, auto_delete=False,
            arguments={})) == timeout
        assert _refusal(lambda: session.declare(
            "q", passive=False, durable=True, exclusive=False, auto_delete=False,
            arguments={"x-queue-type": "classic"})) == timeout
        assert _refusal(lambda: session.get("q", ack_required=True, delivery_tag=1)) == timeout
        assert _refusal(lambda: session.purge("q")) == timeout
        assert _refusal(lambda: session.consume(
            "q", ConsumeSpec("ctag", ack_required=True, prefetch=10))) == timeout
        session.check_access("q")
        assert session.routable("q")
        message = Message("", "q", Content.build(b"m"), ("q",))
        assert session.deliver(["q"], message, 3) == [Rejected("q", (3,))]
        assert session.deliver(["q"], message, None) == []
        assert _refusal(lambda: session.delete("q", if_unused=False, if_empty=True)) == (
            "PRECONDITION_FAILED", "queue 'q' in vhost '/' not empty")
        assert session.delete("q", if_unused=False, if_empty=False) == 0
        assert _refusal(lambda: session.declare(
            "q", passive=True, durable=True, exclusive=False, auto_delete=False,
            arguments={})) == ("NOT_FOUND", "no queue 'q' in vhost '/'")


@pytest.mark.parametrize("config", [Config(
    silent_close_delay_ms=20, closing_timeout_ms=2000, release=RELEASES["4.2"])], ids=["4.2"])
def test_a_global_qos_limits_the_channels_unacked_deliveries_across_its_classic_queues(
        conn: Any) -> None:
    """With `global_qos` permitted (4.0 to 4.2), `basic.qos(global=true)` caps the
    unacknowledged deliveries of the whole channel, whatever queue they come from:
    each queue asks the channel's limiter before an ack-required delivery, and an
    ack lets the next message go."""
    def work() -> tuple[list[bytes], Any, list[bytes]]:
        ch = conn.channel()
        for name in ("g1", "g2"):
            ch.queue_declare(name)
            for i in range(3):
                ch.basic_publish("", name, f"{name}-{i}".encode())
        ch.basic_qos(prefetch_count=3, global_qos=True)
        got: list[tuple[int, bytes]] = []
        for name in ("g1", "g2"):
            ch.basic_consume(name, lambda _c, m, _p, body: got.append((m.delivery_tag, body)))
        drain(conn, ch, lambda: len(got) >= 3)
        # the queues kept the rest: a declare on another channel finds them ready
        other = conn.channel()
        left = [other.queue_declare(n, passive=True).method.message_count
                for n in ("g1", "g2")]
        first = sorted(body for _tag, body in got)
        ch.basic_ack(got[0][0])
        drain(conn, ch, lambda: len(got) >= 4)
        return first, left, [body for _tag, body in got[3:]]
    first, left, after_ack = client(work)
    assert len(first) == 3 and sum(left) == 3
    assert len(after_ack) == 1 and after_ack[0] not in first


@pytest.mark.parametrize("config", [Config(
    silent_close_delay_ms=20, closing_timeout_ms=2000, release=RELEASES["4.3"])], ids=["4.3"])
def test_a_global_qos_limits_each_consumer_where_the_release_denies_it(conn: Any) -> None:
    """With `global_qos` denied (4.3's default), `basic.qos(global=true)` is taken as a
    per-consumer prefetch: each consumer gets up to the count, whatever the others hold."""
    def work() -> tuple[list[bytes], list[int]]:
        ch = conn.channel()
        for name in ("g1", "g2"):
            ch.queue_declare(name, durable=True)
            for i in range(4):
                ch.basic_publish("", name, f"{name}-{i}".encode())
        ch.basic_qos(prefetch_count=3, global_qos=True)
        got: list[bytes] = []
        for name in ("g1", "g2"):
            ch.basic_consume(name, lambda _c, _m, _p, body: got.append(body))
        drain(conn, ch, lambda: len(got) >= 6)
        other = conn.channel()
        left = [other.queue_declare(n, passive=True).method.message_count
                for n in ("g1", "g2")]
        return sorted(got), left
    got, left = client(work)
    assert got == sorted(f"{n}-{i}".encode() for n in ("g1", "g2") for i in range(3))
    assert left == [1, 1]


def _crash(backend: ClassicBackend, name: str) -> None:
    """Make the queue's live process end with an error (a command it cannot handle)
    and wait until its record says so or names a restarted process."""
    record = backend.lookup("/", name)
    assert record is not None and record.state == "live"
    ref = actors.monitor(record.pid)
    gen_server.cast(record.pid, ("not", "a", "command"))
    down = actors.receive(5000, match=lambda m: m[:2] == ("DOWN", ref))
    assert down is not actors.TIMEOUT and down[4] != "normal"
    for _ in range(500):
        now = backend.lookup("/", name)
        assert now is not None
        if now.state == "crashed" or now.pid != record.pid:
            return
        actors.sleep(10)
    raise AssertionError("the crash left the record as it was")


def _settled(backend: ClassicBackend, name: str) -> ClassicRecord:
    """The record once the restarted queue took it back, or once its supervisor gave
    up (the node's queue supervisor has no queue left)."""
    for _ in range(500):
        record = backend.lookup("/", name)
        assert record is not None
        if record.state == "live" and actors.is_process_alive(record.pid):
            return record
        if record.state == "crashed" and not supervisor.which_children(QUEUE_SUP):
            return record
        actors.sleep(10)
    raise AssertionError("neither restarted nor crashed for good")


def test_a_queue_that_crashed_and_was_not_restarted_is_404_at_once(node: Node) -> None:
    """A process ending with an error marks its record crashed and the restart marks it
    live again; once the queue's supervisor gives up (more than 5 crashes in 10 s),
    every operation is 404 "has crashed and failed to restart" without retrying, and
    queue.delete removes the record (`rabbit_classic_queue:delete_crashed`)."""
    with node.attached():
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        backend = ClassicBackend(node)
        session = backend.session(actors.self(), "/", actors.self(), "guest")
        session.declare("fragile", passive=False, durable=True, exclusive=False,
                        auto_delete=False, arguments={})
        _crash(backend, "fragile")
        assert _settled(backend, "fragile").state == "live"
        assert session.declare("fragile", passive=True, durable=True, exclusive=False,
                               auto_delete=False, arguments={}).queue == "fragile"
        while _settled(backend, "fragile").state == "live":
            _crash(backend, "fragile")
        crashed = ("NOT_FOUND", "queue 'fragile' in vhost '/' has crashed and failed to "
                                "restart")
        assert _refusal(lambda: session.declare(
            "fragile", passive=True, durable=True, exclusive=False, auto_delete=False,
            arguments={})) == crashed
        assert _refusal(lambda: session.get("fragile", ack_required=True,
                                            delivery_tag=1)) == crashed
        assert _refusal(lambda: session.purge("fragile")) == crashed
        assert _refusal(lambda: session.consume(
            "fragile", ConsumeSpec("ctag", ack_required=True, prefetch=10))) == crashed
        assert session.delete("fragile", if_unused=False, if_empty=False) == 0
        assert not session.exists("fragile")


@pytest.mark.parametrize(("reconsume", "arguments", "outcome"), [
    (True, {}, "delivered"),
    (True, {"x-cancel-on-ha-failover": True}, "cancelled"),
    (False, {}, "cancelled"),
])
def test_a_consumer_of_a_queue_whose_process_was_killed(
        broker: Broker, conn: Any, reconsume: bool, arguments: dict[str, Any],
        outcome: str) -> None:
    """3.10 registers the channel's consumer again on the restarted queue without telling
    the client, unless it asked for `x-cancel-on-ha-failover`; 4.x sends `basic.cancel`."""
    backend: Any = broker.backend
    backend.reconsume_on_queue_down = reconsume
    seen: list[str] = []

    def setup() -> Any:
        ch = conn.channel()
        ch.queue_declare("phoenix", durable=True)
        ch.add_on_cancel_callback(lambda _frame: seen.append("cancelled"))

        def on_message(c: Any, m: Any, _p: Any, b: bytes) -> None:
            seen.append(b.decode())
            c.basic_ack(m.delivery_tag)

        ch.basic_consume("phoenix", on_message, arguments=arguments)
        return ch
    ch = client(setup)
    record = backend.lookup("/", "phoenix")
    with broker.node.attached():
        actors.exit(record.pid, "kill")

    def after() -> list[str]:
        for _ in range(200):
            if backend.lookup("/", "phoenix").pid != record.pid:
                break
            time.sleep(0.01)
        conn.process_data_events(time_limit=0.3)
        ch.basic_publish("", "phoenix", b"after")
        drain(conn, ch, lambda: seen)
        conn.process_data_events(time_limit=0.1)
        return seen
    assert client(after)[:1] == (["after"] if outcome == "delivered" else ["cancelled"])
