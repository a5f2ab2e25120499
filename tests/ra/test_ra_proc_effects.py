"""Who executes machine effects: the ``local`` rule on real processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import actors
from ra import api
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    make_cluster,
    overview,
    wait_until,
)


@pytest.fixture
def four() -> Iterator[Cluster]:
    c = make_cluster(4)
    try:
        yield c
    finally:
        for node in c.nodes:
            node.stop()


def test_local_send_msg_is_executed_by_the_replica_on_the_targets_node(four: Cluster) -> None:
    s1, s2, _s3 = four.ids
    with four.nodes[0].attached():
        assert api.start_cluster("default", "e", SeqMachine(), four.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert leader_of(four.ids) == s1
    with four.nodes[1].attached():
        me = actors.self()
        # the voter on this node is down: the leader must not stand in for it
        assert api.stop_server("default", s2) == "ok"
        assert api.process_command(s1, ("send_local", me, "hello")) == ("ok", "ok", s1)
        committed = overview(s1)["commit_index"]
        assert api.restart_server("default", s2) == "ok"
        # s2 applies the entry when it catches up, and sends from this node
        assert actors.receive(5000) == "hello"
        wait_until(lambda: overview(s2)["last_applied"] >= committed)
        assert actors.receive(0) is actors.TIMEOUT


def test_local_send_msg_to_a_node_without_a_voter_is_executed_by_the_leader(
        four: Cluster) -> None:
    s1 = four.ids[0]
    with four.nodes[0].attached():
        assert api.start_cluster("default", "e", SeqMachine(), four.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert leader_of(four.ids) == s1
    with four.nodes[3].attached():
        me = actors.self()
        assert api.process_command(s1, ("send_local", me, "hi")) == ("ok", "ok", s1)
        assert actors.receive(5000) == "hi"
        for sid in four.ids:
            wait_until(lambda sid=sid: overview(sid)["last_applied"] ==
                       overview(s1)["last_applied"])
        assert actors.receive(0) is actors.TIMEOUT
