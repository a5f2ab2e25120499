"""Single-server membership changes and leadership transfer."""

from __future__ import annotations

from ra import server as core
from ra.types import AppendEntriesReply, AppendEntriesRpc, RequestVoteRpc
from tests.ra.ra_testlib import S1, S2, S3, entries, entry, leader, rpcs, server

S4 = ("s4", "n4")


def join(who: object, mode: str = "after_log_append", from_: object = "caller") -> tuple:
    return ("command", ("$ra_join", {"ts": 0, "from": from_}, who, mode))


def leave(who: object, from_: object = "caller") -> tuple:
    return ("command", ("$ra_leave", {"ts": 0, "from": from_}, who, "after_log_append"))


def permitted_leader() -> object:
    st = leader(log=entries(1), term=1)
    st.cluster_change_permitted = True
    return st


def test_changes_are_refused_until_the_new_leaders_noop_is_applied() -> None:
    st = leader(log=entries(1), term=1)
    core.handle_state_enter("leader", "candidate", st)
    _, st, effects = core.handle("leader", join(S4), st)
    assert effects == [("reply", "caller", ("error", "cluster_change_not_permitted"))]
    assert st.log.last_index_term() == (1, 1)


def test_join_switches_to_the_new_config_at_append_and_blocks_further_changes() -> None:
    st = permitted_leader()
    _, st, effects = core.handle("leader", join(S4), st)
    assert ("reply", "caller", ("wrap_reply", (2, 1))) in effects
    assert set(st.cluster) == {S1, S2, S3, S4}
    assert st.cluster_index_term == (2, 1) and st.cluster_change_permitted is False
    assert st.previous_cluster is not None and set(st.previous_cluster[2]) == {S1, S2, S3}
    # the new member starts from index 1 and receives the whole log
    assert rpcs(effects)[S4].prev_log_index == 0
    _, st, effects = core.handle("leader", leave(S2), st)
    assert effects == [("reply", "caller", ("error", "cluster_change_not_permitted"))]
    stored = st.log.fetch(2)[2]
    assert stored[0] == "$ra_cluster_change" and set(stored[2]) == {S1, S2, S3, S4}


def test_quorum_is_computed_over_the_new_config() -> None:
    st = permitted_leader()
    core.handle("leader", join(S4), st)
    core.handle("leader", ("ra_log_event", ("written", 1, [2])), st)
    _, st, _ = core.handle("leader", (S2, AppendEntriesReply(1, True, 3, 2, 1)), st)
    assert st.commit_index == 0  # 2 of 4 voters is not a quorum
    _, st, _ = core.handle("leader", (S4, AppendEntriesReply(1, True, 3, 2, 1)), st)
    assert st.commit_index == 2 and st.cluster_change_permitted is True


def test_join_of_a_member_and_leave_of_a_stranger_are_refused() -> None:
    st = permitted_leader()
    refused = [("reply", "caller", ("error", "already_member"))]
    assert core.handle("leader", join(S2), st)[2] == refused
    refused = [("reply", "caller", ("error", "not_member"))]
    assert core.handle("leader", leave(S4), st)[2] == refused


def test_promotable_join_needs_a_uid_and_gets_a_target() -> None:
    st = permitted_leader()
    _, st, effects = core.handle("leader", join({"id": S4, "membership": "promotable"}), st)
    assert effects == [("reply", "caller", ("error", "missing_uid"))]
    core.handle("leader", join({"id": S4, "membership": "promotable", "uid": "u4"}), st)
    assert st.cluster[S4].voter_status == {"membership": "promotable", "uid": "u4", "target": 2}
    assert not st.cluster[S4].is_voter()


def test_promotable_peer_is_promoted_once_it_reaches_its_target() -> None:
    st = permitted_leader()
    core.handle("leader", join({"id": S4, "membership": "promotable", "uid": "u4"}), st)
    _, st, effects = core.handle("leader", (S4, AppendEntriesReply(1, True, 3, 2, 1)), st)
    promote = [e for e in effects if e[0] == "next_event" and e[1][0] == "command"]
    assert promote == [("next_event", ("command", ("$ra_join", {"ts": 0}, {
        "id": S4, "voter_status": {"membership": "voter", "uid": "u4", "target": 2}},
        "noreply")))]


def test_removed_leader_stops_once_its_removal_is_committed() -> None:
    st = permitted_leader()
    core.handle("leader", leave(S1), st)
    assert S1 not in st.cluster
    role, st, _ = core.handle("leader", ("ra_log_event", ("written", 1, [2])), st)
    assert role == "leader" and st.commit_index == 0
    # as in Ra, the removed leader's own written index still counts towards the quorum
    role, st, effects = core.handle("leader", (S2, AppendEntriesReply(1, True, 3, 2, 1)), st)
    assert role == core.STOP and st.commit_index == 2
    # before stopping it pushes the new commit index out
    assert rpcs(effects)[S3].leader_commit == 2


def test_follower_adopts_a_cluster_change_at_append_time() -> None:
    st = server(S2, log=entries(1), term=1)
    change = (2, 1, ("$ra_cluster_change", {"ts": 0}, {S1: {}, S2: {}, S3: {}, S4: {}}, "noreply"))
    core.handle("follower", AppendEntriesRpc(1, S1, 0, 1, 1, (change,)), st)
    assert set(st.cluster) == {S1, S2, S3, S4} and st.cluster_index_term == (2, 1)


def test_follower_reverts_a_config_whose_entry_is_overwritten() -> None:
    st = server(S2, log=entries(1), term=1)
    change = (2, 1, ("$ra_cluster_change", {"ts": 0}, {S1: {}, S2: {}, S3: {}, S4: {}}, "noreply"))
    core.handle("follower", AppendEntriesRpc(1, S1, 0, 1, 1, (change,)), st)
    core.handle("follower", AppendEntriesRpc(2, S3, 0, 1, 1, (entry(2, 2),)), st)
    assert set(st.cluster) == {S1, S2, S3} and st.cluster_index_term == (0, 0)


