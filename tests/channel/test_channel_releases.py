"""The channel and the quorum queue type behave as the node's release: the same steps
under two releases show where they differ.

- A quorum queue starts at the `rabbit_fifo` version of the declaring node's release
  (5 for 4.0, 7 for 4.2), which the channels' fifo clients speak, and without
  `x-delivery-limit` it gets that release's default limit (none in 3.10, 20 from 4.0).
- Before tune-ok a connection reads frames up to the release's `?FRAME_MIN_SIZE`
  (4096 up to 4.0, 8192 from 4.1), and a body is refused past the release's
  `max_message_size` default (128 MiB in 3.10, 16 MiB from 3.13).
- A redeclare compares the arguments of the release's `rabbit_quorum_queue` list, in
  its order (4.3 adds the consumer timeouts and delayed retry to it).
- Dead-lettered messages carry `x-last-death-*` headers from 3.13 on, not in 3.10.
- Up to 4.2 the channel closes on a delivery left unacknowledged past the consumer
  timeout; in 4.3 its tick leaves that to the queues.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pika
import pika.exceptions as pex
import pytest

import actors
from actors import Node
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.classic.classic_queue import ClassicBackend
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.quorum.qq_cluster import fifo_config
from channel.queue_types.quorum.qq_registry import LocalRegistry
from channel.queue_types.quorum.quorum_queue import QuorumBackend
from classic.queue_sup import start_queue_sup
from fifo.machine import RabbitFifo
from ra import api
from releases import DEFAULT_SERIES, RELEASES, Release
from tests.channel.conftest import Broker, client, make_broker, refused
from tests.channel.test_channel_consumer_timeout import closed_with, consume_without_ack

QQ = {"x-queue-type": "quorum"}


@pytest.mark.parametrize(("series", "limit"), [("3.10", None), ("4.0", 20), ("4.2", 20)])
def test_a_queue_without_a_delivery_limit_gets_its_release_default(
        series: str, limit: int | None) -> None:
    assert fifo_config("/", "q", {}, 0, RELEASES[series])["delivery_limit"] == limit
    assert fifo_config("/", "q", {"x-delivery-limit": 3}, 0,
                       RELEASES[series])["delivery_limit"] == 3


@pytest.mark.parametrize(("series", "machine"), [("4.0", 5), ("4.2", 7)])
def test_a_declared_queue_runs_the_machine_version_of_the_release(
        lone_node: Node, series: str, machine: int) -> None:
    registry = LocalRegistry([lone_node.name], release=RELEASES[series])
    with lone_node.attached():
        _outcome, record = registry.declare("/", "q", durable=True, arguments={},
                                            declaring_node=lone_node.name)
        overview = api.member_overview(record.servers[0])
        assert overview["effective_machine_version"] == machine
        # and a channel's fifo client speaks that machine's protocol to it
        session = QuorumBackend(lone_node, registry).session(None, "/", None, "guest")
        queue = session._queue("q")
        assert queue is not None and queue.client.cfg.machine_version == machine
        registry.delete("/", "q")


def test_the_default_release_is_one_whose_machine_is_built() -> None:
    default = LocalRegistry(["n@h:1"]).release
    assert default is RELEASES[DEFAULT_SERIES]
    assert RabbitFifo(default.machine_version).machine_version == default.machine_version


@pytest.mark.parametrize(("series", "frame_min", "max_size"), [
    ("3.10", 4096, 134_217_728), ("4.0", 4096, 16_777_216), ("4.2", 8192, 16_777_216)])
def test_frame_and_message_ceilings_are_the_releases_unless_configured(
        series: str, frame_min: int, max_size: int) -> None:
    cfg = Config(release=RELEASES[series])
    assert (cfg.frame_max_before_tune, cfg.message_size_limit) == (frame_min, max_size)
    set_ = Config(release=RELEASES[series], initial_frame_max=65536, max_message_size=1000)
    assert (set_.frame_max_before_tune, set_.message_size_limit) == (65536, 1000)




@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_only_a_release_whose_channel_enforces_it_closes_on_the_consumer_timeout(
        node: Node, series: str) -> None:
    # machine-independent: the 4.3 record's choice, on the in-memory queues
    release = replace(RELEASES["4.2"],
                      consumer_timeout_enforcer=RELEASES[series].consumer_timeout_enforcer)
    broker = make_broker(node, Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                                      consumer_timeout=200, channel_tick_interval=20,
                                      release=release))
    try:
        conn = client(lambda: pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.port, connection_attempts=1)))
        ch = consume_without_ack(conn, "ct")
        reason = closed_with(conn, ch, 1.0)
        if series == "4.2":
            assert reason is not None and reason.reply_code == 406
        else:  # twenty-five ticks past the timeout and the channel still consumes
            assert reason is None and ch.is_open
        client(conn.close)
    finally:
        broker.listener.stop()


def _quorum_broker(node: Node, release: Release,
                   classic: ClassicBackend | None = None) -> tuple[Listener, LocalRegistry]:
    registry = LocalRegistry([node.name], release=release)
    backend = QuorumBackend(node, registry, classic=classic,
                            default_queue_type="classic")  # RabbitMQ's default
    ctx = BrokerContext(node, backend, config=Config(silent_close_delay_ms=20,
                                                     closing_timeout_ms=2000, release=release))
    backend.on_deleted = ctx.topology.remove_queue
    return Listener(ctx, "127.0.0.1", 0).start(), registry


def _redeclare(port: int, first: dict[str, Any], again: dict[str, Any]) -> Any:
    """Declare a quorum queue, declare it again with other arguments: the outcome."""
    def run() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", port, connection_attempts=1))
        try:
            conn.channel().queue_declare("rd", durable=True, arguments=first)
            try:
                conn.channel().queue_declare("rd", durable=True, arguments=again)
            except pex.ChannelClosedByBroker as e:
                return (e.reply_code, e.reply_text)
            return "ok"
        finally:
            conn.channel().queue_delete("rd")
            conn.close()
    return client(run)


def test_a_redeclare_names_the_first_differing_argument_in_the_queue_types_order(
        lone_node: Node) -> None:
    # x-max-length comes before x-queue-type in rabbit_quorum_queue's list: a plain
    # (classic) redeclare of a limited quorum queue is refused for its limit
    listener, _registry = _quorum_broker(lone_node, RELEASES["4.0"])
    try:
        assert _redeclare(listener.port, {**QQ, "x-max-length": 10}, {}) == (
            406, "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'rd' in "
                 "vhost '/': received none but current is the value '10' of type 'signedint'")
    finally:
        listener.stop()


@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_only_4_3_compares_the_consumer_timeout_on_redeclare(lone_node: Node,
                                                            series: str) -> None:
    # machine-independent: the 4.3 record's argument list on a 4.2 queue
    release = replace(RELEASES["4.2"],
                      quorum_queue_arguments=RELEASES[series].quorum_queue_arguments)
    listener, _registry = _quorum_broker(lone_node, release)
    try:
        outcome = _redeclare(listener.port, {**QQ, "x-consumer-timeout": 1000},
                             {**QQ, "x-consumer-timeout": 2000})
    finally:
        listener.stop()
    if series == "4.2":
        assert outcome == "ok"
    else:
        assert outcome == (406, "PRECONDITION_FAILED - inequivalent arg 'x-consumer-timeout' "
                                "for queue 'rd' in vhost '/': received '2000' but current "
                                "is '1000'")


def _declare_transient(broker: Broker, **flags: Any) -> Any:
    """Declare a non-durable queue on a new connection: "ok" or the connection's close."""
    def run() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.port, connection_attempts=1))
        try:
            conn.channel().queue_declare("tn", durable=False, **flags)
        except pex.ConnectionClosedByBroker as e:
            return (e.reply_code, e.reply_text)
        conn.close()
        return "ok"
    return client(run)


