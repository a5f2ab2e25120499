"""Escalation: a supervisor that gives up exits with
``shutdown``; its parent treats that as a child exit like any other.
"""

from __future__ import annotations

import actors
import supervision as supervisor

from .sup_helpers import down_of, events, expect, nothing, tagged
from .sup_workers import StaticSup, worker_spec


def child_sup_spec(me, restart="permanent"):
    inner = ({"intensity": 1, "period": 5}, [worker_spec(me.pid, "w")])
    return {"id": "inner", "start": (supervisor.start_link, (StaticSup, inner)),
            "type": "supervisor", "restart": restart}


def pid_of(sup, cid):
    return {c: p for c, p, _t, _m in supervisor.which_children(sup)}[cid]


def crash_worker_twice(inner):
    """Two crashes in one second: the inner supervisor (1 in 5 s) gives up."""
    actors.exit(pid_of(inner, "w"), "boom")
    assert events("started", 1) == ["w"]
    w = pid_of(inner, "w")
    actors.monitor(inner)
    actors.exit(w, "boom")
    assert expect(down_of(inner))[4] == "shutdown"


def test_a_child_supervisor_that_gives_up_is_restarted_by_its_parent(me):
    ok, top = supervisor.start_link(StaticSup, ({}, [child_sup_spec(me), worker_spec(me.pid, "x")]))
    assert events("started", 2) == ["w", "x"]
    inner = pid_of(top, "inner")
    x = pid_of(top, "x")
    crash_worker_twice(inner)
    assert events("started", 1) == ["w"]  # the new inner supervisor started its worker
    new_inner = pid_of(top, "inner")
    assert new_inner not in (inner, None)
    assert pid_of(top, "x") == x  # one_for_one: the sibling is untouched
    assert supervisor.count_children(top) == {"specs": 2, "active": 2, "supervisors": 1,
                                              "workers": 1}


def test_repeated_escalation_brings_the_parent_down_too(me):
    ok, top = supervisor.start_link(StaticSup, ({}, [child_sup_spec(me), worker_spec(me.pid, "x")]))
    events("started", 2)
    x = pid_of(top, "x")
    actors.monitor(top)
    crash_worker_twice(pid_of(top, "inner"))
    events("started", 1)
    crash_worker_twice(pid_of(top, "inner"))
    assert expect(down_of(top))[4] == "shutdown"
    assert not actors.is_process_alive(x)
    # the test process is the top supervisor's parent: it sees the exit too
    assert expect(lambda m: m[:2] == ("EXIT", top))[2] == "shutdown"


def test_a_transient_child_supervisor_that_gives_up_is_not_restarted(me):
    ok, top = supervisor.start_link(StaticSup, ({}, [child_sup_spec(me, "transient")]))
    events("started", 1)
    crash_worker_twice(pid_of(top, "inner"))
    assert supervisor.which_children(top) == [("inner", None, "supervisor",
                                               ["supervision.supervisor"])]
    nothing(tagged("started"))


def test_stopping_the_top_supervisor_stops_the_whole_tree_depth_first(me):
    inner = ({}, [worker_spec(me.pid, "w1", {"trap": True}),
                  worker_spec(me.pid, "w2", {"trap": True})])
    specs = [worker_spec(me.pid, "first", {"trap": True}),
             {"id": "inner", "start": (supervisor.start_link, (StaticSup, inner)),
              "type": "supervisor"},
             worker_spec(me.pid, "last", {"trap": True})]
    ok, top = supervisor.start_link(StaticSup, ({}, specs))
    assert events("started", 4) == ["first", "w1", "w2", "last"]
    actors.exit(top, "shutdown")
    assert events("terminate", 4) == ["last", "w2", "w1", "first"]
