"""Who executes machine effects: the ``local`` rule on real processes."""

from __future__ import annotations

import actors
from ra import api
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


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


def _inbox() -> None:
    """Registered as ``far_inbox``: keeps what arrives, hands it over on ``("dump", pid)``."""
    actors.register("far_inbox", actors.self())
    got: list[object] = []
    while True:
        match actors.receive():
            case ("dump", pid):
                actors.send(pid, ("got", got))
            case msg:
                got.append(msg)


def test_sends_to_a_node_without_a_session_are_dropped_not_queued(four: Cluster) -> None:
    """``noconnect``: nothing sent while no session exists arrives once one does."""
    from ra.proc_effects import safe_send

    far = four.nodes[3]
    with far.attached():
        actors.spawn(_inbox)
    with four.nodes[0].attached():
        assert far.name not in actors.nodes()
        safe_send(("far_inbox", far.name), "while_unconnected")
        assert far.name not in actors.nodes()  # no connection was attempted either
        assert actors.get_node().ping(far.name) == "pong"
        safe_send(("far_inbox", far.name), "connected")
    with far.attached():
        me = actors.self()
        wait_until(lambda: actors.send("far_inbox", ("dump", me)) or
                   actors.receive(1000)[1] == ["connected"], what="only the later send")
