"""Local queries with a condition: the member answers once it has applied a given
entry (Ra's ``local_query/3`` with ``#{condition => {applied, {Idx, Term}}}``)."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from ra import api
from ra.local_queries import BadCondition, PendingQuery, park, parse_condition, take_ready
from ra.machine import Machine
from tests.ra.ra_proc_support import SERVER_CONFIG, Cluster, leader_of, wait_until

# ----------------------------------------------------------------- the pure part

TERMS = {1: 1, 2: 1, 3: 2, 4: 2}


@pytest.mark.parametrize(("condition", "last_applied", "ready"), [
    (("applied", (3, 2)), 2, False),   # not applied yet
    (("applied", (3, 2)), 3, True),    # applied with the term it waits for
    (("applied", (2, 1)), 4, True),    # applied long ago
    (("applied", (3, 1)), 4, False),   # the entry at 3 has another term: keeps waiting
    (("applied", (9, 2)), 4, False),
])
def test_a_parked_query_is_ready_once_its_entry_is_applied_with_its_term(
        condition: Any, last_applied: int, ready: bool) -> None:
    idx_term = parse_condition(condition)
    assert idx_term is not None
    pending = park([], idx_term, "from", "fun")
    still, done = take_ready(pending, last_applied, TERMS.get)
    assert (still, done) == (([], pending) if ready else (pending, []))


def test_ready_queries_are_answered_newest_first_and_the_rest_keep_their_order() -> None:
    pending: list[PendingQuery] = []
    for n, cond in enumerate([(1, 1), (4, 2), (2, 1), (3, 1)]):
        pending = park(pending, cond, f"f{n}", "fun")
    still, done = take_ready(pending, 2, TERMS.get)
    assert [q.from_ for q in done] == ["f2", "f0"]
    assert [q.from_ for q in still] == ["f3", "f1"]


def test_no_condition_and_bad_conditions() -> None:
    assert parse_condition(None) is None
    for bad in [("applied", 3), ("committed", (3, 1)), "applied"]:
        with pytest.raises(BadCondition):
            parse_condition(bad)


# ---------------------------------------------------------------- in a cluster


class IndexMachine(Machine):
    """Keeps the values applied; answers each command with its ``(index, term)``."""

    def init(self, config: dict[str, Any]) -> Any:
        return ()

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return ((*state, command), (meta["index"], meta["term"]))


def _query_in_background(sid: Any, options: dict[str, Any]) -> None:
    me = actors.self()

    def run() -> None:
        actors.send(me, ("query_result", api.local_query(sid, lambda s: s, options)))

    actors.spawn(run)


def test_a_follower_answers_a_conditional_query_once_it_applied_the_entry(
        cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "lq", IndexMachine(), cluster.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        leader = leader_of(cluster.ids)
        follower = next(sid for sid in cluster.ids if sid != leader)
        ok, (idx, term), _ = api.process_command(leader, "a")
        assert ok == "ok"
        # already applied (or soon): answered with the state holding "a"
        wait_until(lambda: api.local_query(follower, lambda s: s)[1][0][0] >= idx,
                   what="follower applied 'a'")
        res = api.local_query(follower, lambda s: s, {"condition": ("applied", (idx, term))})
        assert res[0] == "ok" and res[1][1] == ("a",) and res[2] == leader
        # the next entry is not there yet: the query waits for it
        _query_in_background(follower, {"condition": ("applied", (idx + 1, term)),
                                        "timeout": 10000})
        assert actors.receive(200, match=lambda m: m[0] == "query_result") is actors.TIMEOUT
        assert api.process_command(leader, "b") == ("ok", (idx + 1, term), leader)
        msg = actors.receive(10000, match=lambda m: m[0] == "query_result")
        ok, ((applied, _), state), who = msg[1]
        assert (ok, state, who) == ("ok", ("a", "b"), leader) and applied >= idx + 1


def test_a_condition_on_an_entry_of_another_term_is_never_met(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "lq", IndexMachine(), cluster.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        leader = leader_of(cluster.ids)
        ok, (idx, term), _ = api.process_command(leader, "a")
        res = api.local_query(leader, lambda s: s,
                              {"condition": ("applied", (idx, term + 1)), "timeout": 300})
        assert res == ("timeout", leader)
        assert api.leader_query(leader, lambda s: s, {"condition": ("bogus",)}) == (
            "error", ("invalid_condition", ("bogus",)))
