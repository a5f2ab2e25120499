"""A publisher's confirms survive its queue's leader restarting.

A member that has just restarted is a follower that knows no leader: Ra drops a
pipelined command it receives then without answering (there is nobody to name
in a ``not_leader`` rejection). The session gets its enqueues through anyway,
as ``rabbit_fifo_client`` does: the queue, once it has a leader again, tells
every enqueuer it knows about the ``leader_change``, and the session resends
every command still pending.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import actors
from fifo import queue_session
from fifo.ra_glue import start_queue
from ra import api
from tests.fifo.helpers import QNAME
from tests.ra.ra_proc_support import Cluster, make_cluster

SERVER_CONFIG = {"tick_timeout": 100}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = make_cluster()
    try:
        yield c
    finally:
        for n in c.nodes:
            n.stop()


def _messages_total(s: Any) -> int:
    return int(s.messages_total)


def _confirmed(session: Any, want: set[int], timeout_s: float = 15.0) -> set[int]:
    got: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while not want <= got and time.monotonic() < deadline:
        msg = actors.receive(100, match=lambda m: isinstance(m, tuple)
                             and m[:2] == ("queue_actions", session))
        if msg is actors.TIMEOUT:
            continue
        for action in msg[2]:
            if action[0] == "settled":
                got.update(action[2])
    return got


@pytest.mark.parametrize("machine_version", [7, 8])
def test_publishes_to_a_restarting_single_member_queue_are_all_confirmed(
        cluster: Cluster, machine_version: int) -> None:
    a = cluster.nodes[0]
    with a.attached():
        res = start_queue("default", "q1", QNAME, [a.name], {}, server_config=SERVER_CONFIG,
                          machine_version=machine_version)
        assert res[0] == "ok", res
        (sid,) = res[1]
        ok, session = queue_session.start(res[1], QNAME, actors.self())
        assert ok == "ok"
        for n in range(1, 4):
            assert queue_session.call(session, ("enqueue", n, b"before")) == "ok"
        assert _confirmed(session, {1, 2, 3}) >= {1, 2, 3}

        assert api.stop_server("default", sid) == "ok"
        assert api.restart_server("default", sid) == "ok"
        # the member is still a follower that knows no leader
        assert api.ping(sid) == ("pong", "follower")
        for n in range(4, 24):
            assert queue_session.call(session, ("enqueue", n, b"after")) == "ok"
        assert _confirmed(session, set(range(4, 24))) == set(range(4, 24))


@pytest.mark.parametrize("machine_version", [7, 8])
def test_publishes_while_the_leader_of_three_restarts_are_all_confirmed(
        cluster: Cluster, machine_version: int) -> None:
    a = cluster.nodes[0]
    names = [n.name for n in cluster.nodes]
    with a.attached():
        res = start_queue("default", "q1", QNAME, names, {}, server_config=SERVER_CONFIG,
                          machine_version=machine_version)
        assert res[0] == "ok", res
        ok, session = queue_session.start(res[1], QNAME, actors.self())
        assert ok == "ok"
        assert queue_session.call(session, ("enqueue", 1, b"before")) == "ok"
        assert _confirmed(session, {1}) == {1}
        leader = api.members(res[1])[2]

        assert api.stop_server("default", leader) == "ok"
        # sent to the stopped leader: lost until a new leader asks for them again
        for n in range(2, 12):
            assert queue_session.call(session, ("enqueue", n, b"during")) == "ok"
        assert api.restart_server("default", leader) == "ok"
        for n in range(12, 22):
            assert queue_session.call(session, ("enqueue", n, b"after")) == "ok"
        assert _confirmed(session, set(range(2, 22))) == set(range(2, 22))
        new_leader = api.members(res[1])[2]
        _, (_, total), _ = api.local_query(new_leader, _messages_total)
        assert total == 21