def test_follower_membership_follows_a_change_naming_its_uid() -> None:
    st = server(S2, log=entries(1), term=1, uid="u2")
    change = (2, 1, ("$ra_cluster_change", {"ts": 0},
                     {S1: {}, S2: {"voter_status": {"membership": "non_voter", "uid": "u2"}},
                      S3: {}}, "noreply"))
    core.handle("follower", AppendEntriesRpc(1, S1, 0, 1, 1, (change,)), st)
    assert st.membership == "non_voter"


def test_reverting_a_demotion_makes_the_member_a_voter_again() -> None:
    # S2 started as a voter (the initial members carry no voter status); a change
    # appended by the old leader demotes it, and a new leader overwrites that entry
    st = server(S2, log=entries(1), term=1, uid="u2")
    demote = (2, 1, ("$ra_cluster_change", {"ts": 0},
                     {S1: {}, S2: {"voter_status": {"membership": "non_voter", "uid": "u2"}},
                      S3: {}}, "noreply"))
    core.handle("follower", AppendEntriesRpc(1, S1, 0, 1, 1, (demote,)), st)
    assert st.membership == "non_voter" and st.cluster_index_term == (2, 1)
    core.handle("follower", AppendEntriesRpc(2, S3, 0, 1, 1, (entry(2, 2),)), st)
    assert st.membership == "voter"
    assert set(st.cluster) == {S1, S2, S3} and st.cluster[S2].voter_status is None
    assert st.cluster_index_term == (0, 0) and st.log.fetch_term(2) == 2


def test_a_restarted_member_recomputes_the_config_it_reverts_to_from_its_log() -> None:
    # after a restart the member knows its log's newest change (S4 joined at 3) but
    # not the one before it, which is in its log at 2 (S2 promotable)
    promotable = {"membership": "promotable", "uid": "u2", "target": 5}
    earlier = (2, 1, ("$ra_cluster_change", {"ts": 0},
                      {S1: {}, S2: {"voter_status": promotable}, S3: {}}, "noreply"))
    joined = (3, 1, ("$ra_cluster_change", {"ts": 0},
                     {S1: {}, S2: {}, S3: {}, S4: {}}, "noreply"))
    st = server(S2, log=[entry(1, 1), earlier, joined], term=1, uid="u2")
    core.recover(st)
    assert set(st.cluster) == {S1, S2, S3, S4} and st.previous_cluster is None
    assert st.cluster_index_term == (3, 1) and st.membership == "voter"
    core.handle("follower", AppendEntriesRpc(2, S3, 0, 2, 1, (entry(3, 2),)), st)
    assert set(st.cluster) == {S1, S2, S3} and st.cluster_index_term == (2, 1)
    assert st.cluster[S2].voter_status == promotable and st.membership == "promotable"


def test_a_restarted_member_with_no_earlier_change_reverts_to_its_initial_members() -> None:
    joined = (2, 1, ("$ra_cluster_change", {"ts": 0},
                     {S1: {}, S2: {}, S3: {}, S4: {}}, "noreply"))
    st = server(S2, log=[entry(1, 1), joined], term=1)
    core.recover(st)
    core.handle("follower", AppendEntriesRpc(2, S3, 0, 1, 1, (entry(2, 2),)), st)
    assert set(st.cluster) == {S1, S2, S3} and st.cluster_index_term == (0, 0)


# --- leadership transfer -----------------------------------------------------


def test_transfer_refusals() -> None:
    st = leader(log=entries(1), term=1)
    already = [("reply", "already_leader")]
    assert core.handle("leader", ("transfer_leadership", S1), st)[2] == already
    assert core.handle("leader", ("transfer_leadership", S4), st)[2] == [
        ("reply", ("error", "unknown_member"))]
    st.cluster[S2].next_index = 1
    assert core.handle("leader", ("transfer_leadership", S2), st)[2] == [
        ("reply", ("error", "not_up_to_date"))]


def test_transfer_tells_the_target_to_elect_itself_and_waits() -> None:
    st = leader(log=entries(1), term=1)
    role, st, effects = core.handle("leader", ("transfer_leadership", S2), st)
    assert role == "await_condition"
    assert effects == [("reply", "ok"), ("send_msg", S2, "election_timeout", "cast")]
    # a same-term AER does not satisfy the condition; a higher-term one does
    assert core.handle("await_condition", AppendEntriesRpc(1, S2, 0, 1, 1), st)[0] == (
        "await_condition")
    newer = AppendEntriesRpc(2, S2, 0, 1, 1)
    role, st, effects = core.handle("await_condition", newer, st)
    assert (role, effects) == ("follower", [("next_event", newer)])


def test_transfer_timeout_returns_to_leader_keeping_cluster_change_permission() -> None:
    st = leader(log=entries(1), term=1)
    st.cluster_change_permitted = True
    core.handle("leader", ("transfer_leadership", S2), st)
    role, st, _ = core.handle("await_condition", "await_condition_timeout", st)
    assert role == "leader"
    core.handle_state_enter("leader", "await_condition", st)
    assert st.cluster_change_permitted is True


def test_request_vote_while_transferring_makes_the_leader_a_follower() -> None:
    st = leader(log=entries(1), term=1)
    core.handle("leader", ("transfer_leadership", S2), st)
    rv = RequestVoteRpc(2, S2, 1, 1)
    role, st, effects = core.handle("await_condition", rv, st)
    assert (role, effects) == ("follower", [("next_event", rv)])
