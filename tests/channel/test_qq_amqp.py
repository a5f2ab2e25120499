"""Quorum queues end to end: pika against node 1 of three in-process nodes.

Each node runs a Ra system on the in-memory network; the listener and every
channel live on node 1, the queues' members on whichever nodes the registry
picks, so a channel routinely talks to a leader on another node.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gevent
import pika
import pika.exceptions as pex
import pytest

import actors
from actors import Node, trace
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.limits.memory_monitor import MemoryMonitor
from channel.queue_types.queue_registry import QueueRecord
from channel.queue_types.quorum.qq_registry import LocalRegistry
from channel.queue_types.quorum.quorum_queue import QuorumBackend
from channel.queue_types.testing import MemoryBackend
from ra import api
from ra import system as ra_system
from releases import DEFAULT_SERIES, RELEASES, Release
from tests.channel.conftest import client
from tests.waiting import hub_wait_until
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig

QQ = {"x-queue-type": "quorum"}


@dataclass
class QqCluster:
    network: MemoryNetwork
    nodes: list[Node]
    registry: LocalRegistry
    backend: QuorumBackend
    ctx: BrokerContext
    listener: Listener

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def params(self) -> pika.ConnectionParameters:
        return pika.ConnectionParameters("127.0.0.1", self.listener.port, connection_attempts=1)

    def connect(self) -> pika.BlockingConnection:
        return client(lambda: pika.BlockingConnection(self.params()))

    def record(self, name: str) -> QueueRecord:
        record = self.registry.lookup("/", name)
        assert record is not None
        return record

    def declare_from(self, node: int, name: str, **args: Any) -> QueueRecord:
        """Declare through the registry from node `node` (client-local leads there)."""
        with self.nodes[node].attached():
            return self.registry.declare("/", name, durable=True, arguments={**QQ, **args},
                                         declaring_node=self.nodes[node].name)[1]

    def ra_leader(self, name: str) -> tuple[str, str]:
        with self.nodes[0].attached():
            found = api.members(list(self.record(name).servers), 2000)
        assert found[0] == "ok", found
        return found[2]  # type: ignore[no-any-return]

    def channel_info(self) -> dict[str, Any]:
        [session] = self.backend.sessions.values()
        with self.nodes[0].attached():
            ref = actors.make_ref()
            actors.send(session.channel, ("info", actors.self(), ref))
            reply = actors.receive(2000, match=lambda m: isinstance(m, tuple) and m[0] == ref)
        assert reply is not actors.TIMEOUT
        return reply[1]  # type: ignore[no-any-return]


@pytest.fixture
def release() -> Release:
    """The release the nodes model: the default, unless a test names one."""
    return RELEASES[DEFAULT_SERIES]


@pytest.fixture
def qq(release: Release) -> Iterator[QqCluster]:
    network = MemoryNetwork(TickConfig(net_ticktime=8, net_tickintensity=80), FaultRules(seed=1))
    nodes = [Node(f"warren{i}@127.0.0.1:{i}", transport=network.transport()).start()
             for i in (1, 2, 3)]
    for node in nodes:
        with node.attached():
            assert ra_system.start()[0] == "ok"
    registry = LocalRegistry([n.name for n in nodes], server_config={"tick_timeout": 200},
                             release=release)
    backend = QuorumBackend(nodes[0], registry)
    ctx = BrokerContext(nodes[0], backend,
                        config=Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                                      release=release))
    backend.on_deleted = ctx.topology.remove_queue
    listener = Listener(ctx, "127.0.0.1", 0).start()
    yield QqCluster(network, nodes, registry, backend, ctx, listener)
    listener.stop()
    greenlets = [p.greenlet for n in nodes for p in list(n.procs.values())
                 if p.greenlet is not None]
    for node in nodes:
        node.stop()
    gevent.joinall(greenlets, timeout=5)
    assert all(g.dead for g in greenlets), "a process outlived its test"


@pytest.fixture
def conn(qq: QqCluster) -> Iterator[pika.BlockingConnection]:
    c = qq.connect()
    yield c
    if c.is_open:
        client(c.close)


def closed_with(fn: Any) -> str:
    """Run `fn(channel)` expecting the broker to close the channel; the reply text."""
    with pytest.raises(pex.ChannelClosedByBroker) as info:
        fn()
    return f"{info.value.reply_code} {info.value.reply_text}"


# --------------------------------------------------------------------- declare


def test_declare_creates_a_three_member_cluster_led_by_the_declaring_node(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    ok = client(lambda: conn.channel().queue_declare("q1", durable=True, arguments=QQ))
    assert (ok.method.queue, ok.method.message_count, ok.method.consumer_count) == ("q1", 0, 0)
    record = qq.record("q1")
    assert record.ra_name == "%2F_q1"
    assert [node for _, node in record.servers] == qq.names
    assert qq.ra_leader("q1") == ("%2F_q1", qq.names[0])


def test_invalid_arguments_close_the_channel_with_rabbitmq_texts(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    def declare(name: str, **args: Any) -> str:
        ch = conn.channel()
        return closed_with(lambda: ch.queue_declare(name, durable=True,
                                                    arguments={**QQ, **args}))
    assert client(lambda: declare("q", **{"x-max-length": -5})) == (
        "406 PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'q' in vhost '/': "
        "{value_negative,-5}")
    assert client(lambda: declare("q", **{"x-overflow": "sideways"})) == (
        "406 PRECONDITION_FAILED - invalid arg 'x-overflow' for queue 'q' in vhost '/': "
        "invalid_overflow")
    assert qq.registry.lookup("/", "q") is None


@pytest.mark.parametrize("release", [RELEASES["4.2"], RELEASES["4.3"]], ids=["4.2", "4.3"])
def test_a_non_durable_quorum_declare_is_refused_as_the_release_refuses_it(
        qq: QqCluster, conn: pika.BlockingConnection, release: Release) -> None:
    """Up to 4.2 the quorum queue type refuses the property (a channel error); where
    `transient_nonexcl_queues` is denied (4.3) the declare is refused before the
    queue type has a say, and the connection closes."""
    def non_durable() -> Any:
        ch = conn.channel()
        with pytest.raises((pex.ChannelClosedByBroker, pex.ConnectionClosedByBroker)) as info:
            ch.queue_declare("q", durable=False, arguments=QQ)
        return info.value
    error = client(non_durable)
    if release.series == "4.2":
        assert isinstance(error, pex.ChannelClosedByBroker)
        assert (error.reply_code, error.reply_text) == (
            406, "PRECONDITION_FAILED - invalid property 'non-durable' for queue 'q' in "
                 "vhost '/'")
    else:
        assert isinstance(error, pex.ConnectionClosedByBroker)
        assert error.reply_code == 541
        assert error.reply_text.startswith(
            "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.")
    assert qq.registry.lookup("/", "q") is None


def test_redeclare_checks_equivalence_and_passive_declare_counts_ready_messages(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    def work() -> tuple[int, str]:
        ch = conn.channel()
        ch.queue_declare("eq", durable=True, arguments={**QQ, "x-max-length": 10})
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "eq", b"m%d" % i)
        count = ch.queue_declare("eq", passive=True).method.message_count
        # without x-queue-type the node default (quorum) is injected: still equivalent
        ch.queue_declare("eq", durable=True, arguments={"x-max-length": 10})
        return count, closed_with(lambda: ch.queue_declare(
            "eq", durable=True, arguments={**QQ, "x-max-length": 20}))
    count, error = client(work)
    assert count == 3
    assert error == ("406 PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'eq' "
                     "in vhost '/': received '20' but current is '10'")


@pytest.mark.parametrize(("default", "refusal"), [
    ("quorum", None),
    ("classic", "406 PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'typed' "
                "in vhost '/': received 'classic' but current is 'quorum'"),
])
def test_a_redeclare_without_a_type_is_compared_as_the_nodes_default_type(
        qq: QqCluster, default: str, refusal: str | None) -> None:
    """RabbitMQ fills in the default queue type before comparing, so a quorum queue
    re-declared without `x-queue-type` is equivalent only where quorum is the default."""
    qq.backend.default_queue_type = default
    qq.backend.classic = MemoryBackend(qq.nodes[0])
    conn = qq.connect()

    def work() -> str | None:
        ch = conn.channel()
        ch.queue_declare("typed", durable=True, arguments=QQ)
        if refusal is None:
            ch.queue_declare("typed", durable=True)
            return None
        return closed_with(lambda: ch.queue_declare("typed", durable=True))
    assert client(work) == refusal
    assert qq.record("typed").arguments["x-queue-type"] == "quorum"
    client(conn.close)


def test_passive_declare_of_a_missing_queue_is_404(conn: pika.BlockingConnection) -> None:
    def work() -> str:
        ch = conn.channel()
        return closed_with(lambda: ch.queue_declare("nope", passive=True))
    assert client(work) == "404 NOT_FOUND - no queue 'nope' in vhost '/'"


def test_a_classic_declare_is_refused_without_a_classic_backend(
        conn: pika.BlockingConnection) -> None:
    def work() -> str:
        ch = conn.channel()
        return closed_with(lambda: ch.queue_declare("c", exclusive=True))
    assert client(work) == ("406 PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue 'c' "
                            "in vhost '/': \"unsupported queue type 'classic'\"")


def test_balanced_locator_leads_on_the_node_with_fewest_leaders(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    def work() -> None:
        ch = conn.channel()
        ch.queue_declare("a", durable=True, arguments=QQ)
        ch.queue_declare("b", durable=True, arguments={**QQ, "x-queue-leader-locator": "balanced",
                                                       "x-quorum-initial-group-size": 2})
    client(work)
    record = qq.record("b")
    assert [node for _, node in record.servers] == qq.names[1:]
    assert qq.ra_leader("b") == ("%2F_b", qq.names[1])


# ------------------------------------------------------------ publish, consume


def test_a_thousand_confirmed_publishes_are_consumed_in_order_with_manual_acks(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    def publish() -> None:
        ch = conn.channel()
        ch.queue_declare("bulk", durable=True, arguments=QQ)
        ch.confirm_delivery()
        for i in range(1000):
            ch.basic_publish("", "bulk", b"%d" % i)

    def consume() -> list[bytes]:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        bodies: list[bytes] = []

        def on_message(c: Any, method: Any, _props: Any, body: bytes) -> None:
            bodies.append(body)
            c.basic_ack(method.delivery_tag)
            if len(bodies) == 1000:
                c.stop_consuming()
        ch.basic_consume("bulk", on_message)
        ch.start_consuming()
        return bodies
    client(publish)
    assert client(consume) == [b"%d" % i for i in range(1000)]
    ready = client(lambda: conn.channel().queue_declare("bulk", passive=True))
    assert ready.method.message_count == 0


def test_each_enqueue_handed_to_ra_is_recorded_with_its_ids(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    """`enqueue_sent`: the history's commit latency runs from it to the leader's apply."""
    seen: list[tuple[str, dict[str, Any]]] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    try:
        def publish() -> None:
            ch = conn.channel()
            ch.queue_declare("traced", durable=True, arguments=QQ)
            ch.confirm_delivery()
            for i in (7, 8):
                ch.basic_publish("", "traced", b"m",
                                 pika.BasicProperties(headers={"x-warren-id": i}))
        client(publish)
    finally:
        trace.set_sink(previous)
    sent = [f for kind, f in seen if kind == "enqueue_sent"]
    assert [(f["queue"], f["msg_id"], f["pub_seq"]) for f in sent] == \
        [("traced", 7, 1), ("traced", 8, 2)]
    # the fifo client's command sequence: consecutive, as Ra sees the pipeline
    assert sent[1]["raft_correlation"] == sent[0]["raft_correlation"] + 1
    assert all(f["channel"] == sent[0]["channel"] for f in sent)


def test_a_queue_led_elsewhere_without_a_local_member_serves_this_node(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    record = qq.declare_from(1, "far", **{"x-quorum-initial-group-size": 2})
    assert [node for _, node in record.servers] == qq.names[1:]

    def work() -> list[tuple[bytes, dict[str, Any] | None]]:
        ch = conn.channel()
        ch.confirm_delivery()
        for i in range(5):
            ch.basic_publish("", "far", b"f%d" % i, pika.BasicProperties(headers={"i": i}))
        got = []
        for method, props, body in ch.consume("far", inactivity_timeout=5):
            assert method is not None, "delivery never came"
            got.append((body, props.headers))
            ch.basic_ack(method.delivery_tag)
            if len(got) == 5:
                break
        ch.cancel()
        return got
    assert client(work) == [(b"f%d" % i, {"i": i}) for i in range(5)]
    assert qq.ra_leader("far") == ("%2F_far", qq.names[1])


@pytest.mark.parametrize(("release", "counted"), [
    (RELEASES["4.2"], {"x-delivery-count": 1}),
    # 4.3: a requeue is not a failed delivery, so there is no x-delivery-count (it
    # counts those); x-acquired-count counts every earlier delivery
    (RELEASES["4.3"], {"x-acquired-count": 1})], ids=["4.2", "4.3"])
def test_nack_with_requeue_redelivers_with_flag_and_delivery_count(
        conn: pika.BlockingConnection, counted: dict[str, int]) -> None:
    def work() -> list[tuple[bytes, bool, Any]]:
        ch = conn.channel()
        ch.queue_declare("rq", durable=True, arguments=QQ)
        ch.confirm_delivery()
        ch.basic_publish("", "rq", b"once", pika.BasicProperties(headers={"h": "v"}))
        seen = []
        for method, props, body in ch.consume("rq", inactivity_timeout=5):
            assert method is not None, "delivery never came"
            seen.append((body, method.redelivered, props.headers))
            if len(seen) == 1:
                ch.basic_nack(method.delivery_tag, requeue=True)
            else:
                ch.basic_ack(method.delivery_tag)
                break
        ch.cancel()
        return seen
    assert client(work) == [(b"once", False, {"h": "v"}),
                            (b"once", True, {"h": "v", **counted})]


def test_basic_get_purge_and_delete(qq: QqCluster, conn: pika.BlockingConnection) -> None:
    def work() -> dict[str, Any]:
        ch = conn.channel()
        ch.queue_declare("g", durable=True, arguments=QQ)
        ch.confirm_delivery()
        for i in range(4):
            ch.basic_publish("", "g", b"g%d" % i)
        method, _props, body = ch.basic_get("g")
        first = (body, method.message_count, method.redelivered)
        ch.basic_reject(method.delivery_tag, requeue=True)
        method, _props, body = ch.basic_get("g", auto_ack=True)
        again = (body, method.message_count, method.redelivered)
        purged = ch.queue_purge("g").method.message_count
        empty = ch.basic_get("g")
        ch.basic_publish("", "g", b"last")
        deleted = ch.queue_delete("g").method.message_count
        return {"first": first, "again": again, "purged": purged, "empty": empty,
                "deleted": deleted}
    out = client(work)
    assert out["first"] == (b"g0", 3, False)
    assert out["again"] == (b"g0", 3, True)
    assert out["purged"] == 3
    assert out["empty"] == (None, None, None)
    assert out["deleted"] == 1
    assert qq.registry.lookup("/", "g") is None


def test_deleting_a_queue_cancels_its_consumers_on_other_connections(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    cancelled: list[Any] = []

    def consume() -> str:
        ch = conn.channel()
        ch.queue_declare("gone", durable=True, arguments=QQ)
        ch.add_on_cancel_callback(cancelled.append)
        return ch.basic_consume("gone", lambda *a: None)
    tag = client(consume)
    other = qq.connect()
    client(lambda: other.channel().queue_delete("gone"))
    hub_wait_until(lambda: client(lambda: conn.process_data_events(0.01) or bool(cancelled)),
                   "server-side basic.cancel")
    assert [c.method.consumer_tag for c in cancelled] == [tag]
    client(other.close)


@pytest.mark.parametrize("release", [RELEASES["4.2"]], ids=["4.2"])
def test_global_qos_is_refused_by_quorum_queues(conn: pika.BlockingConnection) -> None:
    """With `global_qos` permitted (up to 4.2) a quorum queue refuses a consumer on a
    channel with a global prefetch."""
    def work() -> Any:
        ch = conn.channel()
        ch.queue_declare("gq", durable=True, arguments=QQ)
        ch.basic_qos(prefetch_count=10, global_qos=True)
        with pytest.raises(pex.ConnectionClosedByBroker) as info:
            # refused before consume-ok: basic_consume itself sees the close
            ch.basic_consume("gq", lambda *a: None)
            for _ in range(200):
                conn.process_data_events(0.05)
        return info.value
    error = client(work)
    assert (error.reply_code, error.reply_text) == (
        540, "NOT_IMPLEMENTED - queue 'gq' in vhost '/' does not support global qos")


@pytest.mark.parametrize("release", [RELEASES["4.3"]], ids=["4.3"])
def test_global_qos_is_a_per_consumer_prefetch_where_the_release_denies_it(
        conn: pika.BlockingConnection) -> None:
    """With `global_qos` denied (4.3) the channel takes a global prefetch as each
    consumer's, so a quorum queue consumer is accepted and held to it."""
    def work() -> tuple[list[bytes], int]:
        ch = conn.channel()
        ch.queue_declare("gq", durable=True, arguments=QQ)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "gq", b"m%d" % i)
        ch.basic_qos(prefetch_count=2, global_qos=True)
        got: list[bytes] = []
        ch.basic_consume("gq", lambda _c, _m, _p, body: got.append(body))
        for _ in range(200):
            if len(got) >= 2:
                break
            conn.process_data_events(0.05)
        ready = conn.channel().queue_declare("gq", passive=True).method.message_count
        return got, ready
    assert client(work) == ([b"m0", b"m1"], 1)


