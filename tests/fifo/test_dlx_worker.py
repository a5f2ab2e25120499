"""At-least-once dead lettering on real Ra servers: the dead-letter worker.

Queue ``q1`` runs on A, B, C with ``dead_letter_handler = at_least_once``; B
leads, so B's node runs the worker. A consumer on A rejects messages, the
queue keeps them as dead letters and hands them to the worker, which
re-publishes each through a router. The router here is a stand-in for the
broker's exchanges: it routes routing key ``k`` to queue ``dlq`` and forwards
every publish to the test process, which plays the target queue and confirms,
nacks or ignores it. The source queue may only forget a dead letter once the
target confirmed it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import actors
from actors import trace
from fifo import replica_trace
from fifo.dlx_worker import DLX_SUP, DlxWorkerEnv, start_dlx_sup
from fifo.mc import BasicMessage
from fifo.ra_glue import start_queue
from fifo.records import RabbitFifoState
from ra import api
from ra import system as ra_system
from supervision import supervisor
from tests.fifo.helpers import QNAME
from tests.fifo.test_fifo_on_ra_local_delivery import (
    SERVER_CONFIG,
    Record,
    Seen,
    consume,
    session_on,
)
from tests.ra.ra_proc_support import Cluster, make_cluster, wait_until

CONFIG = {"dead_letter_handler": "at_least_once", "overflow_strategy": "reject_publish"}
#: short confirm timeout so that retries happen within a test
SETTLE_TIMEOUT = 200


class FakeRouter:
    """Routes by routing key; every publish is reported to `broker`, which answers."""

    def __init__(self, broker: Any, routes: dict[str, list[str]], queue_ref: Any) -> None:
        self.broker = broker
        self.routes = routes
        self.queue_ref = queue_ref

    def lookup_topology(self, queue_resource: Any) -> tuple[Any, Any]:
        return ("dlx", None)

    def exchange_exists(self, exchange: Any) -> bool:
        return exchange == "dlx"

    def route(self, exchange: Any, routing_keys: Sequence[Any], msg: Any) -> list[Any]:
        actors.send(self.broker, ("routed", actors.node(), list(routing_keys)))
        return sorted({q for k in routing_keys for q in self.routes.get(k, [])})

    def publish(self, queues: Sequence[Any], msg: Any, correlation: int) -> tuple[str, Any]:
        actors.send(self.broker, ("published", actors.node(), actors.self(), list(queues), msg,
                                  correlation))
        return ("ok", [])

    def handle_event(self, queue: Any, event: Any) -> list[Any]:
        outcome, seqs = event
        return [(outcome, queue, seqs)]

    def redelivers(self, queue: Any) -> bool:
        return False


@dataclass
class Published:
    node: str
    worker: Any
    queues: list[str]
    msg: BasicMessage
    seq: int


@dataclass
class Broker:
    """The test process as the dead-letter target: it sees publishes and answers them."""

    answer: Callable[[Published, list[Published]], str | None]
    published: list[Published] = field(default_factory=list)
    routed: list[tuple[str, list[Any]]] = field(default_factory=list)

    def pump(self, pred: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            msg = actors.receive(50, match=lambda m: isinstance(m, tuple) and m[0] in (
                "published", "routed"))
            match msg:
                case ("published", node, worker, queues, body, seq):
                    p = Published(node, worker, queues, body, seq)
                    self.published.append(p)
                    outcome = self.answer(p, self.published)
                    if outcome is not None:
                        for q in queues:
                            actors.send(worker, ("$gen_cast", ("queue_event", q,
                                                               (outcome, [seq]))))
                case ("routed", node, keys):
                    self.routed.append((node, keys))

    def bodies(self, node: str | None = None) -> list[bytes]:
        return [p.msg.body for p in self.published if node is None or p.node == node]


def confirm(_p: Published, _all: list[Published]) -> str | None:
    return "settled"


@dataclass
class DlQueue:
    cluster: Cluster
    record: Record
    ids: list[tuple[str, str]]
    names: list[str]

    def sid(self, i: int) -> tuple[str, str]:
        return self.ids[i]


def declare(nodes: list[str]) -> Any:
    return start_queue("default", "q1", QNAME, nodes, CONFIG, server_config=SERVER_CONFIG)


def dlx_sup_up(env: DlxWorkerEnv) -> Any:
    return start_dlx_sup(env)


def dlx_children() -> list[Any]:
    return [pid for _id, pid, _t, _m in supervisor.which_children(DLX_SUP)
            if pid is not None]


@pytest.fixture
def dlq() -> Iterator[DlQueue]:
    record = Record()
    previous = trace.set_sink(record.sink)
    views = replica_trace.record_views(True)
    cluster = make_cluster()
    try:
        a, b, c = cluster.nodes
        names = [a.name, b.name, c.name]
        with a.attached():
            router = functools.partial(FakeRouter, actors.self(), {"k": ["dlq"]})
            env = DlxWorkerEnv(router_factory=router, settle_timeout=SETTLE_TIMEOUT)
            for node in names:
                assert ra_system.rpc(node, dlx_sup_up, env)[0] == "ok"
            res = ra_system.rpc(b.name, declare, names)
            assert res[0] == "ok", res
            assert api.members(res[1])[2] == ("q1", b.name)
            yield DlQueue(cluster, record, res[1], names)
    finally:
        for node in cluster.nodes:
            node.stop()
        trace.set_sink(previous)
        replica_trace.record_views(views)
        replica_trace.forget()


def dead_letter(q: DlQueue, *bodies: bytes, key: str = "k") -> None:
    """Publish `bodies` with routing key `key` and have a consumer on A reject them all."""
    seen = Seen()
    c1 = consume(q, q.names[0], "c1", 10)
    publisher = session_on(q, q.names[0])
    for n, body in enumerate(bodies, start=1):
        msg = BasicMessage(body, ttl=60_000, annotations={"routing_keys": [key]})
        assert actors.gen_server.call(publisher, ("enqueue", n, msg)) == "ok"
    seen.until(lambda: len(seen.delivered[c1]) == len(bodies), "deliveries to c1")
    ids = [mid for mid, _, _ in seen.delivered[c1]]
    assert actors.gen_server.call(c1, ("discard", "c1", ids)) == "ok"


def _dlx_counts(s: RabbitFifoState) -> tuple[int, int, int]:
    checked_out = 0 if s.dlx.consumer is None else len(s.dlx.consumer.checked_out)
    return (s.messages_total + len(s.dlx.discards) + checked_out, len(s.dlx.discards),
            checked_out)


def dlx_state(sid: tuple[str, str]) -> tuple[int, int, int]:
    """``(messages in the queue, dead letters waiting, dead letters at the worker)``."""
    res = api.local_query(sid, _dlx_counts)
    return res[1][1]  # type: ignore[no-any-return]


def all_forwarded(q: DlQueue) -> bool:
    return all(dlx_state(sid) == (0, 0, 0) for sid in q.ids)


# --- tests -----------------------------------------------------------------------------------


def test_dead_letters_are_forwarded_once_and_settled_after_the_confirm(dlq: DlQueue) -> None:
    broker = Broker(confirm)
    dead_letter(dlq, b"d1", b"d2", b"d3")
    broker.pump(lambda: len(broker.published) == 3, "three publishes")
    wait_until(lambda: all_forwarded(dlq), what="source queue emptied on every member")

    b = dlq.names[1]
    assert broker.bodies() == [b"d1", b"d2", b"d3"]
    assert {p.node for p in broker.published} == {b}
    assert [p.seq for p in broker.published] == [1, 2, 3]
    first = broker.published[0].msg
    assert first.ttl is None
    # the reject counted as a failed delivery; the death and the new route are recorded
    assert dict(first.annotations) == {"routing_keys": ["k"], "exchange": "dlx",
                                       "deaths": (("q1", "rejected"),), "delivery_count": 1}
    assert all(p.queues == ["dlq"] for p in broker.published)
    assert dlq.record.assert_replicas_agree(dlq.names) > 0


@pytest.mark.parametrize("first_answer", [None, "rejected"], ids=["confirm_lost", "nacked"])
def test_an_unconfirmed_dead_letter_is_published_again_and_only_then_settled(
        dlq: DlQueue, first_answer: str | None) -> None:
    def answer(p: Published, published: list[Published]) -> str | None:
        earlier = [x for x in published if x.seq == p.seq]
        return first_answer if len(earlier) == 1 else "settled"

    broker = Broker(answer)
    dead_letter(dlq, b"d1", b"d2")
    broker.pump(lambda: len(broker.published) >= 2, "first publishes")
    # nothing is confirmed yet: the source queue still holds both dead letters
    assert dlx_state(dlq.sid(1)) == (2, 0, 2)
    broker.pump(lambda: len(broker.published) >= 4, "second publishes")
    wait_until(lambda: all_forwarded(dlq), what="source queue emptied on every member")
    assert sorted(broker.bodies()) == [b"d1", b"d1", b"d2", b"d2"]
    assert sorted(p.seq for p in broker.published) == [1, 1, 2, 2]


def test_a_dead_letter_without_route_stays_in_the_queue_and_is_retried(
        dlq: DlQueue, caplog: pytest.LogCaptureFixture) -> None:
    broker = Broker(confirm)
    with caplog.at_level(logging.WARNING, logger="warren.fifo.dlx"):
        dead_letter(dlq, b"lost", key="nowhere")
        broker.pump(lambda: len(broker.routed) >= 3, "the first route and two retries")
    assert broker.published == []
    assert all(keys == ["nowhere"] for _node, keys in broker.routed)
    assert dlx_state(dlq.sid(1)) == (1, 0, 1)
    assert sum("no queue to route to" in r.getMessage() for r in caplog.records) == 1


def test_after_a_leader_change_the_new_leaders_worker_forwards_what_was_unsettled(
        dlq: DlQueue) -> None:
    a, b, _c = dlq.names

    def answer(p: Published, _published: list[Published]) -> str | None:
        return "settled" if p.node == a else None  # B's worker never gets a confirm

    broker = Broker(answer)
    dead_letter(dlq, b"d1", b"d2", b"d3")
    broker.pump(lambda: len(broker.published) == 3, "B's worker publishes")
    [b_worker] = ra_system.rpc(b, dlx_children)
    assert b_worker.node == b

    assert api.transfer_leadership(dlq.sid(1), dlq.sid(0)) == "ok"
    broker.pump(lambda: len(broker.bodies(a)) == 3, "A's worker publishes")
    wait_until(lambda: all_forwarded(dlq), what="source queue emptied on every member")

    # every dead letter reached the target at least once, and each one B's worker
    # could not get confirmed was published again by A's worker
    assert broker.bodies(b) == [b"d1", b"d2", b"d3"]
    assert broker.bodies(a) == [b"d1", b"d2", b"d3"]
    assert ra_system.rpc(b, dlx_children) == []
    [a_worker] = ra_system.rpc(a, dlx_children)
    assert {p.worker for p in broker.published if p.node == a} == {a_worker}
    assert dlq.record.assert_replicas_agree(dlq.names) > 0
