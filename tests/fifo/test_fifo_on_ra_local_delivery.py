"""The quorum queue on three real Ra servers: follower-local delivery.

Nodes A, B, C each run a member of queue ``q1``; B leads. Consumer c1's
channel (a `fifo.queue_session` process) lives on A, c2's on C. Every member
applies every command, so all of them must hold the same service queue after
every log index; but a delivery to a consumer is sent by exactly one member:
the one on the consumer's node (the ``local`` rule), never by the leader on
its behalf. The members record what they apply and what they send through
``actors.trace`` (``applied`` with the full replica view, ``local_delivery``); the
tests read that record.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import actors
from actors import trace
from fifo import queue_session, replica_trace
from fifo.ra_glue import start_queue
from fifo.records import RabbitFifoState
from ra import api
from ra import system as ra_system
from tests.fifo.helpers import QNAME
from tests.ra.ra_proc_support import Cluster, make_cluster, wait_until

#: elections only when a test asks for one (trigger_election), never by a timer race
SERVER_CONFIG = {"tick_timeout": 100, "broadcast_time": 1000}


@dataclass
class Record:
    """What the members applied (per index, per node) and which member sent what."""

    views: dict[int, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    sends: list[tuple[str, Any, Any, list[int]]] = field(default_factory=list)
    dlx_sends: list[tuple[str, Any]] = field(default_factory=list)
    #: (node, kind, index, members) of the rows that say who the members are
    memberships: list[tuple[str, str, Any, Any]] = field(default_factory=list)
    #: (node, index, consumer key, delivery id) of the `settled` rows
    settles: list[tuple[str, Any, Any, Any]] = field(default_factory=list)

    def sink(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "settled":
            self.settles.append((fields["node"], fields["raft_index"],
                                 fields["consumer_key"].rsplit("/", 1)[-1],
                                 fields["delivery_id"]))
        if kind == "leader_elected" or fields.get("cmd_type") == "cluster_change":
            self.memberships.append((fields["node"], kind, fields.get("raft_index"),
                                     fields.get("members")))
        if kind == "applied" and "view" in fields:
            self.views[fields["raft_index"]][fields["node"]] = fields["view"]
        elif kind == "local_delivery" and fields["delivery_id"] == fields["delivery_ids"][0]:
            # one entry per send: the row of its first message
            self.sends.append((fields["node"], fields["to"], fields["tag"],
                               fields["delivery_ids"]))

    def assert_replicas_agree(self, nodes: list[str]) -> int:
        """Every index applied by `nodes` left them in the same state; returns how many."""
        compared = 0
        for index in sorted(self.views):
            by_node = self.views[index]
            views = [by_node[n] for n in nodes if n in by_node]
            assert all(v == views[0] for v in views), f"replicas differ at index {index}"
            compared += len(views) > 1
        return compared


@dataclass
class Queue:
    cluster: Cluster
    record: Record
    ids: list[tuple[str, str]]

    @property
    def a(self) -> str:
        return self.cluster.nodes[0].name

    @property
    def b(self) -> str:
        return self.cluster.nodes[1].name

    @property
    def c(self) -> str:
        return self.cluster.nodes[2].name

    def sid(self, node: str) -> tuple[str, str]:
        return ("q1", node)


def declare(nodes: list[str], config: dict[str, Any], machine_version: int) -> Any:
    return start_queue("default", "q1", QNAME, nodes, config, server_config=SERVER_CONFIG,
                       machine_version=machine_version)


@pytest.fixture(params=[7, 8], ids=["machine7", "machine8"])
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    """Queue ``q1`` on A, B, C with B leading, on machine 7 and on machine 8 (whose
    deliveries carry packed references); the test runs as a process on A."""
    record = Record()
    previous = trace.set_sink(record.sink)
    views = replica_trace.record_views(True)
    cluster = make_cluster()
    try:
        a, b, c = cluster.nodes
        with a.attached():
            names = [a.name, b.name, c.name]
            # declared from B, so B's member stands for election first
            res = ra_system.rpc(b.name, declare, names, {"delivery_limit": 20}, request.param)
            assert res[0] == "ok", res
            assert api.members(res[1])[2] == ("q1", b.name)
            yield Queue(cluster, record, res[1])
    finally:
        for node in cluster.nodes:
            node.stop()
        trace.set_sink(previous)
        replica_trace.record_views(views)
        replica_trace.forget()


# --- helpers ---------------------------------------------------------------------------------


def session_on(q: Queue, node: str) -> Any:
    """A channel's queue session on `node`, reporting its actions to the caller."""
    if node == actors.node():
        res = queue_session.start(q.ids, QNAME, actors.self())
    else:
        res = ra_system.rpc(node, queue_session.start, q.ids, QNAME, actors.self())
    assert res[0] == "ok", res
    return res[1]


