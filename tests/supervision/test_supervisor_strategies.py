"""Start order, stop order and who is restarted, for each strategy.

Children are `Worker`s that trap exits, so each one's `terminate` reports
``("terminate", id, reason)`` when the supervisor stops it; a child is made to
crash with an untrappable ``kill``, which runs no `terminate`, so the only
``terminate`` reports come from the supervisor's own stopping.
"""

from __future__ import annotations

import pytest

import actors
import supervision as supervisor

from .sup_helpers import events, expect, nothing, tagged, wait_down
from .sup_workers import StaticSup, start_worker, worker_spec

TRAP = {"trap": True}


def start(me: actors.Process, strategy: str, ids: list[str], **flags: object) -> actors.Pid:
    specs = [worker_spec(me.pid, i, TRAP) for i in ids]
    result = supervisor.start_link(StaticSup, ({"strategy": strategy, **flags}, specs))
    assert result[0] == "ok", result
    return result[1]


def pids_by_id(sup: actors.Pid) -> dict[object, object]:
    return {cid: pid for cid, pid, _t, _m in supervisor.which_children(sup)}


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all", "rest_for_one"])
def test_children_start_in_list_order_and_stop_in_reverse(me, strategy):
    sup = start(me, strategy, ["a", "b", "c"])
    assert events("started", 3) == ["a", "b", "c"]
    actors.exit(sup, "shutdown")
    assert events("terminate", 3) == ["c", "b", "a"]
    assert wait_down(sup) == "shutdown"


def test_one_for_one_restarts_only_the_failed_child(me):
    sup = start(me, "one_for_one", ["a", "b", "c"])
    events("started", 3)
    before = pids_by_id(sup)
    actors.exit(before["b"], "kill")
    after = pids_by_id(sup)
    assert events("started", 1) == ["b"]
    nothing(tagged("terminate"))
    assert after["a"] == before["a"] and after["c"] == before["c"]
    assert after["b"] != before["b"] and isinstance(after["b"], actors.Pid)


def test_one_for_all_stops_the_others_in_reverse_then_starts_all_in_order(me):
    sup = start(me, "one_for_all", ["a", "b", "c", "d"], intensity=5)
    events("started", 4)
    before = pids_by_id(sup)
    actors.exit(before["b"], "kill")
    assert events("terminate", 3) == ["d", "c", "a"]
    assert events("started", 4) == ["a", "b", "c", "d"]
    after = pids_by_id(sup)
    assert all(after[i] != before[i] for i in "abcd")


def test_rest_for_one_restarts_the_failed_child_and_those_started_after_it(me):
    sup = start(me, "rest_for_one", ["a", "b", "c", "d"], intensity=5)
    events("started", 4)
    before = pids_by_id(sup)
    actors.exit(before["b"], "kill")
    assert events("terminate", 2) == ["d", "c"]
    assert events("started", 3) == ["b", "c", "d"]
    after = pids_by_id(sup)
    assert after["a"] == before["a"]
    assert all(after[i] != before[i] for i in "bcd")


def test_rest_for_one_failure_of_the_last_child_touches_no_sibling(me):
    sup = start(me, "rest_for_one", ["a", "b", "c"])
    events("started", 3)
    actors.exit(pids_by_id(sup)["c"], "kill")
    assert events("started", 1) == ["c"]
    nothing(tagged("terminate"))


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
def test_group_restart_stops_temporary_siblings_and_drops_their_specs(me, strategy):
    specs = [worker_spec(me.pid, "a", TRAP),
             worker_spec(me.pid, "tmp", TRAP, restart="temporary"),
             worker_spec(me.pid, "c", TRAP)]
    ok, sup = supervisor.start_link(StaticSup, ({"strategy": strategy}, specs))
    events("started", 3)
    actors.exit(pids_by_id(sup)["a"], "kill")
    assert events("terminate", 2) == ["c", "tmp"]
    assert events("started", 2) == ["a", "c"]
    assert [cid for cid, *_ in supervisor.which_children(sup)] == ["c", "a"]


def test_one_for_all_also_starts_children_that_were_stopped(me):
    """As in OTP, a group restart starts every kept spec, running or not."""
    sup = start(me, "one_for_all", ["a", "b"], intensity=5)
    events("started", 2)
    assert supervisor.terminate_child(sup, "b") == "ok"
    assert events("terminate", 1) == ["b"]
    actors.exit(pids_by_id(sup)["a"], "kill")
    assert events("started", 2) == ["a", "b"]


def test_restarted_child_has_a_new_pid_and_the_old_one_is_dead(me, node):
    sup = start(me, "one_for_one", ["a"])
    old = expect(tagged("started"))[2]
    actors.exit(old, "kill")
    new = expect(tagged("started"))[2]
    assert new != old
    assert not actors.is_process_alive(old)
    assert pids_by_id(sup)["a"] == new


def test_simple_one_for_one_restarts_one_child_with_its_own_arguments(me):
    spec = {"id": "w", "start": (start_worker, (me.pid,))}
    ok, sup = supervisor.start_link(StaticSup, ({"strategy": "simple_one_for_one"}, [spec]))
    assert supervisor.which_children(sup) == []
    _, p1 = supervisor.start_child(sup, ["one", TRAP])
    _, p2 = supervisor.start_child(sup, ["two", TRAP])
    assert events("started", 2) == ["one", "two"]
    actors.exit(p2, "kill")
    assert events("started", 1) == ["two"]
    nothing(tagged("terminate"))
    pids = {pid for _id, pid, _t, _m in supervisor.which_children(sup)}
    assert p1 in pids and p2 not in pids and len(pids) == 2

