"""Stopping children.

`terminate` runs for a supervised gen_server only if it traps exits and its
`shutdown` is a time or ``infinity``; never on ``brutal_kill`` or ``kill``.
"""

from __future__ import annotations

import logging

import pytest

import actors
import supervision as supervisor

from .sup_helpers import down_of, events, expect, nothing, sup_reports, tagged
from .sup_workers import ScriptedStart, StaticSup, start_worker, worker_spec


def terminated(cid):
    return lambda m: type(m) is tuple and m[:2] == ("terminate", cid)


@pytest.mark.parametrize("how", ["terminate_child", "supervisor_exit"])
@pytest.mark.parametrize("shutdown", ["brutal_kill", 1000, "infinity"])
@pytest.mark.parametrize("trap", [True, False])
def test_terminate_matrix(me, trap, shutdown, how):
    spec = worker_spec(me.pid, "w", {"trap": trap}, shutdown=shutdown)
    ok, sup = supervisor.start_link(StaticSup, ({}, [spec]))
    w = expect(tagged("started"))[2]
    actors.monitor(w)
    if how == "terminate_child":
        assert supervisor.terminate_child(sup, "w") == "ok"
    else:
        actors.exit(sup, "shutdown")
    reason = expect(down_of(w))[4]
    assert reason == ("killed" if shutdown == "brutal_kill" else "shutdown")
    if trap and shutdown != "brutal_kill":
        assert expect(terminated("w"))[2] == "shutdown"
    else:
        nothing(terminated("w"))


def test_kill_never_runs_terminate_even_for_a_trapping_worker(me):
    ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(me.pid, "w", {"trap": True})]))
    w = expect(tagged("started"))[2]
    actors.exit(w, "kill")
    assert events("started", 1) == ["w"]  # restarted after `killed`
    nothing(terminated("w"))


def test_numeric_shutdown_kills_a_child_whose_terminate_is_too_slow(me, caplog):
    spec = worker_spec(me.pid, "slow", {"trap": True, "hold_terminate": True}, shutdown=100)
    ok, sup = supervisor.start_link(StaticSup, ({}, [spec]))
    w = expect(tagged("started"))[2]
    actors.monitor(w)
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        assert supervisor.terminate_child(sup, "slow") == "ok"
    assert expect(terminated("slow"))[2] == "shutdown"  # terminate started ...
    assert expect(down_of(w))[4] == "killed"  # ... but never finished
    # `killed` after the timeout is not a clean stop: a shutdown_error is reported
    assert sup_reports(caplog.records) == [("shutdown_error", "killed")]


@pytest.mark.parametrize(("restart", "reported"), [("permanent", True), ("transient", False)])
def test_a_child_that_stops_normally_when_asked_is_clean_only_if_not_permanent(
        me, caplog, restart, reported):
    spec = worker_spec(me.pid, "n", {"trap": True, "exit_as": "normal"}, restart=restart)
    ok, sup = supervisor.start_link(StaticSup, ({}, [spec]))
    expect(tagged("started"))
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        assert supervisor.terminate_child(sup, "n") == "ok"
    assert sup_reports(caplog.records) == ([("shutdown_error", "normal")] if reported else [])


def test_a_child_that_unlinked_itself_does_not_hang_the_supervisor(me, caplog):
    ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(me.pid, "u")]))
    u = expect(tagged("started"))[2]
    actors.send(u, ("$gen_cast", "unlink_parent"))
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        assert supervisor.terminate_child(sup, "u") == "ok"
    assert not actors.is_process_alive(u)
    assert sup_reports(caplog.records) == []


def test_the_exit_reason_takes_precedence_over_the_down_reason(me, caplog):
    """A child that died before the stop: DOWN says noproc, the queued EXIT says why."""
    gate = ScriptedStart(me.pid, "g", ["ignore"], gate=frozenset({1}))
    ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(me.pid, "w")]))
    w = expect(tagged("started"))[2]
    me_pid = me.pid
    actors.spawn(lambda: supervisor.start_child(sup, {"id": "g", "start": (gate, ())}))
    expect(tagged("attempt"))  # the supervisor is now busy inside a start
    actors.spawn(lambda: actors.send(me_pid, ("done", supervisor.terminate_child(sup, "w"))))
    actors.sleep(10)  # let the terminate_child request reach the supervisor's mailbox
    actors.exit(w, "boom")  # its EXIT is queued behind the request
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        actors.send(sup, ("go", 1))
        assert expect(tagged("done"))[1] == "ok"
    assert sup_reports(caplog.records) == [("shutdown_error", "boom")]
    assert supervisor.which_children(sup)[-1][:2] == ("w", None)  # consumed: no restart
    nothing(tagged("started"))


# ------------------------------------------------------- simple_one_for_one


def start_sofo(me, shutdown, opts):
    spec = {"id": "tmpl", "start": (start_worker, (me.pid,)), "shutdown": shutdown}
    ok, sup = supervisor.start_link(StaticSup, ({"strategy": "simple_one_for_one"}, [spec]))
    pids = [supervisor.start_child(sup, [i, opts])[1] for i in range(3)]
    events("started", 3)
    actors.monitor(sup)
    return sup, pids


def test_simple_one_for_one_signals_all_children_at_once(me):
    sup, pids = start_sofo(me, "infinity", {"trap": True, "hold_terminate": True})
    actors.exit(sup, "shutdown")
    # all three are inside terminate at the same time: none has been released yet
    assert sorted(events("terminate", 3)) == [0, 1, 2]
    nothing(down_of(sup))
    for pid in pids:
        actors.send(pid, "release")
    assert expect(down_of(sup))[4] == "shutdown"


def test_simple_one_for_one_kills_the_stragglers_when_the_one_timer_fires(me, caplog):
    sup, pids = start_sofo(me, 100, {"trap": True, "hold_terminate": True})
    for pid in pids:
        actors.monitor(pid)
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        actors.exit(sup, "shutdown")
        assert sorted(events("terminate", 3)) == [0, 1, 2]
        assert [expect(down_of(p))[4] for p in pids] == ["killed"] * 3
        assert expect(down_of(sup))[4] == "shutdown"
    reports = [r for r in caplog.records if getattr(r, "error_context", None) == "shutdown_error"]
    assert len(reports) == 1 and reports[0].reason == "killed"
    assert reports[0].offender["nb_children"] == 3


def test_simple_one_for_one_brutal_kill_runs_no_terminate(me):
    sup, pids = start_sofo(me, "brutal_kill", {"trap": True})
    actors.exit(sup, "shutdown")
    assert expect(down_of(sup))[4] == "shutdown"
    nothing(tagged("terminate"))
    assert not any(actors.is_process_alive(p) for p in pids)
