"""Log replication: follower AER handling, WAL-driven replies, leader pipelining, commit."""

from __future__ import annotations

from ra import server as core
from ra.types import AppendEntriesReply, AppendEntriesRpc
from tests.ra.ra_testlib import S1, S2, S3, casts, entries, entry, leader, of_tag, rpcs, server


def aer(term: int, prev: tuple[int, int], ents: list[tuple[int, int, object]] | None = None,
        commit: int = 0, lead: object = S1) -> AppendEntriesRpc:
    return AppendEntriesRpc(term, lead, commit, prev[0], prev[1], tuple(ents or []))


def written(st: object, term: int, *idxs: int) -> tuple[str, tuple[str, int, list[object]]]:
    from ra import seq
    return ("ra_log_event", ("written", term, seq.from_list(idxs)))


# --- follower ---------------------------------------------------------------


def test_follower_appends_but_replies_only_once_the_wal_has_written() -> None:
    st = server(S2, log=entries(1), term=1)
    role, st, effects = core.handle("follower", aer(1, (1, 1), entries(1, 1, first=2)), st)
    assert role == "follower"
    assert effects == [("record_leader_msg", S1)]  # no reply yet
    assert st.log.last_index_term() == (3, 1) and st.log.last_written() == (1, 1)
    assert st.log.take_wal_writes() == [entries(1, 1, first=2)]
    role, st, effects = core.handle("follower", written(st, 1, 2, 3), st)
    assert effects == [("cast", S1, (S2, AppendEntriesReply(1, True, 4, 3, 1)))]


def test_written_event_for_a_partial_batch_reports_only_that_prefix() -> None:
    st = server(S2, log=entries(1), term=1)
    core.handle("follower", aer(1, (1, 1), entries(1, 1, 1, first=2)), st)
    _, st, effects = core.handle("follower", written(st, 1, 2), st)
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(1, True, 5, 2, 1)))]


def test_written_event_that_changes_nothing_sends_nothing() -> None:
    st = server(S2, log=entries(1, 1), term=1)
    _, st, effects = core.handle("follower", written(st, 1, 1, 2), st)
    assert effects == []


def test_follower_adopts_leader_commit_and_applies_up_to_its_last_index() -> None:
    st = server(S2, log=entries(1), term=1)
    # commit index 3 is beyond what the follower holds after this AER (2)
    _, st, effects = core.handle("follower", aer(1, (1, 1), entries(1, first=2), commit=3), st)
    assert st.commit_index == 3 and st.last_applied == 2
    assert st.machine_state == 1 + 2
    # applied before being fsynced locally: a quorum already holds the entries durably
    assert st.log.last_written() == (1, 1)
    assert effects[0] == ("aux", "eval")


def test_heartbeat_style_aer_with_only_commit_index_replies_at_once() -> None:
    st = server(S2, log=entries(1, 1), term=1)
    _, st, effects = core.handle("follower", aer(1, (2, 1), commit=2), st)
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(1, True, 3, 2, 1)))]
    assert st.last_applied == 2


def test_follower_never_deletes_entries_that_match() -> None:
    # a delayed, older AER covering a prefix must not truncate newer matching entries
    st = server(S2, log=entries(1, 1, 1, 1), term=1)
    _, st, effects = core.handle("follower", aer(1, (1, 1), entries(1, first=2)), st)
    assert st.log.last_index_term() == (4, 1)
    assert st.log.take_wal_writes() == []
    # it proves only up to 2, so it confirms only that much
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(1, True, 3, 2, 1)))]


def test_conflicting_suffix_is_overwritten_and_last_written_pulled_down() -> None:
    st = server(S2, log=entries(1, 1, 1, 1), term=1)
    new = [entry(3, 2), entry(4, 2)]
    _, st, effects = core.handle("follower", aer(2, (2, 1), new), st)
    assert st.log.fold(1, 4) == entries(1, 1) + new
    assert st.log.last_written() == (2, 1)
    # a late `written` for the overwritten entries confirms nothing beyond 2
    _, st, effects = core.handle("follower", written(st, 1, 3, 4), st)
    assert effects == [] and st.log.last_written() == (2, 1)
    _, st, effects = core.handle("follower", written(st, 2, 3, 4), st)
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(2, True, 5, 4, 2)))]


def test_empty_aer_below_local_last_index_truncates_to_prev() -> None:
    st = server(S2, log=entries(1, 1, 1), term=1)
    _, st, effects = core.handle("follower", aer(2, (1, 1)), st)
    assert st.log.last_index_term() == (1, 1)
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(2, True, 2, 1, 1)))]


