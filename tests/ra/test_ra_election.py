"""Elections as Ra runs them: pre-vote, real vote, becoming leader, stepping down."""

from __future__ import annotations

import pytest

from ra import server as core
from ra.types import (
    AppendEntriesReply,
    AppendEntriesRpc,
    HeartbeatRpc,
    PreVoteResult,
    PreVoteRpc,
    RequestVoteResult,
    RequestVoteRpc,
)
from tests.ra.ra_testlib import MEMBERS, S1, S2, S3, entries, leader, of_tag, server


def pre_vote(term: int, token: object = 1, cand: object = S2, last: tuple[int, int] = (0, 0),
             machine_version: int = 0, version: int = 1) -> PreVoteRpc:
    return PreVoteRpc(machine_version=machine_version, term=term, token=token, candidate_id=cand,
                      last_log_index=last[0], last_log_term=last[1], version=version)


# --- starting a round -------------------------------------------------------


def test_election_timeout_starts_a_pre_vote_round_without_changing_term() -> None:
    st = server(log=entries(1, 1), term=1)
    role, st, effects = core.handle("follower", "election_timeout", st)
    assert role == "pre_vote"
    assert st.current_term == 1 and st.voted_for == S1 and st.leader_id is None
    token = st.pre_vote_token
    assert effects[0] == ("next_event", "cast", PreVoteResult(1, token, True))
    (_, reqs), = of_tag(effects, "send_vote_requests")
    assert dict(reqs) == {p: pre_vote(1, token, S1, (2, 1)) for p in (S2, S3)}


def test_pre_vote_quorum_starts_a_real_election_with_term_plus_one() -> None:
    st = server(log=entries(1), term=1)
    _, st, effects = core.handle("follower", "election_timeout", st)
    token = st.pre_vote_token
    role, st, _ = core.handle("pre_vote", PreVoteResult(1, token, True), st)
    assert (role, st.votes) == ("pre_vote", 1)
    role, st, effects = core.handle("pre_vote", PreVoteResult(1, token, True), st)
    assert role == "candidate"
    assert st.current_term == 2 and st.voted_for == S1
    assert effects[0] == ("next_event", "cast", RequestVoteResult(2, True))
    (_, reqs), = of_tag(effects, "send_vote_requests")
    assert dict(reqs) == {p: RequestVoteRpc(2, S1, 1, 1) for p in (S2, S3)}


def test_pre_vote_results_with_a_stale_token_do_not_count() -> None:
    st = server(term=1)
    _, st, _ = core.handle("follower", "election_timeout", st)
    for _ in range(3):
        role, st, _ = core.handle("pre_vote", PreVoteResult(1, "old-token", True), st)
    assert (role, st.votes) == ("pre_vote", 0)


def test_candidate_becomes_leader_on_quorum_and_writes_a_noop() -> None:
    st = server(log=entries(1, 1), term=1)
    _, st, _ = core.call_for_election("candidate", st)
    role, st, _ = core.handle("candidate", RequestVoteResult(2, True), st)
    assert role == "candidate"
    role, st, effects = core.handle("candidate", RequestVoteResult(2, True), st, now_ms=99)
    assert role == "leader" and st.leader_id == S1
    # the noop keeps the effective version; peers are asked what they support
    assert effects[0] == ("next_event", "cast", ("command", ("noop", {"ts": 99}, 0)))
    assert [(eff[0], eff[1]) for eff in effects[1:]] == [("send_rpc", S2), ("send_rpc", S3)]
    for peer in (S2, S3):
        p = st.cluster[peer]
        assert (p.next_index, p.match_index, p.commit_index_sent) == (3, 0, 0)


def test_votes_from_an_older_term_are_ignored() -> None:
    st = server(term=4)
    _, st, _ = core.call_for_election("candidate", st)
    for _ in range(3):
        role, st, _ = core.handle("candidate", RequestVoteResult(4, True), st)
    assert role == "candidate" and st.votes == 0


def test_single_member_cluster_elects_itself() -> None:
    st = server(members=[S1])
    role, st, effects = core.handle("follower", "election_timeout", st)
    assert role == "pre_vote"
    role, st, effects = core.handle("pre_vote", effects[0][2], st)
    assert role == "candidate"
    role, st, _ = core.handle("candidate", effects[0][2], st)
    assert role == "leader"


