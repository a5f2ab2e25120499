"""Dead lettering from quorum queues, end to end: pika against three in-process nodes.

Every node has the at-most-once dead-letter publisher installed and a
`rabbit_fifo_dlx_sup` whose workers route through the same exchanges, as a
broker node has. Source queues dead-letter through exchange `dlx` (direct),
whose binding `dead` leads to the quorum queue `dlq`; what the consumer of
`dlq` sees — body, routing, `x-death` and `x-first/last-death-*` — is
RabbitMQ's.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from channel.queue_types.quorum import qq_dead_letter
from channel.queue_types.quorum.qq_dead_letter import DeadLetterPublisher
from channel.queue_types.quorum.qq_dlx_router import router_factory
from fifo.dlx_worker import DlxWorkerEnv, start_dlx_sup
from fifo.queries import query_messages_total
from fifo.records import RabbitFifoState
from ra import api
from releases import RELEASES
from tests.channel.conftest import client
from tests.channel.test_qq_amqp import QQ, QqCluster, conn, qq, release  # noqa: F401 - fixtures
from tests.waiting import hub_wait_until, wait_until

#: confirm timeout of the at-least-once workers: retries happen within a test
SETTLE_TIMEOUT = 300
TO_DLQ = {"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead"}


@pytest.fixture
def dlx(qq: QqCluster) -> Iterator[QqCluster]:  # noqa: F811 - the imported fixture
    env = DlxWorkerEnv(router_factory(qq.backend, qq.ctx.topology),
                       settle_timeout=SETTLE_TIMEOUT)
    publisher = DeadLetterPublisher(qq.ctx.topology, qq.registry)
    try:
        for node in qq.nodes:
            qq_dead_letter.install(node.name, publisher)
            with node.attached():
                assert start_dlx_sup(env)[0] == "ok"
        yield qq
    finally:
        for node in qq.nodes:
            qq_dead_letter.uninstall(node.name)


def setup_dlq(ch: Any) -> None:
    ch.exchange_declare("dlx", "direct", durable=True)
    ch.queue_declare("dlq", durable=True, arguments=QQ)
    ch.queue_bind("dlq", "dlx", "dead")


def get_dead(ch: Any, limit_s: float = 10.0) -> tuple[Any, Any, bytes]:
    """The next message of `dlq` (waits for it to arrive)."""
    def got() -> tuple[Any, Any, bytes] | None:
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        return None if method is None else (method, props, body)

    return wait_until(got, "a message dead-lettered to dlq", limit_s, poll_s=0.02)


def source_state(cluster: QqCluster, name: str) -> RabbitFifoState:
    with cluster.nodes[0].attached():
        result = api.leader_query(list(cluster.record(name).servers), lambda s: s, 2000)
    assert result[0] == "ok", result
    return result[1][1]  # type: ignore[no-any-return]


@pytest.mark.parametrize("release", [RELEASES["4.2"]], ids=["4.2"])
def test_a_poison_message_is_dead_lettered_with_its_delivery_limit_death(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    """Up to 4.2 every requeue counts toward the delivery limit (from 4.3 only failed
    deliveries do)."""
    def work() -> tuple[int, Any]:
        ch = conn.channel()
        setup_dlq(ch)
        ch.queue_declare("poison", durable=True,
                         arguments={**QQ, **TO_DLQ, "x-delivery-limit": 2})
        ch.confirm_delivery()
        ch.basic_publish("", "poison", b"bad", pika.BasicProperties(headers={"h": 1}))
        deliveries = 0
        while True:
            method, _props, _body = ch.basic_get("poison")
            if method is None:
                break
            deliveries += 1
            ch.basic_nack(method.delivery_tag, requeue=True)
        return deliveries, get_dead(ch)

    deliveries, (method, props, body) = client(work)
    assert deliveries == 3  # delivered while its delivery count is within the limit of 2
    assert body == b"bad"
    assert (method.exchange, method.routing_key) == ("dlx", "dead")
    headers = props.headers
    assert headers["h"] == 1
    [death] = headers["x-death"]
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1, "reason": "delivery_limit", "queue": "poison", "exchange": "",
        "routing-keys": ["poison"]}
    assert isinstance(death["time"], datetime.datetime)
    assert (headers["x-first-death-queue"], headers["x-first-death-reason"],
            headers["x-first-death-exchange"]) == ("poison", "delivery_limit", "")
    assert (headers["x-last-death-queue"], headers["x-last-death-reason"],
            headers["x-last-death-exchange"]) == ("poison", "delivery_limit", "")


def test_expired_messages_keep_their_routing_keys_and_lose_their_ttl(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    def work() -> Any:
        ch = conn.channel()
        setup_dlq(ch)
        ch.exchange_declare("orders", "topic", durable=True)
        ch.queue_declare("ttl", durable=True, arguments={
            **QQ, "x-dead-letter-exchange": "dlx", "x-message-ttl": 50})
        ch.queue_bind("ttl", "orders", "#")
        ch.confirm_delivery()
        ch.basic_publish("orders", "dead", b"late",
                         pika.BasicProperties(expiration="30000", headers={"CC": ["cc.1"]}))
        return get_dead(ch)

    method, props, body = client(work)
    assert body == b"late" and props.expiration is None
    assert (method.exchange, method.routing_key) == ("dlx", "dead")  # its own key routed it
    [death] = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["exchange"], death["routing-keys"],
            death["original-expiration"]) == ("expired", "ttl", "orders", ["dead", "cc.1"],
                                              "30000")


def test_drop_head_overflow_dead_letters_the_oldest_as_maxlen(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    def work() -> tuple[Any, Any]:
        ch = conn.channel()
        setup_dlq(ch)
        ch.queue_declare("short", durable=True,
                         arguments={**QQ, **TO_DLQ, "x-max-length": 2})
        ch.confirm_delivery()
        for body in (b"m1", b"m2", b"m3"):
            ch.basic_publish("", "short", body)
        dead = get_dead(ch)
        kept = [ch.basic_get("short", auto_ack=True)[2] for _ in range(2)]
        return dead, kept

    (_method, props, body), kept = client(work)
    assert body == b"m1" and kept == [b"m2", b"m3"]
    assert [(d["reason"], d["queue"]) for d in props.headers["x-death"]] == [("maxlen", "short")]


def test_a_message_dead_lettered_twice_counts_up_and_keeps_its_first_death(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    def work() -> Any:
        ch = conn.channel()
        ch.exchange_declare("dlx", "direct", durable=True)
        # work -> (rejected) -> retry -> (expired) -> work -> (rejected) -> dlq
        ch.queue_declare("work", durable=True, arguments={
            **QQ, "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "retry"})
        ch.queue_declare("retry", durable=True, arguments={
            **QQ, "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "work",
            "x-message-ttl": 20})
        ch.queue_declare("dlq", durable=True, arguments=QQ)
        ch.queue_bind("retry", "dlx", "retry")
        ch.queue_bind("work", "dlx", "work")
        ch.confirm_delivery()
        ch.basic_publish("", "work", b"job")
        for attempt in (1, 2, 3):
            method = None
            while method is None:
                method, _p, _b = ch.basic_get("work")
            if attempt == 3:  # the third death goes to dlq instead of retry
                ch.queue_unbind("retry", "dlx", "retry")
                ch.queue_bind("dlq", "dlx", "retry")
            ch.basic_reject(method.delivery_tag, requeue=False)
        return get_dead(ch)

    method, props, _body = client(work)
    h = props.headers
    assert [(d["queue"], d["reason"], d["count"]) for d in h["x-death"]] == [
        ("work", "rejected", 3), ("retry", "expired", 2)]
    assert (h["x-first-death-queue"], h["x-first-death-reason"]) == ("work", "rejected")
    assert (h["x-last-death-queue"], h["x-last-death-reason"]) == ("work", "rejected")
    assert method.routing_key == "retry"


def test_at_least_once_settles_in_the_source_only_after_the_target_confirmed(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    args = {**QQ, "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead",
            "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}

    def declare_and_reject() -> None:
        ch = conn.channel()
        ch.exchange_declare("dlx", "direct", durable=True)
        ch.queue_declare("dlq", durable=True, arguments=QQ)
        ch.queue_declare("safe", durable=True, arguments=args)
        ch.confirm_delivery()
        ch.basic_publish("", "safe", b"precious")
        method = None
        while method is None:
            method, _p, _b = ch.basic_get("safe")
        ch.basic_reject(method.delivery_tag, requeue=False)

    client(declare_and_reject)
    # no binding yet: the worker holds the dead letter, the source keeps it
    hub_wait_until(lambda: len(source_state(dlx, "safe").dlx.consumer.checked_out) == 1,
                   "the worker checked the dead letter out")
    s = source_state(dlx, "safe")
    assert query_messages_total(s) == 1 and not s.dlx.discards
    assert client(lambda: conn.channel().basic_get("dlq", auto_ack=True)[0]) is None

    client(lambda: conn.channel().queue_bind("dlq", "dlx", "dead"))
    _method, props, body = client(lambda: get_dead(conn.channel()))
    assert body == b"precious"
    assert [(d["queue"], d["reason"]) for d in props.headers["x-death"]] == [
        ("safe", "rejected")]
    # the target confirmed: the worker settles and the source forgets the message
    hub_wait_until(lambda: query_messages_total(source_state(dlx, "safe")) == 0,
                   "the source settled the dead letter")
    assert not source_state(dlx, "safe").dlx.consumer.checked_out


def test_a_new_leader_seen_by_a_channel_is_recorded_in_the_registry(
        dlx: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    client(lambda: setup_dlq(conn.channel()))
    old = dlx.record("dlq").leader
    assert old is not None
    with dlx.nodes[0].attached():
        assert api.stop_server("default", old) == "ok"

    def publish() -> None:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "dlq", b"after the election")

    client(publish)  # confirmed by the new leader, which the channel's session found
    hub_wait_until(lambda: dlx.record("dlq").leader not in (None, old),
                   "the registry names the new leader")
    assert dlx.record("dlq").leader == dlx.ra_leader("dlq")