DENIED_BY_DEFAULT = (
    "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\n"
    "By default, this feature is not permitted anymore.\n"
    "The feature will be removed from a future major RabbitMQ version, regardless of the "
    "configuration; actual version to be determined.\n"
    "To continue using this feature when it is not permitted by default, set the following "
    "parameter in your configuration:\n"
    "    \"deprecated_features.permit.transient_nonexcl_queues = true\"")


@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_4_3_refuses_transient_non_exclusive_queues_by_default(node: Node,
                                                              series: str) -> None:
    broker = make_broker(node, Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                                      release=RELEASES[series]))
    try:
        if series == "4.2":
            assert _declare_transient(broker) == "ok"
        else:  # a hard error, its text cut to AMQP's 255 characters
            assert _declare_transient(broker) == (541, DENIED_BY_DEFAULT[:252] + "...")
        assert _declare_transient(broker, exclusive=True) == "ok"
    finally:
        broker.listener.stop()


def test_4_3_checks_a_transient_declare_as_rabbit_amqqueue_declare_does(node: Node) -> None:
    """The refusal comes where RabbitMQ makes it, when a new queue is to be created: a
    reserved name is refused by the channel first, and an existing queue is compared
    with the declare (so a plain redeclare of a durable queue is a 406, not a 541)."""
    broker = make_broker(node, Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                                      release=RELEASES["4.3"]))

    def run() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.port, connection_attempts=1))
        try:
            conn.channel().queue_declare("kept", durable=True)
            return [refused(conn, lambda ch: ch.queue_declare("amq.mine")),
                    refused(conn, lambda ch: ch.queue_declare("kept"))]
        finally:
            conn.close()
    try:
        assert client(run) == [
            (403, "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'"),
            (406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'kept' in "
                  "vhost '/': received 'false' but current is 'true'")]
    finally:
        broker.listener.stop()