# --- voting ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local_log", "cand_last", "granted"),
    [
        ([1, 1], (2, 1), True),   # same last entry
        ([1, 1], (3, 1), True),   # longer, same term
        ([1, 1], (1, 2), True),   # higher last term wins over length
        ([1, 2], (5, 1), False),  # lower last term loses whatever the length
        ([1, 1, 1], (2, 1), False),  # shorter with the same term
    ],
)
def test_vote_only_for_an_up_to_date_log(
    local_log: list[int], cand_last: tuple[int, int], granted: bool
) -> None:
    st = server(log=entries(*local_log), term=2)
    role, st, effects = core.handle("follower", RequestVoteRpc(3, S2, *cand_last), st)
    assert effects == [("reply", RequestVoteResult(3, granted))]
    assert st.current_term == 3  # the term is adopted either way
    assert st.voted_for == (S2 if granted else None)


def test_at_most_one_vote_per_term() -> None:
    st = server(term=2)
    _, st, effects = core.handle("follower", RequestVoteRpc(3, S2, 0, 0), st)
    assert effects == [("reply", RequestVoteResult(3, True))]
    _, st, effects = core.handle("follower", RequestVoteRpc(3, S3, 0, 0), st)
    assert effects == [("reply", RequestVoteResult(3, False))]
    # the same candidate may ask again
    _, st, effects = core.handle("follower", RequestVoteRpc(3, S2, 0, 0), st)
    assert effects == [("reply", RequestVoteResult(3, True))]


def test_lower_term_vote_request_is_denied_with_own_term() -> None:
    st = server(term=5)
    _, st, effects = core.handle("follower", RequestVoteRpc(4, S2, 9, 9), st)
    assert effects == [("reply", RequestVoteResult(5, False))]
    assert st.voted_for is None


def test_non_voters_neither_vote_nor_campaign() -> None:
    members = {S1: {"voter_status": {"membership": "non_voter", "uid": "s1"}}, S2: {}, S3: {}}
    st = server(members=members, uid="s1", term=1)
    assert st.membership == "non_voter"
    assert core.handle("follower", RequestVoteRpc(2, S2, 0, 0), st)[2] == []
    assert core.handle("follower", pre_vote(2), st)[2] == []
    role, st, effects = core.handle("follower", "election_timeout", st)
    assert (role, effects) == ("follower", [])


# --- pre-vote answers -------------------------------------------------


def test_pre_vote_grant_adopts_the_term_but_never_sets_voted_for() -> None:
    st = server(term=1)
    role, st, effects = core.handle("follower", pre_vote(3), st)
    assert effects == [("reply", PreVoteResult(3, 1, True))]
    assert st.current_term == 3 and st.voted_for is None


def test_follower_with_a_better_log_does_not_answer_and_starts_its_timer() -> None:
    st = server(log=entries(1, 2), term=2)
    role, st, effects = core.handle("follower", pre_vote(2, last=(5, 1)), st)
    assert (role, effects) == ("follower", ["start_election_timeout"])


def test_other_states_deny_an_out_of_date_pre_vote() -> None:
    st = server(log=entries(1, 2), term=2)
    _, st, _ = core.handle("follower", "election_timeout", st)
    role, st, effects = core.handle("pre_vote", pre_vote(2, last=(5, 1)), st)
    assert effects == [("reply", PreVoteResult(2, 1, False))]


def test_pre_vote_from_an_older_term_is_denied_with_our_term() -> None:
    st = server(term=4)
    _, _, effects = core.handle("follower", pre_vote(3, token=8), st)
    assert effects == [("reply", PreVoteResult(4, 8, False))]


def test_pre_vote_from_a_newer_protocol_version_is_denied() -> None:
    st = server(term=1)
    _, _, effects = core.handle("follower", pre_vote(1, version=2), st)
    assert effects == [("reply", PreVoteResult(1, 1, False))]


def test_pre_vote_with_an_unsupported_machine_version_is_denied_and_arms_a_timer() -> None:
    st = server(term=1)  # local code runs machine version 0
    _, _, effects = core.handle("follower", pre_vote(1, machine_version=3), st)
    assert effects == [("reply", PreVoteResult(1, 1, False)), "start_election_timeout"]


# --- a healthy leader is not disrupted (the point of pre-vote) ------------------


def test_healthy_leader_answers_a_pre_vote_with_append_entries_and_keeps_its_term() -> None:
    st = leader(log=entries(1, 1), term=1)
    role, st, effects = core.handle("leader", pre_vote(1, cand=S3, last=(2, 1)), st)
    assert role == "leader" and st.current_term == 1
    assert [e[0] for e in effects] == ["send_rpc", "send_rpc"]
    to_s3 = dict((e[1], e[2]) for e in effects)[S3]
    assert to_s3 == AppendEntriesRpc(1, S1, 0, 2, 1, ())


