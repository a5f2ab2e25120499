"""Cluster deletion in the pure core: the ``'$ra_cluster'
delete`` entry ends the machine's life on every member that applies it; the
leader replicates until every peer has it, a follower until its log is written."""

from __future__ import annotations

from typing import Any

from ra import seq
from ra import server as core
from ra.sim import CounterMachine
from ra.types import RA_CLUSTER, AppendEntriesReply, AppendEntriesRpc
from tests.ra.ra_testlib import S1, S2, S3, cmd, entries, leader, of_tag, rpcs, server

CALLER = ("client_pid", "tag")


class EolCounter(CounterMachine):
    """A counter that tells a watcher its final total when the cluster is deleted."""

    def state_enter(self, ra_state: str, state: Any) -> list[Any]:
        if ra_state == "eol":
            return [("send_msg", "watcher", ("eol", state))]
        return []


def delete_entry(idx: int, term: int) -> tuple[int, int, Any]:
    return (idx, term, (RA_CLUSTER, {"ts": 0, "from": CALLER}, "delete", "await_consensus"))


def written(term: int, *idxs: int) -> tuple[str, Any]:
    return ("ra_log_event", ("written", term, seq.from_list(list(idxs))))


def ok_reply(term: int, last: int) -> AppendEntriesReply:
    return AppendEntriesReply(term, True, last + 1, last, term)


def leader_with_delete_appended() -> Any:
    """A leader of three whose log holds ``add 1`` (committed) and the delete entry."""
    st = leader(log=entries(1), term=1, machine=EolCounter())
    st.commit_index = 0
    delete_cmd = (RA_CLUSTER, {"ts": 0, "from": CALLER}, "delete", "await_consensus")
    role, st, _ = core.handle("leader", ("command", delete_cmd), st)
    assert role == "leader" and st.log.last_index_term() == (2, 1)
    _, st, _ = core.handle("leader", written(1, 2), st)
    return st


def test_leader_applying_delete_runs_eol_effects_replies_and_keeps_replicating() -> None:
    st = leader_with_delete_appended()
    # S2 confirms both entries: a quorum, the delete entry is committed and applied
    role, st, effects = core.handle("leader", (S2, ok_reply(1, 2)), st)
    assert role == "terminating_leader"
    assert st.last_applied == 2 and st.machine_state == 1
    # eol effects lead, then the caller is answered
    assert effects[0] == ("send_msg", "watcher", ("eol", 1))
    assert ("reply", CALLER, ("wrap_reply", "ok")) in effects
    # S3 was sent the entry but has not confirmed it: it is told the new commit index
    rpc = rpcs(effects)[S3]
    assert rpc.leader_commit == 2 and rpc.prev_log_index == 2


def test_terminating_leader_ignores_commands_and_stops_once_every_peer_has_the_entry() -> None:
    st = leader_with_delete_appended()
    role, st, _ = core.handle("leader", (S2, ok_reply(1, 2)), st)
    assert role == "terminating_leader"
    role, st, effects = core.handle("terminating_leader", ("command", cmd(("add", 5))), st)
    assert (role, effects) == ("terminating_leader", [])
    assert st.log.last_index_term() == (2, 1)
    # S2 has not been told the commit index yet: not fully replicated
    assert st.cluster[S2].commit_index_sent == 2  # sent with S3's rpc round
    role, st, effects = core.handle("terminating_leader", (S3, ok_reply(1, 2)), st)
    assert role == "stop_delete"


def test_terminating_leader_resends_to_a_peer_that_lags() -> None:
    st = leader_with_delete_appended()
    _, st, effects = core.handle("leader", (S2, ok_reply(1, 2)), st)
    assert S3 in rpcs(effects)
    # S3 only confirms the first entry: every event re-sends to it
    role, st, effects = core.handle("terminating_leader", (S3, ok_reply(1, 1)), st)
    assert role == "terminating_leader"
    assert rpcs(effects)[S3].leader_commit == 2
    role, st, effects = core.handle("terminating_leader", "pipeline_rpcs", st)
    assert role == "terminating_leader" and S3 in rpcs(effects)
    assert core.tick("terminating_leader", st) == [effects[-1]]


def test_a_single_member_leader_stops_as_soon_as_it_applies_delete() -> None:
    st = leader(members=[S1], log=entries(1), term=1, machine=EolCounter())
    delete_cmd = (RA_CLUSTER, {"ts": 0}, "delete", "noreply")
    _, st, _ = core.handle("leader", ("command", delete_cmd), st)
    role, st, effects = core.handle("leader", written(1, 1, 2), st)
    assert role == "stop_delete"
    assert effects[0] == ("send_msg", "watcher", ("eol", 1))


def test_follower_applying_delete_acknowledges_and_waits_for_its_writes() -> None:
    st = server(S2, log=entries(1), term=1, machine=EolCounter())
    ents = (delete_entry(2, 1), (3, 1, cmd(("add", 10))))
    rpc = AppendEntriesRpc(1, S1, 3, 1, 1, ents)
    role, st, effects = core.handle("follower", rpc, st)
    assert role == "terminating_follower"
    # nothing after the delete entry is applied
    assert st.last_applied == 2 and st.machine_state == 1
    assert ("send_msg", "watcher", ("eol", 1)) in effects
    assert of_tag(effects, "cast")[0] == ("cast", S1, (S2, AppendEntriesReply(1, True, 4, 1, 1)))
    # only log events count now: an election timeout changes nothing
    role, st, effects = core.handle("terminating_follower", "election_timeout", st)
    assert (role, effects) == ("terminating_follower", [])
    role, st, effects = core.handle("terminating_follower", written(1, 2), st)
    assert role == "terminating_follower"
    assert of_tag(effects, "cast") == [("cast", S1, (S2, AppendEntriesReply(1, True, 4, 2, 1)))]
    role, st, effects = core.handle("terminating_follower", written(1, 3), st)
    assert role == "stop_delete"
    assert of_tag(effects, "cast") == [("cast", S1, (S2, AppendEntriesReply(1, True, 4, 3, 1)))]


def test_recovery_that_reaches_a_committed_delete_entry_reports_end_of_life() -> None:
    st = server(S2, log=[*entries(1), delete_entry(2, 1)], term=1, last_applied=2)
    assert core.recover(st) is True
    assert st.last_applied == 2
    st = server(S2, log=entries(1, 1), term=1, last_applied=2)
    assert core.recover(st) is False
