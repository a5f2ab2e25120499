"""Consistent queries: a heartbeat round confirms leadership before answering."""

from __future__ import annotations

from ra import server as core
from ra.types import HeartbeatReply, HeartbeatRpc
from tests.ra.ra_testlib import S1, S2, S3, entries, leader


def double(state: int) -> int:
    return state * 2


def ready_leader(members: object = None) -> object:
    st = leader(S1, members=members, log=entries(1, 1), term=1)
    st.cluster_change_permitted = True
    st.machine_state = 21
    return st


def test_query_is_answered_once_a_quorum_confirmed_the_query_index() -> None:
    st = ready_leader()
    _, st, effects = core.handle("leader", ("consistent_query", "from1", double), st)
    assert effects == [("send_rpc", S2, HeartbeatRpc(1, 1, S1)),
                       ("send_rpc", S3, HeartbeatRpc(1, 1, S1))]
    assert st.queries_waiting_heartbeats[0][:2] == (1, "from1")
    # a reply for an older index does not confirm this query
    _, st, effects = core.handle("leader", (S2, HeartbeatReply(0, 1)), st)
    assert effects == []
    _, st, effects = core.handle("leader", (S2, HeartbeatReply(1, 1)), st)
    assert effects == [("reply", "from1", ("ok", 42, S1))]
    assert st.queries_waiting_heartbeats == []
    # the late second reply answers nothing again
    _, st, effects = core.handle("leader", (S3, HeartbeatReply(1, 1)), st)
    assert effects == []


def test_one_confirmation_answers_every_earlier_query_newest_first() -> None:
    st = ready_leader()
    core.handle("leader", ("consistent_query", "a", double), st)
    _, st, effects = core.handle("leader", ("consistent_query", "b", double), st)
    assert [e[2].query_index for e in effects] == [2, 2]
    _, st, effects = core.handle("leader", (S3, HeartbeatReply(2, 1)), st)
    assert effects == [("reply", "b", ("ok", 42, S1)), ("reply", "a", ("ok", 42, S1))]
    assert st.queries_waiting_heartbeats == []


def test_parked_queries_get_one_heartbeat_round_each() -> None:
    st = leader(S1, log=entries(1, 1), term=2)
    st.machine_state = 21
    core.handle("leader", ("consistent_query", "a", double), st)
    _, st, effects = core.handle("leader", ("consistent_query", "b", double), st)
    assert effects == [] and st.query_index == 0
    st.cluster_change_permitted = True
    _, st, effects = core.handle("leader", ("ra_log_event", ("written", 2, [])), st)
    heartbeats = [e for e in effects if e[0] == "send_rpc" and isinstance(e[2], HeartbeatRpc)]
    # the newest parked query takes the lowest index; the older one's round comes first
    assert heartbeats == [("send_rpc", S2, HeartbeatRpc(2, 2, S1)),
                          ("send_rpc", S3, HeartbeatRpc(2, 2, S1)),
                          ("send_rpc", S2, HeartbeatRpc(1, 2, S1)),
                          ("send_rpc", S3, HeartbeatRpc(1, 2, S1))]
    assert [(q[0], q[1]) for q in st.queries_waiting_heartbeats] == [(1, "b"), (2, "a")]
    assert st.pending_consistent_queries == []
    _, st, effects = core.handle("leader", (S2, HeartbeatReply(1, 2)), st)
    assert effects == [("reply", "b", ("ok", 42, S1))]
    _, st, effects = core.handle("leader", (S3, HeartbeatReply(2, 2)), st)
    assert effects == [("reply", "a", ("ok", 42, S1))]


def test_single_member_answers_at_once() -> None:
    st = ready_leader(members=[S1])
    _, _, effects = core.handle("leader", ("consistent_query", "f", double), st)
    assert effects == [("reply", "f", ("ok", 42, S1))]


def test_new_leader_parks_queries_until_its_noop_is_applied() -> None:
    st = leader(S1, log=entries(1, 1), term=2)
    _, st, effects = core.handle("leader", ("consistent_query", "f", double), st)
    assert effects == [] and st.pending_consistent_queries
    core.handle("leader", ("command", ("noop", {"ts": 0}, 0)), st)
    _, st, effects = core.handle("leader", ("ra_log_event", ("written", 2, [3])), st)
    _, st, effects = core.handle("leader", (S2, core.AppendEntriesReply(2, True, 4, 3, 2)), st)
    assert st.cluster_change_permitted
    assert ("send_rpc", S2, HeartbeatRpc(1, 2, S1)) in effects
    _, st, effects = core.handle("leader", (S2, HeartbeatReply(1, 2)), st)
    assert effects == [("reply", "f", ("ok", 2 * st.machine_state, S1))]


def test_higher_term_heartbeat_reply_deposes_and_stale_one_is_ignored() -> None:
    st = ready_leader()
    core.handle("leader", ("consistent_query", "f", double), st)
    _, st, effects = core.handle("leader", (S2, HeartbeatReply(1, 0)), st)
    assert effects == [] and st.cluster[S2].query_index == 0
    role, st, _ = core.handle("leader", (S2, HeartbeatReply(1, 5)), st)
    assert role == "follower" and st.current_term == 5