def test_rejoining_member_falls_back_to_follower_without_a_term_change() -> None:
    # s3 lost contact and canvasses pre-votes in the leader's term
    s3 = server(S3, log=entries(1, 1), term=1)
    role, s3, effects = core.handle("follower", "election_timeout", s3)
    (_, reqs), = of_tag(effects, "send_vote_requests")
    lead = leader(log=entries(1, 1), term=1)
    _, lead, leffects = core.handle("leader", dict(reqs)[S1], lead)
    aer = dict((e[1], e[2]) for e in leffects)[S3]
    role, s3, effects = core.handle("pre_vote", aer, s3)
    assert (role, s3.current_term) == ("follower", 1)
    assert effects == [("next_event", aer)]
    role, s3, _ = core.handle("follower", aer, s3)
    assert role == "follower" and s3.leader_id == S1 and lead.current_term == 1


def test_two_candidates_of_one_term_cannot_both_win_votes() -> None:
    # election safety: two candidates in one term cannot both reach quorum
    voters = {sid: server(sid, term=1) for sid in MEMBERS}
    granted: dict[object, int] = {S1: 0, S2: 0}
    for cand in (S1, S2):
        for st in voters.values():
            _, st, effects = core.handle("follower", RequestVoteRpc(2, cand, 0, 0), st)
            if effects == [("reply", RequestVoteResult(2, True))]:
                granted[cand] += 1
    assert granted == {S1: 3, S2: 0}


# --- stepping down ----------------------------------------------------------------


@pytest.mark.parametrize(
    "msg",
    [AppendEntriesRpc(5, S2, 0, 0, 0), HeartbeatRpc(0, 5, S2), RequestVoteRpc(5, S2, 9, 9),
     pre_vote(5)],
)
def test_leader_steps_down_on_a_higher_term_and_redispatches(msg: object) -> None:
    st = leader(term=3)
    role, st, effects = core.handle("leader", msg, st)
    assert role == "follower" and st.current_term == 5 and st.leader_id is None
    assert effects == [("next_event", msg)]


def test_leader_steps_down_on_a_higher_term_reply_from_a_member() -> None:
    st = leader(term=3)
    role, st, effects = core.handle("leader", (S2, AppendEntriesReply(7, False, 1, 0, 0)), st)
    assert (role, st.current_term, effects) == ("follower", 7, [])


def test_removed_members_cannot_depose_the_leader() -> None:
    st = leader(term=3)
    stranger = ("s9", "n9")
    for msg in (RequestVoteRpc(9, stranger, 9, 9), pre_vote(9, cand=stranger),
                (stranger, AppendEntriesReply(9, False, 1, 0, 0))):
        role, st, effects = core.handle("leader", msg, st)
        assert (role, st.current_term, effects) == ("leader", 3, [])


def test_two_leaders_in_one_term_is_a_crash() -> None:
    st = leader(term=3)
    with pytest.raises(core.LeaderSawAppendEntriesInSameTerm):
        core.handle("leader", AppendEntriesRpc(3, S2, 0, 0, 0), st)


def test_candidate_steps_down_on_append_entries_of_its_term() -> None:
    st = server(term=1)
    _, st, _ = core.call_for_election("candidate", st)
    aer = AppendEntriesRpc(2, S2, 0, 0, 0)
    role, st, effects = core.handle("candidate", aer, st)
    assert (role, effects) == ("follower", [("next_event", aer)])
    assert st.voted_for is None


def test_candidate_denies_same_term_vote_and_answers_stale_leader() -> None:
    st = server(term=1)
    _, st, _ = core.call_for_election("candidate", st)
    _, st, effects = core.handle("candidate", RequestVoteRpc(2, S3, 9, 9), st)
    assert effects == [("reply", RequestVoteResult(2, False))]
    _, st, effects = core.handle("candidate", AppendEntriesRpc(1, S3, 0, 0, 0), st)
    assert effects == [("cast", S3, (S1, AppendEntriesReply(2, False, 1, 0, 0)))]


def test_candidate_timeout_starts_a_new_real_election() -> None:
    st = server(term=1)
    _, st, _ = core.call_for_election("candidate", st)
    role, st, _ = core.handle("candidate", "election_timeout", st)
    assert (role, st.current_term) == ("candidate", 3)