def test_the_configuration_denies_what_the_release_permits(node: Node) -> None:
    broker = make_broker(node, Config(
        silent_close_delay_ms=20, closing_timeout_ms=2000, release=RELEASES["4.2"],
        deprecated_features_permit={"transient_nonexcl_queues": False}))
    try:
        code, text = _declare_transient(broker)
        assert code == 541
        assert text.startswith("INTERNAL_ERROR - Feature `transient_nonexcl_queues` is "
                               "deprecated.\nIts use is not permitted per the configuration "
                               "(overriding the default, which is permitted):\n")
    finally:
        broker.listener.stop()


@pytest.mark.parametrize(("series", "last"), [("3.10", False), ("4.0", True)])
def test_dead_letters_carry_last_death_headers_from_the_release_that_has_them(
        series: str, last: bool) -> None:
    stored = QqMessage.from_message(Message("x", "rk", Content.build(b"b"), ("rk",)))
    dead = stored.mc_record_death("rejected", "q1", 1_000).mc_record_death("expired", "q2",
                                                                             2_000)
    release = RELEASES[series]
    headers: Any = dead.to_message(release.last_death_headers).content.properties().headers
    assert headers["x-first-death-queue"] == "q1"
    assert [d["queue"] for d in headers["x-death"]] == ["q2", "q1"]
    assert ("x-last-death-queue" in headers) is last
    if last:
        assert (headers["x-last-death-queue"], headers["x-last-death-reason"]) == (
            "q2", "expired")


@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_4_3_refuses_a_classic_queue_master_locator_by_default(lone_node: Node,
                                                              series: str) -> None:
    with lone_node.attached():
        sup = start_queue_sup()
        assert sup[0] == "ok", sup
        actors.unlink(sup[1])
    listener, _registry = _quorum_broker(lone_node, RELEASES[series], ClassicBackend(lone_node))

    def declare() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", listener.port, connection_attempts=1))
        try:
            conn.channel().queue_declare("cq", durable=True, arguments={
                "x-queue-master-locator": "client-local"})
        except pex.ConnectionClosedByBroker as e:
            return (e.reply_code, e.reply_text)
        conn.channel().queue_delete("cq")
        conn.close()
        return "ok"
    try:
        outcome = client(declare)
    finally:
        listener.stop()
    if series == "4.2":
        assert outcome == "ok"
    else:
        assert outcome == (541, (
            "INTERNAL_ERROR - Feature `queue_master_locator` is deprecated.\n"
            "By default, this feature is not permitted anymore.\n"
            "The feature will be removed from a future major RabbitMQ version, regardless "
            "of the configuration; actual version to be determined.\n"
            "To continue using this feature when it is not permitted by default, set the "
            "following parameter in your configuration:\n"
            "    \"deprecated_features.permit.queue_master_locator = true\"")[:252] + "...")