def consume(q: Queue, node: str, tag: str, prefetch: int) -> Any:
    pid = session_on(q, node)
    tag_, info = queue_session.call(pid, ("checkout", tag, prefetch, {"ack": True}))
    assert tag_ == "ok", info
    return pid


def publish(pid: Any, *bodies: bytes) -> None:
    for n, body in enumerate(bodies, start=1):
        assert queue_session.call(pid, ("enqueue", n, body)) == "ok"


@dataclass
class Seen:
    """Per session: deliveries ``(msg_id, body, redelivered)`` and confirmed correlations."""

    delivered: dict[Any, list[tuple[int, bytes, bool]]] = field(
        default_factory=lambda: defaultdict(list))
    confirmed: dict[Any, list[int]] = field(default_factory=lambda: defaultdict(list))

    def take(self, msg: Any) -> None:
        _, pid, actions = msg
        for action in actions:
            match action:
                case ("deliver", _tag, _ack, msgs):
                    self.delivered[pid].extend((mid, body, red) for _q, _r, mid, red, body in msgs)
                case ("settled", _q, corrs):
                    self.confirmed[pid].extend(corrs)

    def until(self, pred: Any, what: str, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {dict(self.delivered)}")
            msg = actors.receive(50, match=lambda m: isinstance(m, tuple) and m[:1] == (
                "queue_actions",))
            if msg is not actors.TIMEOUT:
                self.take(msg)


def bodies(seen: Seen, pid: Any) -> list[bytes]:
    return [body for _, body, _ in seen.delivered[pid]]


def messages_total(s: RabbitFifoState) -> int:
    return s.messages_total


def members_caught_up(q: Queue, nodes: list[str]) -> bool:
    applied = [api.member_overview(q.sid(n), 2000)["last_applied"] for n in nodes]
    return len(set(applied)) == 1


# --- the walk-through ------------------------------------------------------------------------


def test_each_delivery_is_sent_by_the_member_on_the_consumers_node_even_after_failover(
        queue: Queue) -> None:
    q, seen = queue, Seen()
    c1 = consume(q, q.a, "c1", 1)
    c2 = consume(q, q.c, "c2", 1)
    publisher = session_on(q, q.a)
    publish(publisher, b"m1", b"m2", b"m3")
    seen.until(lambda: bodies(seen, c1) == [b"m1"] and bodies(seen, c2) == [b"m2"]
               and seen.confirmed[publisher] != [], "m1 at c1, m2 at c2")
    # m3 waits: both consumers used their single credit
    assert [(n, to, tag, ids) for n, to, tag, ids in q.record.sends] == [
        (q.a, c1, "c1", [0]), (q.c, c2, "c2", [0])]

    # the leader B fails; A takes over
    q.cluster.node_of(q.sid(q.b)).stop()
    assert api.trigger_election(q.sid(q.a)) == "ok"
    wait_until(lambda: api.members([q.sid(q.a), q.sid(q.c)], 1000)[2] == q.sid(q.a),
               what="A leads")

    # c1 acks m1: the new leader hands m3 to c1 and, being on c1's node, sends it itself
    assert queue_session.call(c1, ("settle", "c1", [0])) == "ok"
    assert queue_session.call(c2, ("settle", "c2", [0])) == "ok"
    seen.until(lambda: bodies(seen, c1) == [b"m1", b"m3"], "m3 at c1")
    assert queue_session.call(c1, ("settle", "c1", [1])) == "ok"
    wait_until(lambda: all(
        api.local_query(q.sid(n), messages_total)[1][1] == 0 for n in (q.a, q.c)),
        what="every message settled on A and C")
    wait_until(lambda: members_caught_up(q, [q.a, q.c]), what="A and C caught up")

    assert sorted(seen.confirmed[publisher]) == [1, 2, 3]
    assert bodies(seen, c2) == [b"m2"]
    assert q.record.sends == [(q.a, c1, "c1", [0]), (q.c, c2, "c2", [0]), (q.a, c1, "c1", [1])]
    assert not any(node == q.b for node, *_ in q.record.sends)
    # A and C each record the three settles, at the same indexes
    by_node = {n: [(i, tag, d) for node, i, tag, d in q.record.settles if node == n]
               for n in (q.a, q.c)}
    assert sorted((tag, d) for _, tag, d in by_node[q.a]) == [("c1", 0), ("c1", 1), ("c2", 0)]
    assert sorted(by_node[q.a]) == sorted(by_node[q.c])
    compared = q.record.assert_replicas_agree([q.a, q.b, q.c])
    assert compared >= 8
    last = max(q.record.views)
    final = q.record.views[last]
    assert final[q.a] == final[q.c]
    assert final[q.a]["messages_total"] == 0
    assert {c["tag"]: c["credit"] for c in final[q.a]["consumers"].values()} == {"c1": 1,
                                                                                "c2": 1}


def test_leaders_and_cluster_changes_record_the_members(queue: Queue) -> None:
    """The history's membership at each index: the members a leader was
    elected with, then those of each cluster change, on every member that applies it."""
    q = queue
    names = {n: f"q1@{replica_trace.short_node(n)}" for n in (q.a, q.b, q.c)}
    wait_until(lambda: any(k == "leader_elected" for _, k, _, _ in q.record.memberships),
               what="the election recorded")
    [(node, _, _, members)] = [m for m in q.record.memberships if m[1] == "leader_elected"]
    assert node == q.b
    assert members == sorted(names.values())
    reply = api.remove_member(q.sid(q.b), q.sid(q.c))
    assert reply[0] == "ok", reply
    # the change is recorded when the next machine command is applied after it
    publish(session_on(q, q.a), b"m1")
    wait_until(lambda: {n for n, k, _, _ in q.record.memberships if k == "applied"}
               >= {q.a, q.b}, what="the change recorded on A and B")
    changes = {(n, idx, tuple(m)) for n, k, idx, m in q.record.memberships if k == "applied"}
    [idx] = {i for _, i, _ in changes}
    assert {(n, tuple(m)) for n, _, m in changes} >= {
        (q.a, (names[q.a], names[q.b])), (q.b, (names[q.a], names[q.b]))}
    assert idx > 1


def test_messages_of_a_crashed_channel_are_redelivered_by_the_follower_local_to_c2(
        queue: Queue) -> None:
    q, seen = queue, Seen()
    c1 = consume(q, q.a, "c1", 2)
    publisher = session_on(q, q.a)
    publish(publisher, b"m1", b"m2")
    seen.until(lambda: bodies(seen, c1) == [b"m1", b"m2"], "m1 and m2 at c1")
    c2 = consume(q, q.c, "c2", 3)
    assert queue_session.call(publisher, ("enqueue", 3, b"m3")) == "ok"
    seen.until(lambda: bodies(seen, c2) == [b"m3"], "m3 at c2")

    # c1's channel goes down with m1 and m2 unacknowledged: the leader (B) learns of it
    # from its monitor, returns both, and C's member sends them on to c2
    actors.exit(c1, "kill")
    seen.until(lambda: len(seen.delivered[c2]) == 3, "m1 and m2 redelivered to c2")
    assert seen.delivered[c2] == [(0, b"m3", False), (1, b"m1", True), (2, b"m2", True)]
    assert q.record.sends == [(q.a, c1, "c1", [0]), (q.a, c1, "c1", [1]),
                              (q.c, c2, "c2", [0]), (q.c, c2, "c2", [1, 2])]

    wait_until(lambda: members_caught_up(q, [q.a, q.b, q.c]), what="members caught up")
    assert q.record.assert_replicas_agree([q.a, q.b, q.c]) >= 6
    final = q.record.views[max(q.record.views)]
    assert final[q.a] == final[q.b] == final[q.c]
    [only] = final[q.b]["consumers"].values()
    msg_ids, _indexes = only["checked_out"]
    assert (only["tag"], only["pid"], list(msg_ids)) == ("c2", c2, [0, 1, 2])
