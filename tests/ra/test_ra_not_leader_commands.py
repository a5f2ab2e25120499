"""What a member that does not lead does with the commands it is sent.

Ra answers a pipelined command (``notify`` reply mode) that reaches a
non-leader with ``{rejected, {not_leader, Leader, Corr}}`` only when it knows a
leader other than itself; a member that knows none -- one that has just
restarted and not yet been elected, a candidate, a pre-vote member -- drops it
without a word, and it is never applied later. Calls (``process_command``) are
never dropped: they wait until a leader is known and are answered there.

The single-member tests run on the in-memory system and on real node processes
with their log on disk. Elections there are slow (``broadcast_time`` of 2 s),
so commands sent right after the restart reach a follower, and the test
decides when the member is elected (``trigger_election``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from ra import api
from ra import server as core
from tests.ra.ra_multiproc_support import LedgerMachine, proc_cluster, whole_state
from tests.ra.ra_proc_support import Cluster, make_cluster
from tests.ra.ra_testlib import S1, S2, server

#: elections only when the test triggers one (the restart arms a 2-12 s timer)
SLOW_ELECTIONS = {"tick_timeout": 100, "broadcast_time": 2000}

ServerId = tuple[str, str]


@pytest.fixture(params=["memory", "disk"])
def single(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerId]:
    """One member, on an in-memory node or on a node process with a disk log; the
    test runs as a process attached to a node of the same network."""
    if request.param == "memory":
        cluster = make_cluster()
        try:
            with cluster.nodes[0].attached():
                yield ("s1", cluster.nodes[0].name)
        finally:
            for n in cluster.nodes:
                n.stop()
    else:
        with proc_cluster(tmp_path, size=1) as procs:
            yield ("s1", procs.nodes[0].name)


def _applied_state(sid: ServerId) -> Any:
    result = api.local_query(sid, whole_state, 5000)
    assert result[0] == "ok", result
    return result[1][1]


def test_a_restarted_member_drops_pipelined_commands_until_it_is_leader(
        single: ServerId) -> None:
    sid = single
    result = api.start_cluster("default", "nl", LedgerMachine(), [sid], 10_000,
                               server_config=SLOW_ELECTIONS)
    assert result[0] == "ok", result
    assert api.process_command(sid, ("put", 0))[1] == ("put", 2)
    assert api.stop_server("default", sid) == "ok"
    assert api.restart_server("default", sid) == "ok"

    assert api.ping(sid) == ("pong", "follower")
    for seq in range(1, 6):
        api.pipeline_command(sid, ("put", seq), seq, "normal")
    assert api.trigger_election(sid) == "ok"
    # a call waits for the leader and is answered by it
    assert api.process_command(sid, ("put", 6)) == ("ok", ("put", 4), sid)
    api.pipeline_command(sid, ("put", 7), 7, "normal")
    # the first event this process gets is the answer to the last command: the
    # five sent to the follower were neither rejected nor applied
    assert actors.receive(5000) == ("ra_event", sid, ("applied", [(7, ("put", 5))]))
    assert _applied_state(sid) == ((2, 0), (4, 6), (5, 7))


def test_a_follower_rejects_a_pipelined_command_with_the_leaders_id_and_applies_nothing(
        cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        result = api.start_cluster("default", "nl3", LedgerMachine(), cluster.ids, 10_000,
                                   server_config={"tick_timeout": 100})
        assert result[0] == "ok", result
        leader = api.members(cluster.ids)[2]
        follower = next(sid for sid in cluster.ids if sid != leader)
        for seq in (1, 2):
            api.pipeline_command(follower, ("put", seq), seq)
        assert [actors.receive(5000) for _ in (1, 2)] == [
            ("ra_event", follower, ("rejected", ("not_leader", leader, seq)))
            for seq in (1, 2)]
        # resent to the leader named in the rejection, it is applied once
        api.pipeline_command(leader, ("put", 1), 1, "normal")
        msg = actors.receive(5000)
        assert msg[:2] == ("ra_event", leader) and msg[2][0] == "applied", msg
        assert [seq for _idx, seq in _applied_state(leader)] == [1]


@pytest.mark.parametrize("state", ["follower", "receive_snapshot"])
def test_a_fire_and_forget_command_of_any_type_is_forwarded_as_a_user_command(
        state: str) -> None:
    # Ra forwards the data of a noreply command whatever its type, with
    # ``ra:pipeline_command``, which makes it a user command on the leader
    st = server(S2, term=1)
    st.leader_id = S1
    cmd = ("$ra_join", ("join", 1), "noreply")
    assert core.command_not_leader(state, "normal", cmd, st) == [
        ("cast", S1, ("command", "normal", ("$usr", ("join", 1), "noreply")))]


@pytest.mark.parametrize("state", ["follower", "receive_snapshot", "pre_vote", "candidate"])
def test_a_notifying_command_is_rejected_only_with_a_leader_other_than_itself(
        state: str) -> None:
    st = server(S2, term=1)
    cmd = ("$usr", ("put", 1), ("notify", 9, "client"))
    assert core.command_not_leader(state, "low", cmd, st) == []
    st.leader_id = S2  # itself, as during a leadership change: not rejected to itself
    assert core.command_not_leader(state, "low", cmd, st) == []
    st.leader_id = S1
    assert core.command_not_leader(state, "low", cmd, st) == [
        ("send_ra_event", "client", ("rejected", ("not_leader", S1, 9)))]