# ------------------------------------------------------------ flow and failures


def test_soft_limit_blocks_the_reader_until_the_queue_applies_again(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    qq.declare_from(1, "slow", **{"x-quorum-initial-group-size": 2})
    ch = client(conn.channel)
    client(lambda: ch.basic_publish("", "slow", b"first"))  # registers the enqueuer
    hub_wait_until(lambda: qq.channel_info()["publish_seqno"] == 1
                   and qq.channel_info()["pending_raft_commands"] == 0, "first enqueue applied")
    reader = next(iter(qq.listener.readers.values()))
    leader = qq.names[1]
    qq.network.faults.pause(leader)  # it still appends, but nothing it sends arrives

    def publish() -> None:
        for i in range(600):
            ch.basic_publish("", "slow", b"%d" % i)
    client(publish)
    hub_wait_until(lambda: reader.state == "blocked", "reader blocked")
    hub_wait_until(lambda: qq.channel_info()["pending_raft_commands"] == 399, "all dispatched seen")
    info = qq.channel_info()
    # the 33rd outstanding command blocked the channel: its credit grants are withheld,
    # so the reader stops at exactly its initial 400 credits
    assert info["credit_blocked"] == ["slow"]
    assert reader.publishes_dispatched == 400
    assert reader.credit.blocked()
    assert reader.info()["state"] == "flow"

    qq.network.faults.resume(leader)
    hub_wait_until(lambda: reader.publishes_dispatched == 601, "reader reads again")
    hub_wait_until(lambda: qq.channel_info()["pending_raft_commands"] == 0, "everything applied")
    assert qq.channel_info()["credit_blocked"] == []
    ready = client(lambda: conn.channel().queue_declare("slow", passive=True))
    assert ready.method.message_count == 601


def test_confirms_and_consumers_carry_on_after_the_leader_node_dies(
        qq: QqCluster, conn: pika.BlockingConnection) -> None:
    qq.declare_from(1, "ha")
    assert qq.ra_leader("ha")[1] == qq.names[1]
    sub_conn = qq.connect()
    pub = client(conn.channel)
    client(pub.confirm_delivery)
    sub = client(sub_conn.channel)
    client(lambda: sub.basic_qos(prefetch_count=10))
    bodies: list[bytes] = []

    def publish(first: int, n: int) -> None:
        for i in range(first, first + n):
            pub.basic_publish("", "ha", b"%d" % i)

    def consume(until: int) -> None:
        for method, _props, body in sub.consume("ha", inactivity_timeout=10):
            assert method is not None, f"stuck after {len(bodies)} messages"
            bodies.append(body)
            sub.basic_ack(method.delivery_tag)
            if len(bodies) == until:
                return

    client(lambda: publish(0, 50))
    client(lambda: consume(25))
    qq.nodes[1].stop()
    client(lambda: publish(50, 50))  # each publish waits for its confirm
    assert qq.ra_leader("ha")[1] in (qq.names[0], qq.names[2])
    client(lambda: consume(100))
    assert bodies == [b"%d" % i for i in range(100)]
    client(sub_conn.close)


def _reader_of(qq: QqCluster, connect: Any) -> tuple[Any, Any]:
    before = set(qq.listener.readers)
    conn = connect()
    [pid] = set(qq.listener.readers) - before
    return conn, qq.listener.readers[pid]


def test_memory_alarm_blocks_a_publishing_connection_while_consumers_go_on(
        qq: QqCluster) -> None:
    monitor = MemoryMonitor(qq.ctx.alarm, total=1_000_000, measure=lambda: 1000)
    pub_conn, pub_reader = _reader_of(qq, qq.connect)
    sub_conn, sub_reader = _reader_of(qq, qq.connect)

    def fill() -> None:
        ch = pub_conn.channel()
        ch.queue_declare("mem", durable=True, arguments=QQ)
        ch.confirm_delivery()
        for i in range(10):
            ch.basic_publish("", "mem", b"%d" % i)
    client(fill)
    monitor.force_reading(monitor.limit + 1)
    assert qq.ctx.alarm.active == {"memory"}
    client(lambda: pub_conn.channel().basic_publish("", "mem", b"late"))
    hub_wait_until(lambda: pub_reader.state == "blocked", "publisher blocked")

    def consume(n: int) -> list[bytes]:
        ch = sub_conn.channel()
        got = []
        for method, _props, body in ch.consume("mem", inactivity_timeout=10):
            assert method is not None, "consumer starved"
            got.append(body)
            ch.basic_ack(method.delivery_tag)
            if len(got) == n:
                break
        ch.cancel()
        return got
    assert client(lambda: consume(10)) == [b"%d" % i for i in range(10)]
    assert sub_reader.info()["state"] == "blocking"
    assert pub_reader.info()["state"] == "blocked"

    monitor.force_reading(0)
    assert qq.ctx.alarm.active == set()
    assert client(lambda: consume(1)) == [b"late"]
    client(pub_conn.close)
    client(sub_conn.close)


def test_reject_publish_overflow_nacks_once_the_queue_is_over_its_limit(
        conn: pika.BlockingConnection) -> None:
    def work() -> list[str]:
        ch = conn.channel()
        ch.queue_declare("full", durable=True,
                         arguments={**QQ, "x-max-length": 1, "x-overflow": "reject-publish"})
        ch.confirm_delivery()
        outcomes = []
        for i in range(3):
            try:
                ch.basic_publish("", "full", b"%d" % i)
                outcomes.append("ack")
            except pex.NackError:
                outcomes.append("nack")
        return outcomes
    # the limit is checked after an enqueue is applied: the second publish still fits
    assert client(work) == ["ack", "ack", "nack"]


def test_classic_declares_go_to_the_classic_backend_when_one_is_configured(
        qq: QqCluster) -> None:
    memory = MemoryBackend(qq.nodes[0])
    qq.backend.classic = memory
    conn = qq.connect()

    def work() -> tuple[bytes, bytes]:
        ch = conn.channel()
        ch.queue_declare("tmp", exclusive=True)
        ch.queue_declare("dur", durable=True)
        ch.confirm_delivery()
        ch.basic_publish("", "tmp", b"classic")
        ch.basic_publish("", "dur", b"quorum")
        return ch.basic_get("tmp", auto_ack=True)[2], ch.basic_get("dur", auto_ack=True)[2]
    assert client(work) == (b"classic", b"quorum")
    assert memory.queue("/", "tmp") is not None
    assert qq.registry.lookup("/", "tmp") is None
    assert qq.record("dur").ra_name == "%2F_dur"
    client(conn.close)


@pytest.mark.parametrize(("args", "text"), [
    ({"x-priority": "high"}, "invalid arg 'x-priority' for queue 'ca' in vhost '/': "
                             "\"expected integer, got longstr\""),
    ({"x-consumer-timeout": -1}, "invalid arg 'x-consumer-timeout' for queue 'ca' in vhost "
                                 "'/': {value_negative,-1}"),
    ({"x-stream-offset": "first"}, "invalid arg 'x-stream-offset' for queue 'ca' in vhost "
                                   "'/' of queue type rabbit_quorum_queue"),
])
def test_consumer_arguments_are_checked_for_the_queue_type(
        conn: pika.BlockingConnection, args: dict[str, Any], text: str) -> None:
    def work() -> str:
        ch = conn.channel()
        ch.queue_declare("ca", durable=True, arguments=QQ)
        def consume() -> None:
            # refused before consume-ok: basic_consume itself sees the close
            ch.basic_consume("ca", lambda *a: None, arguments=args)
            for _ in range(200):
                conn.process_data_events(0.05)
        return closed_with(consume)
    assert client(work) == "406 PRECONDITION_FAILED - " + text


@pytest.mark.parametrize("release", [RELEASES["4.2"]], ids=["4.2"])
def test_a_quorum_queues_consumer_timeout_argument_closes_a_slow_consumers_channel(
    qq: QqCluster, conn: pika.BlockingConnection,
) -> None:
    qq.ctx.config.channel_tick_interval = 50
    qq.ctx.config.consumer_timeout = None  # off on the node: the queue's own value applies
    reasons: list[Any] = []

    def run() -> None:
        ch = conn.channel()
        ch.queue_declare("qct", durable=True, arguments={**QQ, "x-consumer-timeout": 200})
        ch.confirm_delivery()
        ch.basic_publish("", "qct", b"m")
        ch._impl.add_on_close_callback(lambda _ch, reason: reasons.append(reason))
        ch.basic_consume("qct", lambda *a: None)
        for _ in range(100):
            if not ch.is_open:
                break
            conn.process_data_events(time_limit=0.05)

    client(run)
    assert [(r.reply_code, r.reply_text.split(". This")[0]) for r in reasons] == [
        (406, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. "
              "Timeout value used: 200 ms")]