def test_missing_prev_entry_replies_with_next_index_and_awaits_catch_up() -> None:
    st = server(S2, log=entries(1, 1), term=1)
    role, st, effects = core.handle("follower", aer(1, (5, 1), entries(1, first=6)), st)
    assert role == "await_condition"
    assert effects == [("cast", S1, (S2, AppendEntriesReply(1, False, 3, 2, 1))),
                       ("record_leader_msg", S1)]
    # heartbeats and unrelated messages are dropped while waiting
    assert core.handle("await_condition", aer(1, (4, 1)), st)[0:3:2] == ("await_condition", [])
    # an AER whose prev now matches leaves the condition and is re-dispatched
    fix = aer(1, (2, 1), entries(1, first=3))
    role, st, effects = core.handle("await_condition", fix, st)
    assert (role, effects) == ("follower", [("next_event", fix)])


def test_catch_up_timeout_resends_the_reply_and_returns_to_follower() -> None:
    st = server(S2, log=entries(1), term=1)
    _, st, first = core.handle("follower", aer(1, (4, 1)), st)
    role, st, effects = core.handle("await_condition", "await_condition_timeout", st)
    assert (role, effects) == ("follower", first)
    assert core.condition_timeout_ms(st) == 30_000


def test_term_mismatch_rewinds_the_reply_to_last_applied() -> None:
    st = server(S2, log=entries(1, 1, 1), term=1)
    core.handle("follower", aer(1, (3, 1), commit=1), st)
    assert st.last_applied == 1
    role, st, effects = core.handle("follower", aer(2, (3, 2), entries(2, first=4)), st)
    assert role == "await_condition"
    assert casts(effects) == [(S1, (S2, AppendEntriesReply(2, False, 2, 1, 1)))]


def test_stale_leader_gets_a_failure_with_our_term() -> None:
    st = server(S2, log=entries(1), term=3)
    role, st, effects = core.handle("follower", aer(2, (1, 1), entries(2, first=2)), st)
    assert role == "follower" and st.log.last_index_term() == (1, 1)
    assert effects == [("cast", S1, (S2, AppendEntriesReply(3, False, 2, 1, 1)))]


# --- leader ----------------------------------------------------------------


def test_leader_appends_a_command_and_pipelines_it_to_every_peer() -> None:
    st = leader(log=entries(1), term=2)
    role, st, effects = core.handle("leader", ("command", entry(0, 0)[2]), st)
    assert role == "leader"
    sent = rpcs(effects)
    assert set(sent) == {S2, S3}
    assert sent[S2] == AppendEntriesRpc(2, S1, 0, 1, 1, (st.log.fetch(2),))
    assert st.cluster[S2].next_index == 3


def test_pipelining_stops_at_max_pipeline_count() -> None:
    st = leader(log=entries(1), term=1, max_pipeline_count=3)
    st.cluster[S2].match_index = 1  # in flight = next - match - 1
    st.cluster[S3].match_index = 1
    for i in range(5):
        _, st, effects = core.handle("leader", ("command", entry(0, 0, ("add", i))[2]), st)
    assert st.cluster[S2].next_index == 5  # 3 entries in flight, no more
    _, st, effects = core.handle("leader", ("command", entry(0, 0, ("add", 9))[2]), st)
    assert rpcs(effects) == {}


def test_batches_are_limited_by_max_append_entries_rpc_batch_size() -> None:
    st = leader(log=entries(*[1] * 10), term=1, max_append_entries_rpc_batch_size=4)
    for p in (S2, S3):
        st.cluster[p].next_index = 1
    more, effects = core.make_pipelined_rpc_effects(st, [])
    assert more is True
    assert [len(r.entries) for r in rpcs(effects).values()] == [4, 4]
    _, st, effects = core.handle("leader", "pipeline_rpcs", st)
    assert effects[0] == ("next_event", "info", "pipeline_rpcs")


def test_leader_commits_on_its_own_written_index_not_its_appended_one() -> None:
    st = leader(members=[S1], log=entries(1), term=1, written=0)
    st.log.take_wal_writes()
    assert st.commit_index == 0
    role, st, effects = core.handle("leader", written(st, 1, 1), st)
    assert st.commit_index == 1 and st.last_applied == 1


def test_commit_needs_a_quorum_of_match_indexes() -> None:
    st = leader(log=entries(2, 2, 2), term=2)
    _, st, _ = core.handle("leader", (S2, AppendEntriesReply(2, True, 3, 2, 2)), st)
    assert st.commit_index == 2
    _, st, _ = core.handle("leader", (S3, AppendEntriesReply(2, True, 4, 3, 2)), st)
    assert st.commit_index == 3


def test_entries_of_earlier_terms_are_not_committed_by_counting() -> None:
    # Raft figure 8: index 2 (term 2) is on a majority, but the leader is in term 4
    st = leader(log=entries(1, 2), term=4)
    _, st, effects = core.handle("leader", (S2, AppendEntriesReply(4, True, 3, 2, 2)), st)
    assert st.commit_index == 0 and st.last_applied == 0
    # once an entry of the current term is replicated, everything before commits with it
    core.handle("leader", ("command", entry(0, 0)[2]), st)
    core.handle("leader", written(st, 4, 3), st)
    _, st, _ = core.handle("leader", (S2, AppendEntriesReply(4, True, 4, 3, 4)), st)
    assert st.commit_index == 3 and st.last_applied == 3


def test_failure_reply_rewinds_next_index() -> None:
    st = leader(log=entries(1, 1, 1, 1), term=2)
    # the follower's log ends at 2 (missing case): resend from its next index
    _, st, effects = core.handle("leader", (S2, AppendEntriesReply(2, False, 3, 2, 1)), st)
    assert st.cluster[S2].match_index == 2
    assert rpcs(effects)[S2].prev_log_index == 2


def test_failure_reply_with_a_different_term_steps_back_below_it() -> None:
    st = leader(log=entries(1, 1, 1, 1), term=3)
    # the follower's written entry at 3 has term 2, the leader's has term 1
    _, st, effects = core.handle("leader", (S2, AppendEntriesReply(3, False, 5, 3, 2)), st)
    # next_index goes back to 3 and entries are resent from there at once
    resent = rpcs(effects)[S2]
    assert (resent.prev_log_index, [e[0] for e in resent.entries]) == (2, [3, 4])


def test_peer_that_lost_data_resets_its_match_index() -> None:
    st = leader(log=entries(1, 1, 1, 1), term=2)
    st.cluster[S2].match_index = 4
    _, st, _ = core.handle("leader", (S2, AppendEntriesReply(2, False, 2, 1, 1)), st)
    assert st.cluster[S2].match_index == 1


def test_tick_resends_one_entry_to_stale_peers_only() -> None:
    st = leader(log=entries(1, 1), term=1)
    st.cluster[S2].next_index = 2  # one entry unconfirmed
    st.cluster[S3].match_index = 2
    st.cluster[S3].next_index = 3
    for peer in (S2, S3):
        # versions known and current: the tick asks no peer for its info
        st.cluster[peer].machine_version = 0
    effects = core.tick("leader", st)
    sent = rpcs(effects)
    assert set(sent) == {S2}
    assert sent[S2] == AppendEntriesRpc(1, S1, 0, 1, 1, (st.log.fetch(2),))
    assert effects[-1] == ("aux", "tick")


def test_after_log_append_replies_with_index_and_term_on_append() -> None:
    st = leader(log=entries(1), term=2)
    cmd = ("$usr", {"ts": 1, "from": "caller"}, ("add", 1), "after_log_append")
    _, st, effects = core.handle("leader", ("command", cmd), st)
    assert of_tag(effects, "reply") == [("reply", "caller", ("wrap_reply", (2, 2)))]


def test_wal_down_on_the_leader_replies_an_error_and_waits_for_the_wal() -> None:
    st = leader(log=entries(1), term=2)
    st.log.wal_up = False
    cmd = ("$usr", {"ts": 1, "from": "caller"}, ("add", 1), "await_consensus")
    role, st, effects = core.handle("leader", ("command", cmd), st)
    assert role == "await_condition"
    assert effects == [("reply", "caller", ("error", "wal_down"))]
    assert core.condition_timeout_ms(st) == 5000
    role, st, effects = core.handle("await_condition", "await_condition_timeout", st)
    assert role == "leader"
    assert effects == [("next_event", "cast", ("transfer_leadership", S2))]


def test_pipeline_due_says_whether_the_core_would_send_anything() -> None:
    """The shell skips a `pipeline_rpcs` event when `pipeline_due` is false, so it must
    be false exactly when the core's answer is no effect."""
    import copy
    import itertools

    from ra import replication

    cases = 0
    for next2, next3, match2, ci_sent, status3 in itertools.product(
            (2, 3, 4), (3, 4), (0, 1, 3), (0, 3), ("normal", "suspended")):
        st = leader(log=entries(1, 1, 1), term=1, max_pipeline_count=2)
        st.commit_index = 3
        st.cluster[S2].next_index, st.cluster[S2].match_index = next2, min(match2, next2 - 1)
        st.cluster[S2].commit_index_sent = ci_sent
        st.cluster[S3].next_index, st.cluster[S3].match_index = next3, next3 - 1
        st.cluster[S3].commit_index_sent = 3
        st.cluster[S3].status = status3
        due = replication.pipeline_due(st)
        _, after, effects = core.handle("leader", "pipeline_rpcs", copy.deepcopy(st))
        assert due == bool(effects), (next2, next3, match2, ci_sent, status3)
        cases += due
    assert 0 < cases < 72  # both answers occur
